"""A comparison spec: candidate releases of ONE snapshot, and the rule that recommends one of them.

A comparison spec is a release spec without ``mechanism`` and ``params`` (the snapshot, grid, validation, gate
policy and timeouts all candidates share), plus a ``name`` and a list of ``candidates``. Each candidate names a
mechanism, its parameters (omitted: the mechanism's defaults) and optionally a ``grid``: parameter -> list of values,
expanded to one candidate per combination (``k: [5, 10, 20]`` and ``epsilon: [1, 2, 5]`` are nine candidates)::

    name: tdrive_first_look
    dataset: tdrive_demo
    bbox: [115.4, 39.4, 117.6, 41.1]
    candidates:
      - mechanism: objtrace
        params: {cell_size_m: 4000}
        grid: {epsilon: [1, 5]}
      - mechanism: glove

The mechanisms' own parameter checks run in :func:`tasks.compare.parse_comparison`; this module is pure (no
registry, no database) so that a malformed comparison is refused before anything heavy is imported.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from trajpub.errors import ParameterError
from trajpub.spec import DATASET_NAME, ReleaseSpec, parameter_core_schema

MAX_CANDIDATES = 30
CANDIDATE_KEYS = {"mechanism", "params", "grid"}
SHARED_ONLY = {"mechanism", "params"}  # per candidate, never in the shared part


@dataclass(frozen=True)
class Candidate:
    """One candidate release: a mechanism and its parameters (a grid already expanded)."""

    mechanism: str
    params: dict
    varied: tuple[str, ...] = ()  # the grid's parameters: the label names only these when there are any

    @property
    def label(self) -> str:
        """Its name in the review: the mechanism and its grid's values, or the parameters it was given, e.g.
        ``glove k=5``."""
        shown = " ".join(f"{k}={v}" for k, v in self.params.items() if k in self.varied or not self.varied)
        return f"{self.mechanism} {shown}".strip()


@dataclass(frozen=True)
class Comparison:
    """``shared``: the release spec every candidate shares (without mechanism and params)."""

    name: str
    shared: dict
    candidates: tuple[Candidate, ...]

    def release_spec(self, candidate: Candidate) -> dict:
        """The release spec of ``candidate``: the shared part with its mechanism and parameters."""
        return {**self.shared, "mechanism": candidate.mechanism, "params": dict(candidate.params)}

    def to_record(self) -> dict:
        """What governance and lineage say about the comparison: its name and candidates (parameters are the
        requester's, not statistics of the data; no seed)."""
        return {"name": self.name, "candidates": [{"mechanism": c.mechanism, "params": c.params}
                                                  for c in self.candidates]}

    @classmethod
    def __get_pydantic_core_schema__(cls, source: type, handler: Any) -> Any:
        """As a flow's parameter type (pydantic, which Prefect uses), as :class:`~trajpub.spec.ReleaseSpec` is: a
        mapping is parsed by :func:`parse_comparison` (the same checks and one-sentence errors as a YAML spec;
        never a seed: :meth:`~trajpub.spec.ReleaseSpec.without_seed`), a parsed comparison taken as it is; the JSON schema (below) is the comparison spec's layout, so that the
        deployment's parameter schema and the Prefect UI's run form show its fields."""
        return parameter_core_schema(cls, lambda data: parse_comparison(ReleaseSpec.without_seed(data)),
                                     handler.generate_schema(ReleaseSpec))

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict:
        """The release spec's fields without ``mechanism`` and ``params``, which move into each of the
        ``candidates`` (with a ``grid`` of values to expand), and the comparison's ``name``."""
        spec = handler.resolve_ref_schema(handler(schema))
        props = {k: v for k, v in spec["properties"].items() if k not in SHARED_ONLY}
        props["name"] = {"title": "Name", "type": "string", "pattern": f"^(?:{DATASET_NAME.pattern})$", "description":
                         "The comparison's name (default: the dataset's)"}
        props["candidates"] = {"title": "Candidates", "type": "array", "minItems": 1, "items": {
            "type": "object", "additionalProperties": False, "required": ["mechanism"], "properties": {
                "mechanism": {k: v for k, v in spec["properties"]["mechanism"].items() if k != "default"},
                "params": spec["properties"]["params"],
                "grid": {"title": "Grid", "type": "object", "description": "parameter -> list of values: one "
                         "candidate per combination", "additionalProperties": {"type": "array", "minItems": 1}}}},
            "description": f"At most {MAX_CANDIDATES} once the grids are expanded"}
        return {"title": "Comparison", "type": "object", "properties": props, "additionalProperties": False,
                "required": [*(r for r in spec.get("required", []) if r not in SHARED_ONLY), "candidates"]}


def expand_grid(entry: Any, where: str) -> list[Candidate]:
    """The candidates of one ``candidates`` entry: its parameters, times every combination of its grid's values
    (the grid's keys in the order written, the first varying slowest)."""
    if not isinstance(entry, dict):
        raise ParameterError("a candidate is a mapping with 'mechanism' and optionally 'params' and 'grid'", where)
    unknown = sorted(set(entry) - CANDIDATE_KEYS)
    if unknown:
        raise ParameterError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(CANDIDATE_KEYS))}",
                             where)
    mechanism = entry.get("mechanism")
    if not isinstance(mechanism, str) or not mechanism:
        raise ParameterError("a candidate needs 'mechanism' (a registered mechanism's name)", where)
    params = entry.get("params") or {}
    grid = entry.get("grid") or {}
    for key, value in (("params", params), ("grid", grid)):
        if not isinstance(value, dict):
            raise ParameterError(f"'{key}' must be a mapping of parameter names to values", f"{where}.{key}")
    both = sorted(set(params) & set(grid))
    if both:
        raise ParameterError(f"parameter(s) {', '.join(both)} are both fixed in 'params' and varied in 'grid'",
                             f"{where}.grid")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ParameterError(f"grid values of {key} must be a non-empty list, e.g. [1, 2, 5]",
                                 f"{where}.grid.{key}")
        if len({repr(v) for v in values}) != len(values):
            raise ParameterError(f"grid values of {key} repeat a value", f"{where}.grid.{key}")
    return [Candidate(mechanism, {**params, **dict(zip(grid, combo, strict=True))}, tuple(grid))
            for combo in itertools.product(*grid.values())]


