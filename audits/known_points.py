"""Re-identification from a few known points: unicity (attack A2; docs/design.md, The attacks).

The adversary has seen the target at ``p`` places and times (sightings, "exposed locations" [31], a few points
of the kind that make 95% of people unique, de Montjoye et al., "Unique in the Crowd", Sci. Rep. 3:1376, 2013,
the survey's ref. [15]) and looks for the released records consistent with them: a released point matches a
known point when it lies within ``spatial_tolerance_m`` metres and ``temporal_tolerance_s`` seconds of it
(a spatial tolerance plus a time window, as an ``ST_DWithin`` join would do, here on a k-d tree).

Reported, for every prefix ``p' = 1..p`` of the same sampled points:

- unicity ε_p' (de Montjoye): the share of targets whose knowledge is consistent with exactly one released
  record, and that record is theirs;
- the complementary risk: the mean of ``1/|C(K)|`` over targets whose own record is in ``C(K)``;
- the top-match rate, the headline: the adversary picks, among the records matching the most known points,
  one uniformly at random; success when it belongs to the target. It covers noisy releases where no record
  matches all ``p`` points (the candidates matching most of them are still the best guess).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from audits.attack import Attack, AttackParams
from audits.neighbours import flatten_hits
from audits.planar import epoch_seconds, planar_coordinates
from audits.result import MAX_EXAMPLES, AttackResult
from trajpub.errors import InputError
from trajpub.params import Scope

NAME = "known_points"
RECORD_KEYS = ("object_id", "traj_id")

_P = Scope(NAME)


@dataclass(frozen=True)
class KnownPointsParams(AttackParams):
    """Parameters of :class:`KnownPoints`.

    n_points: p, the number of points the adversary knows (1..5 in the survey's references; any p >= 1).
    spatial_tolerance_m: r, the largest distance in metres between a known point and a matching released point.
    temporal_tolerance_s: Δt, the largest time difference in seconds; ``None`` for a purely spatial attack
        (the adversary knows places, not times; needed for releases without timestamps).
    record_key: what a released record is. ``"object_id"``: the release keeps one pseudonym per object, so all
        of its points form one record (de Montjoye's setting, and the survey's one trajectory per taxi); the
        auditor's ``object_id`` stands for that pseudonym. ``"traj_id"``: every released trajectory is a
        separate record, and the adversary's points of a target are drawn from the raw points of its owner in
        the record's time span (so the release needs timestamps).
    max_targets: attack at most this many targets, drawn at random; ``None`` attacks every record with an owner.
    seed: seed of the generator that draws the targets and the known points; ``None`` draws fresh entropy.
    confidence: the confidence level of the reported Wilson interval.
    """

    scope = _P

    n_points: int = 4
    spatial_tolerance_m: float = 200.0
    temporal_tolerance_s: float | None = 1800.0
    record_key: str = "object_id"
    max_targets: int | None = None
    seed: int | None = None
    confidence: float = 0.95

    def __post_init__(self) -> None:
        _P.require_int(self.n_points, "n_points", 1)
        _P.require_real(self.spatial_tolerance_m, "spatial_tolerance_m", 0, open_low=False)
        if self.temporal_tolerance_s is not None:
            _P.require_real(self.temporal_tolerance_s, "temporal_tolerance_s", 0, open_low=False)
        _P.require_choice(self.record_key, "record_key", RECORD_KEYS)
        _P.require_optional_int(self.max_targets, "max_targets", 1)
        self.require_seed_and_confidence()

    @property
    def timed(self) -> bool:
        return self.temporal_tolerance_s is not None


class KnownPoints(Attack[KnownPointsParams]):
    """Partial-knowledge re-identification (A2) for truthful releases: ``release`` carries ``object_id``.

    Targets are the released records whose ``object_id`` is a raw object (dummies are not targets). For each
    target the adversary's knowledge K is ``p`` raw points of its owner drawn uniformly without replacement
    (all of them when the owner has fewer). A released record's score is the number of points of K it matches.
    Success (expected, ties broken uniformly at random, as in :mod:`audits.signature_linkage`): the share of the
    records with the highest score that belong to the target's owner; when no record matches any point, the
    adversary guesses among all records. Baseline: a random guess, 1/(number of released records).

    Cost: one k-d tree over the released points (x, y and time scaled so that Δt becomes r) queried with a box
    around the ``targets x p`` known points, refined by the exact distance and time difference.
    """

    @property
    def name(self) -> str:
        return NAME

    @property
    def raw_columns(self) -> tuple[str, ...]:
        timed = self.params.timed or self.params.record_key == "traj_id"
        return ("object_id", "lon", "lat", *(("t",) if timed else ()))

    @property
    def release_columns(self) -> tuple[str, ...]:
        timed = self.params.timed or self.params.record_key == "traj_id"
        key = ("traj_id",) if self.params.record_key == "traj_id" else ()
        return ("object_id", *key, "lon", "lat", *(("t",) if timed else ()))

    def _attack(self, raw: pd.DataFrame, release: pd.DataFrame) -> AttackResult:
        p = self.params
        rng = np.random.default_rng(p.seed)
        raw_xy, rel_xy = planar_coordinates(raw, release)
        need_t = p.timed or p.record_key == "traj_id"
        raw_t = epoch_seconds(raw["t"]) if need_t else np.zeros(len(raw))
        rel_t = epoch_seconds(release["t"]) if need_t else np.zeros(len(release))
        if need_t and not np.isfinite(rel_t).any():
            raise InputError("the release has no timestamps (t is NaT): use temporal_tolerance_s=None and "
                             "record_key='object_id' for a spatial-only attack", f"{NAME}: release frame")
        units, unit_of_point, unit_owner = _records(release, p.record_key)
        objects = pd.Index(pd.unique(raw["object_id"].astype(str)))
        owner_col = objects.get_indexer(unit_owner)
        targets = np.flatnonzero(owner_col >= 0)
        if len(targets) == 0:
            raise InputError("no released record belongs to a raw object: the attack needs a truthful release",
                             f"{NAME}: release frame")
        if p.max_targets is not None and len(targets) > p.max_targets:
            targets = np.sort(rng.choice(targets, p.max_targets, replace=False))
        knowledge = self._knowledge(raw, raw_xy, raw_t, rel_t, unit_of_point, unit_owner, targets, rng)
        rel_ok = np.isfinite(rel_xy).all(axis=1) & np.isfinite(rel_t)
        hits = _matches(knowledge, raw_xy, raw_t, rel_xy[rel_ok], rel_t[rel_ok], unit_of_point[rel_ok], p)
        owner_units = pd.Series(unit_owner).value_counts()
        n_own_units = owner_units.reindex(unit_owner[targets]).to_numpy()
        outcome = {q: _outcome(hits, knowledge, targets, unit_owner, n_own_units, len(units), q)
                   for q in range(1, p.n_points + 1)}
        full = outcome[p.n_points]
        baseline = 1 / len(units)
        n_known = knowledge.groupby("target").size().reindex(np.arange(len(targets)), fill_value=0).to_numpy()
        evidence: dict[str, Any] = {
            "n_points": p.n_points,
            "spatial_tolerance_m": p.spatial_tolerance_m,
            "temporal_tolerance_s": p.temporal_tolerance_s,
            "record_key": p.record_key,
            "n_records": len(units),
            "n_targets_with_fewer_points": int((n_known < p.n_points).sum()),
            "n_targets_without_knowledge": int((n_known == 0).sum()),
            "baseline_kind": "random guess among the released records",
            "unicity_by_p": {str(q): float(o["unique"].mean()) for q, o in outcome.items()},
            "inverse_candidates_by_p": {str(q): float(o["inverse"].mean()) for q, o in outcome.items()},
            "top_match_by_p": {str(q): float(o["top"].mean()) for q, o in outcome.items()},
            "owner_consistent_share": float(full["owner_consistent"].mean()),
            "candidate_set_size_quantiles": {
                q: float(np.quantile(full["candidates"], float(q))) for q in ("0.5", "0.9", "0.99", "1.0")},
            "examples": _examples(full, units, unit_owner, targets, n_known),
        }
        return AttackResult(attack=NAME, n_targets=len(targets), n_successes=float(full["top"].sum()),
                            baseline=baseline, evidence=evidence, confidence=p.confidence)

    def _knowledge(self, raw: pd.DataFrame, raw_xy: np.ndarray, raw_t: np.ndarray, rel_t: np.ndarray,
                   unit_of_point: np.ndarray, unit_owner: np.ndarray, targets: np.ndarray,
                   rng: np.random.Generator) -> pd.DataFrame:
        """The raw points each target's adversary knows: rows (target position, order j, raw row index)."""
        p = self.params
        usable = np.isfinite(raw_xy).all(axis=1)
        if p.timed or p.record_key == "traj_id":
            usable &= np.isfinite(raw_t)
        owners = raw["object_id"].astype(str).to_numpy()
        rows = np.flatnonzero(usable)
        order = np.lexsort((raw_t[rows], owners[rows]))
        rows = rows[order]
        by_owner = pd.Series(np.arange(len(rows))).groupby(owners[rows]).agg(["min", "max"])
        if p.record_key == "traj_id":
            span = pd.DataFrame({"unit": unit_of_point, "t": rel_t}).groupby("unit")["t"].agg(["min", "max"])
        parts = []
        for position, unit in enumerate(targets):
            owner = unit_owner[unit]
            if owner not in by_owner.index:
                continue
            lo, hi = by_owner.loc[owner, "min"], by_owner.loc[owner, "max"] + 1
            pool = rows[lo:hi]
            if p.record_key == "traj_id":
                t0, t1 = span.loc[unit, "min"], span.loc[unit, "max"]
                times = raw_t[pool]
                pool = pool[np.searchsorted(times, t0, "left"):np.searchsorted(times, t1, "right")]
            if len(pool) == 0:
                continue
            chosen = rng.choice(pool, min(p.n_points, len(pool)), replace=False)
            parts.append(pd.DataFrame({"target": position, "j": np.arange(len(chosen)), "raw_row": chosen}))
        if not parts:
            raise InputError("no target has a raw point to know (no usable raw points of the records' owners)",
                             f"{NAME}: raw frame")
        return pd.concat(parts, ignore_index=True)


def _records(release: pd.DataFrame, record_key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Released records: their labels, the record of every released point, and each record's owner (str)."""
    owners = release["object_id"].astype(str)
    if record_key == "object_id":
        codes, units = pd.factorize(owners, sort=True)
        return np.asarray(units), codes, np.asarray(units, dtype=object).astype(str)
    codes, units = pd.factorize(release["traj_id"], sort=True)
    if (codes < 0).any():
        raise InputError("column traj_id has missing values", f"{NAME}: release frame")
    per_unit = pd.DataFrame({"unit": codes, "owner": owners.to_numpy()}).groupby("unit")["owner"]
    shared = per_unit.nunique()
    if (shared > 1).any():
        raise InputError(f"traj_id {units[int(np.argmax(shared.to_numpy() > 1))]!r} spans several object_id "
                         "values; a record must have one owner", f"{NAME}: release frame")
    return np.asarray(units), codes, per_unit.first().to_numpy().astype(str)


def _matches(knowledge: pd.DataFrame, raw_xy: np.ndarray, raw_t: np.ndarray, rel_xy: np.ndarray,
             rel_t: np.ndarray, rel_unit: np.ndarray, p: KnownPointsParams) -> pd.DataFrame:
    """Unique (target, j, unit) triples: released record ``unit`` matches known point j of the target."""
    rows = knowledge["raw_row"].to_numpy()
    q_xy, q_t = raw_xy[rows], raw_t[rows]
    empty = pd.DataFrame({"target": [], "j": [], "unit": []}, dtype=np.int64)
    if len(rel_xy) == 0:
        return empty
    box = max(p.spatial_tolerance_m, 1e-6)
    scale = box / max(p.temporal_tolerance_s, 1e-6) if p.timed else 0.0
    t0 = float(np.min(rel_t)) if p.timed else 0.0
    tree = cKDTree(np.column_stack([rel_xy, (rel_t - t0) * scale]))
    found = tree.query_ball_point(np.column_stack([q_xy, (q_t - t0) * scale]), r=box * (1 + 1e-9), p=np.inf,
                                  return_sorted=False)
    query, hit = flatten_hits(found)
    near = np.hypot(rel_xy[hit, 0] - q_xy[query, 0], rel_xy[hit, 1] - q_xy[query, 1]) <= p.spatial_tolerance_m
    if p.timed:
        near &= np.abs(rel_t[hit] - q_t[query]) <= p.temporal_tolerance_s
    if not near.any():
        return empty
    pairs = pd.DataFrame({"target": knowledge["target"].to_numpy()[query[near]],
                          "j": knowledge["j"].to_numpy()[query[near]], "unit": rel_unit[hit[near]]})
    return pairs.drop_duplicates(ignore_index=True)


def _outcome(hits: pd.DataFrame, knowledge: pd.DataFrame, targets: np.ndarray, unit_owner: np.ndarray,
             n_own_units: np.ndarray, n_units: int, q: int) -> pd.DataFrame:
    """Per target, with the first ``q`` known points: candidate-set size, unicity, 1/|C(K)|, top-match success."""
    n_targets = len(targets)
    k = knowledge[knowledge["j"] < q].groupby("target").size().reindex(np.arange(n_targets), fill_value=0)
    k = k.to_numpy()
    score = hits[hits["j"] < q].groupby(["target", "unit"]).size().rename("score").reset_index()
    target_owner = unit_owner[targets]
    score["own"] = unit_owner[score["unit"].to_numpy()] == target_owner[score["target"].to_numpy()]
    score["k"] = k[score["target"].to_numpy()]
    score["full"] = score["score"] == score["k"]
    score["full_own"] = score["full"] & score["own"]
    best = score.groupby("target")["score"].transform("max")
    score["top"] = score["score"] == best
    score["top_own"] = score["top"] & score["own"]
    per = score.groupby("target")[["full", "full_own", "top", "top_own"]].sum()
    per = per.reindex(np.arange(n_targets), fill_value=0)
    no_evidence = per["top"].to_numpy() == 0  # no record matches any known point: a guess among all records
    top = np.where(no_evidence, n_own_units / n_units, per["top_own"] / np.maximum(per["top"], 1))
    candidates = per["full"].to_numpy()
    own_full = per["full_own"].to_numpy()
    has_knowledge = k > 0
    return pd.DataFrame({
        "candidates": np.where(has_knowledge, candidates, n_units),
        "owner_consistent": has_knowledge & (own_full > 0),
        "unique": has_knowledge & (candidates == 1) & (own_full == 1),
        "inverse": np.where(has_knowledge & (candidates > 0), own_full / np.maximum(candidates, 1), 0.0),
        "top": top,
    })


def _examples(full: pd.DataFrame, units: np.ndarray, unit_owner: np.ndarray, targets: np.ndarray,
              n_known: np.ndarray) -> list[dict[str, Any]]:
    """Targets singled out by their known points: the record, its owner and how many points it took."""
    unique = np.flatnonzero(full["unique"].to_numpy())[:MAX_EXAMPLES]
    return [{"record": _plain(units[targets[i]]), "owner": str(unit_owner[targets[i]]),
             "known_points": int(n_known[i]), "consistent_records": 1} for i in unique]


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value