def parse_comparison(data: Any) -> Comparison:
    """The comparison of a spec mapping: shared part checked as a release spec, candidates expanded and counted.
    Refuses a candidate listed twice, none, or more than :data:`MAX_CANDIDATES`."""
    if not isinstance(data, dict):
        raise ParameterError("a comparison spec must be a mapping of keys to values", "comparison spec")
    shared = {k: v for k, v in data.items() if k not in ("name", "candidates")}
    misplaced = sorted(SHARED_ONLY & set(shared))
    if misplaced:
        raise ParameterError(f"{', '.join(misplaced)} belong to each candidate, not to the comparison: list them "
                             "under 'candidates'", "comparison spec")
    name = data.get("name", data.get("dataset"))
    if not isinstance(name, str) or not DATASET_NAME.fullmatch(name):
        raise ParameterError(f"name must match {DATASET_NAME.pattern}, got {str(name)[:60]!r}", "comparison spec: name")
    entries = data.get("candidates")
    if not isinstance(entries, list) or not entries:
        raise ParameterError("a comparison needs 'candidates': a list of {mechanism, params, grid}",
                             "comparison spec: candidates")
    candidates = [c for i, entry in enumerate(entries) for c in expand_grid(entry, f"candidates[{i}]")]
    if len(candidates) > MAX_CANDIDATES:
        raise ParameterError(f"{len(candidates)} candidates after expanding the grids; at most {MAX_CANDIDATES} "
                             "per comparison (each DP candidate is charged its epsilon)", "comparison spec: candidates")
    keys = [(c.mechanism, repr(sorted(c.params.items()))) for c in candidates]
    twice = sorted({c.label for c, key in zip(candidates, keys, strict=True) if keys.count(key) > 1})
    if twice:
        raise ParameterError(f"candidate(s) listed twice: {'; '.join(twice)}", "comparison spec: candidates")
    ReleaseSpec.from_dict({**shared, "mechanism": candidates[0].mechanism})  # the shared part, checked once
    return Comparison(name, shared, tuple(candidates))


def utility_load(per_utility: dict) -> float:
    """How much of its utility floor a candidate uses: the mean over the floor's metrics of value / max (an
    error) or min / value (a score); 0 is perfect, 1 is at the limit. A candidate with no gated metric has load
    0 (the policy sets no floor for its kind: nothing to rank it by); a floored metric that could not be computed
    makes it infinite (the gate blocked it for that)."""
    loads = []
    for entry in per_utility.values():
        value = entry.get("value")
        if ("max" in entry or "min" in entry) and (value is None or not math.isfinite(value)):
            loads.append(math.inf)
        elif "max" in entry:
            loads.append(value / entry["max"] if entry["max"] > 0 else (0.0 if value == 0 else math.inf))
        elif "min" in entry:
            loads.append(entry["min"] / value if value > 0 else (0.0 if entry["min"] <= 0 else math.inf))
    return sum(loads) / len(loads) if loads else 0.0


def privacy_load(attacks: list[dict]) -> float | None:
    """The worst upper confidence bound of an attack risk as a share of its threshold (the default gate blocks
    above 1), over the audit's results (``risk_ci_high``, ``threshold``; an attack that failed has no risk and
    blocks on its own); None without a result."""
    loads = [a["risk_ci_high"] / a["threshold"] if a["threshold"] > 0 else (0.0 if a["risk_ci_high"] == 0 else math.inf)
             for a in attacks if a.get("risk_ci_high") is not None and a.get("threshold") is not None]
    return max(loads) if loads else None


def too_close(attacks: list[dict]) -> list[str]:
    """The audit rows whose risk interval crosses their threshold (``verdict`` "too close to call",
    :func:`audits.gate.verdict`), as ``attack`` or ``attack @ cells m``: a gate that decides on the point
    estimate may pass them, but another draw of the same release may not."""
    return [a["attack"] + (f" @ {a['resolution_m']:g} m" if a.get("resolution_m") else "")
            for a in attacks if a.get("verdict") == "too close to call"]


def indistinguishable(a: list[dict], b: list[dict]) -> bool:
    """Whether two candidates' audits cannot be ordered on one draw: every attack (at every cell size) both ran
    has risk intervals (``risk_ci_low``..``risk_ci_high``) that overlap, so neither is shown to be safer; another
    draw of the same releases may order them either way. False when they share no measured attack."""
    def intervals(attacks: list[dict]) -> dict:
        return {(x["attack"], x.get("resolution_m")): (x["risk_ci_low"], x["risk_ci_high"]) for x in attacks
                if x.get("risk_ci_low") is not None and x.get("risk_ci_high") is not None}

    mine, theirs = intervals(a), intervals(b)
    shared = mine.keys() & theirs.keys()
    return bool(shared) and all(mine[k][0] <= theirs[k][1] and theirs[k][0] <= mine[k][1] for k in shared)


@dataclass(frozen=True)
class Recommendation:
    """The recommended candidate's release id (None when no candidate passed the gate) and why."""

    release_id: int | None
    reason: str


def recommend(outcomes: list[dict]) -> Recommendation:
    """The candidate that passed the gate (privacy and the utility floor), every attack's interval clear of its
    threshold (:func:`too_close`: never one whose verdict is too close to call, whatever the policy's
    ``decide_on`` made of it), with the best utility: the lowest :func:`utility_load`; ties go to the lower
    :func:`privacy_load`, then the smaller epsilon charged, then the earlier candidate. ``outcomes``: one mapping
    per candidate with ``release_id``, ``label``, ``status``, ``gate`` (the gate's decision as stored in the
    release summary), ``attacks`` (the audit's results: ``risk_ci_high``, ``threshold``, ``verdict``) and
    ``epsilon`` (charged per the dataset's unit, None for a heuristic guarantee)."""
    passed = [o for o in outcomes if o["status"] not in ("failed", "blocked") and o["gate"]
              and not o["gate"].get("blocked", True)]
    passing = [o for o in passed if not too_close(o["attacks"])]
    close = (f"; {len(passed) - len(passing)} passed on the point estimate but are too close to call (an interval "
             "crosses its threshold), never recommended" if len(passed) > len(passing) else "")
    if not passing:
        return Recommendation(None, f"none of the {len(outcomes)} candidates passed the gate (privacy and the "
                                    f"utility floor) with every attack's interval under its threshold{close}: "
                                    "publish none, or compare other candidates")

    def key(o: dict) -> tuple:
        privacy = privacy_load(o["attacks"])
        return (utility_load(o["gate"].get("per_utility", {})), math.inf if privacy is None else privacy,
                o["epsilon"] or 0.0, outcomes.index(o))

    best = min(passing, key=key)
    load, privacy, *_ = key(best)
    gated = {n: e for n, e in best["gate"].get("per_utility", {}).items() if "max" in e or "min" in e}
    figures = ", ".join(f"{n} {e['value']:.3g} ({'max' if 'max' in e else 'min'} {e.get('max', e.get('min')):g})"
                        for n, e in gated.items())
    alike = [o["label"] for o in passing if o is not best and indistinguishable(best["attacks"], o["attacks"])]
    tie = (f". On privacy there is no winner on one draw: every attack's risk interval of {best['label']} overlaps "
           f"that of {', '.join(alike)}, so the ranking rests on utility and another draw may order their risks "
           "either way" if alike else "")
    return Recommendation(best["release_id"], (
        f"{best['label']} (release {best['release_id']}) passes privacy (the worst attack's upper confidence bound "
        f"at {privacy:.0%} of its threshold) and the utility floor, and uses the least of it of the "
        f"{len(passing)} candidate(s) that pass: mean {load:.0%} of its limits" + (f" ({figures})" if figures else "")
        + f"; {len(outcomes) - len(passed)} candidate(s) did not pass the gate{close}{tie}"))
