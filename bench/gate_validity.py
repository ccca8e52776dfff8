"""The gate's validity (docs/design.md, "Audits and the gate"): how often the default gate policy passes each
candidate over repeated draws, on the T-Drive sample (or the taxis it leaves out), with the positive controls
that it must block.

Candidates: ObjTrace ε 1, 2, 5 per taxi, CityTrace ε 5 per taxi, AdaTrace, DPT, the prefix tree, GLOVE, W4M and Mixzone at the parameters
of their example specs (``mechanisms/*/example.yaml``; ObjTrace ε 1 and 2 change only ε), and the positive controls of
``tests/controls`` (ObjTrace ε 5 with 2, 5, 10, 20 % of the input's trajectory records copied in, and every
record replayed as synthetic). Mixzone's example reads Helsinki's roads: here it runs with the same parameters on
the synthetic central-Beijing street grid of :func:`bench.table4.central_beijing_network`, with the bbox and
preparation of the T-Drive W4M example.

One draw = what one release of the candidate does, in process, through the production functions: the sample
cleaned by the flow's validation rules (:func:`bench.tdrive.load_clean`), prepared by the spec
(:func:`tasks.prepare.prepare_partition`), the mechanism by the Dask runner (:func:`tasks.protect.run`) on two
partitions of whole objects, timestamps coarsened (:func:`tasks.check_output.coarsen_times`), then the audit and
the gate (:func:`tasks.audit.run`) with the default policy in the dataset's time zone. Each draw has its own
seed (``--seed`` + draw number) for the mechanism and the audit's utility; nothing is tuned on the sample.

    .venv/bin/python -m bench.gate_validity [--draws 20] [--only objtrace_e5,copy_5] [--workers 2] [--fleet unseen]
    .venv/bin/python -m bench.gate_validity --suite blurring --fleet sf --only citytrace,blur_translate --draws 3

The blurring controls (``blur_<transform>``: CityTrace ε 5 per taxi with 10% of its records replaced by members'
records moved, turned, mirrored, reversed, thinned, noised, re-timed, spliced or several at once,
:mod:`tests.controls.blurring`) are positive controls of the attacks on time and shape; ``--suite blurring`` keeps
their draws, and the negative controls drawn beside them, in their own results file and tables. ``--fleet sf`` draws on the San
Francisco sample (:mod:`bench.sf_data`) with its bbox, window and time zone.

``--attacks membership_time,membership_shape`` runs only those attacks of the default policy in each draw (no
utility, no other attack): a cheaper draw for positive controls, since the default policy blocks whenever any of
its attacks blocks (``block_if_any``), so a draw blocked by the named attacks is blocked by the default gate; the
verdicts and "caught by" are then those attacks' only. Negative controls need the whole gate.

``--fleet unseen`` draws on the T-Drive taxis the project has never seen (the even ids,
:mod:`bench.tdrive_unseen`) instead of the bundled sample (the odd ids), cleaned and prepared the same way.

Outputs: ``bench/gate_validity/results.json`` (every draw, by fleet; a re-run of some candidates on a fleet replaces
theirs on that fleet) and the tables of ``bench/GATE_VALIDITY_RESULTS.md`` (between its markers; the text around
them is kept).
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from distributed import Client, Future
from distributed import wait as wait_futures

from audits.controls import UNMEASURED
from audits.gate import GatePolicy, evaluate_gate, worst_per_attack
from bench.fgs_pufferfish import TDRIVE_SAMPLE, machine
from bench.sf_data import SF_BBOX, SF_SAMPLE, SF_TZ, SF_WINDOW, load_clean_sf
from bench.table4 import central_beijing_network
from bench.tdrive import TZ, load_clean
from bench.tdrive_unseen import UNSEEN
from bench.utility_data import TDRIVE_WINDOW
from mechanisms.registry import example_spec_file, mechanism
from tasks import audit, check_output
from tasks.dask_cluster import local_cluster
from tasks.prepare import prepare_partition
from tasks.protect import run as run_mechanism
from tests.controls.blurring import TRANSFORMS, BlurControl
from tests.controls.mechanism import CopyControl, Replay
from trajpub.candidate import CandidateRelease, Shape
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.spec import ReleaseSpec, read_spec_file
from trajpub.window import ReleaseWindow

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "gate_validity"
RESULTS_MD = ROOT / "GATE_VALIDITY_RESULTS.md"
BEGIN, END = "<!-- tables:begin -->", "<!-- tables:end -->"
SUITES = {"main": ("results.json", BEGIN, END),
          "blurring": ("blurring.json", "<!-- blurring:begin -->", "<!-- blurring:end -->")}
"""``--suite``: the results file and the markers of its tables in ``GATE_VALIDITY_RESULTS.md``. The blurring suite
(default policy v7, the blurring controls and the negative controls beside them) has its own, so that its
draws do not replace the main tables' (drawn under earlier policies)."""
NETWORK_NAME = "synthetic central Beijing"


@dataclass(frozen=True)
class Fleet:
    """A fleet drawn on: its data file, its title in the tables, how it is read and cleaned, the public window and
    time zone of its releases, and its public bbox (None: the example spec's, Beijing's)."""

    path: Path
    title: str
    load: Callable[[], tuple[pd.DataFrame, dict]]
    window: ReleaseWindow = TDRIVE_WINDOW
    timezone: str = TZ
    bbox: tuple[float, float, float, float] | None = None


FLEETS = {"sample": Fleet(TDRIVE_SAMPLE, "the bundled sample (odd taxi ids)", lambda: load_clean(TDRIVE_SAMPLE)),
          "unseen": Fleet(UNSEEN, "the taxis the project has never seen (even taxi ids)", lambda: load_clean(UNSEEN)),
          "sf": Fleet(SF_SAMPLE, "the San Francisco sample (Cabspotting, odd cabs, 3 days; bench.sf_data)",
                      load_clean_sf, SF_WINDOW, SF_TZ, SF_BBOX)}
"""``--fleet``: what is drawn on. Beijing's candidates run there at their example specs; San Francisco's at the same
params with the Bay Area's bbox and window (:mod:`bench.sf_data`)."""


@dataclass(frozen=True)
class Candidate:
    """One row: ``key`` (for ``--only``), a label, the mechanism (registered name or a test-only instance), the
    example spec whose params and preparation it uses, params over the spec's, and whether it must be blocked
    in every draw (a positive control)."""

    key: str
    label: str
    mechanism: str | Mechanism
    spec: Path
    params: dict = field(default_factory=dict)
    control: bool = False
    spec_params: bool = True
    """False: the example spec's params are not the mechanism's (the replay control takes none)."""

    def mech(self) -> Mechanism:
        return mechanism(self.mechanism) if isinstance(self.mechanism, str) else self.mechanism

    def release_spec(self, fleet: Fleet | None = None) -> ReleaseSpec:
        """The example spec with the candidate's mechanism and params (Mixzone: the T-Drive W4M example's
        bbox and preparation, Mixzone's params), on ``fleet``'s bbox and window when it has its own."""
        spec = read_spec_file(self.spec)
        if fleet is not None and fleet.bbox is not None:
            spec = {**spec, "bbox": list(fleet.bbox), "window_start": fleet.window.start.isoformat(),
                    "window_end": fleet.window.end.isoformat()}
        if self.mechanism == "mixzone":
            base = read_spec_file(example_spec_file("w4m"))
            spec = {**base, "mechanism": "mixzone", "params": spec["params"]}
        base = spec.get("params", {}) if self.spec_params else {}
        return ReleaseSpec.from_dict({**spec, "mechanism": self.mech().name, "params": {**base, **self.params}})


def _objtrace(key: str, label: str, epsilon: float) -> Candidate:
    return Candidate(key, label, "objtrace", example_spec_file("objtrace"), {"epsilon": epsilon})


def _copy(percent: float) -> Candidate:
    return Candidate(f"copy_{percent:g}", f"copy control {percent:g}% (ObjTrace eps 5 + copies)", CopyControl(),
                     example_spec_file("objtrace"), {"copy_percent": percent}, control=True)


def _blur(transform: str, percent: float = 10.0) -> Candidate:
    return Candidate(f"blur_{transform}", f"blurring control: {transform}, {percent:g}% (CityTrace eps 5 + members)",
                     BlurControl(), example_spec_file("citytrace"), {"blur_percent": percent, "transform": transform},
                     control=True)


CANDIDATES = [
    _objtrace("objtrace_e1", "ObjTrace eps 1 per taxi", 1.0),
    _objtrace("objtrace_e2", "ObjTrace eps 2 per taxi", 2.0),
    _objtrace("objtrace_e5", "ObjTrace eps 5 per taxi (the former demo)", 5.0),
    Candidate("citytrace", "CityTrace eps 5 per taxi (demo)", "citytrace", example_spec_file("citytrace")),
    Candidate("adatrace", "AdaTrace (example)", "adatrace", example_spec_file("adatrace")),
    Candidate("dpt", "DPT (example)", "dpt", example_spec_file("dpt")),
    Candidate("prefix_tree", "prefix tree (example)", "prefix_tree", example_spec_file("prefix_tree")),
    *(_copy(p) for p in (2, 5, 10, 20)),
    Candidate("replay", "replay control (every record as synthetic)", Replay(), example_spec_file("objtrace"),
              control=True, spec_params=False),
    *(_blur(t) for t in (*TRANSFORMS, "mixture")),
    Candidate("glove", "GLOVE (example)", "glove", example_spec_file("glove")),
    Candidate("w4m", "W4M (example)", "w4m", example_spec_file("w4m")),
    Candidate("mixzone", "Mixzone (example params, synthetic Beijing streets)", "mixzone",
              example_spec_file("mixzone"), {"road_network": NETWORK_NAME}),
]


def inputs_and_params(candidate: Candidate, spec: ReleaseSpec, window: ReleaseWindow = TDRIVE_WINDOW
                      ) -> tuple[PublicInputs, Any]:
    """The public inputs and the mechanism's parameters, resolved as the flow's public-inputs step does (Mixzone:
    the synthetic street grid in memory instead of a network read from PostGIS)."""
    mech = candidate.mech()
    params = mech.parse_params(dict(spec.params))
    if mech.public_inputs(params).get("road_network") == NETWORK_NAME:
        inputs = PublicInputs(spec.grid, central_beijing_network(spec.grid), "synthetic", window=window)
    else:
        inputs = PublicInputs(spec.grid, window=window)
    return inputs, mech.resolved(params, inputs)


def prepared_parts(clean: pd.DataFrame, spec: ReleaseSpec, cap: int | None) -> list[pd.DataFrame]:
    """The clean sample prepared by ``spec`` (the flow's prepare function), in two partitions of whole objects."""
    half = pd.factorize(clean["object_id"])[0] % 2
    return [prepare_partition(clean[half == p].reset_index(drop=True), p, spec.prepare, spec.grid, cap)
            for p in (0, 1)]


def worker_cpu_s(client: Client) -> float:
    return float(sum(client.run(time.process_time).values()))


@dataclass(frozen=True)
class Setup:
    """What every draw of a candidate shares: its spec, public inputs, parsed params and prepared partitions."""

    candidate: Candidate
    spec: ReleaseSpec
    inputs: PublicInputs
    params: Any
    parts: list[pd.DataFrame]

    @classmethod
    def of(cls, candidate: Candidate, clean: pd.DataFrame, fleet: Fleet | None = None) -> Setup:
        spec = candidate.release_spec(fleet)
        inputs, params = inputs_and_params(candidate, spec, TDRIVE_WINDOW if fleet is None else fleet.window)
        return cls(candidate, spec, inputs, params,
                   prepared_parts(clean, spec, candidate.mech().max_records_per_object(params)))



@dataclass(frozen=True)
class Released:
    """One release of a candidate: the candidate release, the auditor's raw frame on the cluster (with the
    ``member`` column of a synthetic release), the number of control objects held out (None: not synthetic)."""

    candidate: CandidateRelease
    raw: Future
    n_controls: int | None
    mechanism_s: float


def release(client: Client, setup: Setup, policy: GatePolicy, seed: int) -> Released:
    """The candidate released as the flow's protect stage makes it (:func:`tasks.stages.prepare_and_protect`):
    a synthetic release's control objects (the policy's share, by object) held out of the mechanism's input,
    the mechanism on the Dask runner, the output's timestamps coarsened."""
    mech = setup.candidate.mech()
    began = time.perf_counter()
    prepared = client.scatter(setup.parts, hash=False)
    rng = np.random.default_rng(seed)
    held_out = None
    if mech.shape is Shape.SYNTHETIC:
        held_out = audit.hold_out_controls(client, prepared, policy.controls.share, rng.spawn(1)[0])
    released = run_mechanism(mech, client, prepared if held_out is None else audit.without(client, prepared, held_out),
                             setup.inputs, setup.params, rng)
    released = check_output.coarsen_times(released, setup.spec.time_precision_s)
    raw = audit.raw_on_cluster(client, prepared, held_out)
    wait_futures(raw)  # the partitions are let go when this returns (the raw frame stays)
    return Released(released, raw, None if held_out is None else len(held_out), time.perf_counter() - began)


def attacks_only(client: Client, released: Released, policy: GatePolicy, bbox: tuple[float, float, float, float]
                 ) -> audit.AuditOutcome:
    """:func:`tasks.audit.run` without the utility figures, for a policy narrowed to some attacks
    (:func:`narrowed`): their results and the gate's decision on them alone."""
    kind = released.candidate.shape.audit_kind
    candidate_f = client.scatter(released.candidate, hash=False, direct=True)
    frames = client.submit(audit.attack_frames, released.raw, candidate_f, pure=False)
    attack_raw, release_f = (client.submit(operator.getitem, frames, i, pure=False) for i in (0, 1))
    wait_futures([attack_raw, release_f])  # as tasks.audit.run: the time limits count from here
    by_resolution, failures, not_applicable = audit.run_at_resolutions(client, policy, attack_raw, release_f, kind,
                                                                       bbox)
    results = worst_per_attack(policy, by_resolution)
    decision = evaluate_gate(policy, results, kind, {}, failures, not_applicable)
    return audit.AuditOutcome(results, failures, not_applicable, decision, policy, {}, by_resolution)


def narrowed(policy: GatePolicy, names: list[str]) -> GatePolicy:
    """The policy with only the attacks ``names`` (their ceilings and params) and no utility floor."""
    unknown = set(names) - set(policy.max_risk)
    if unknown:
        raise SystemExit(f"not attacks of the policy: {', '.join(sorted(unknown))}")
    def kept(mapping: dict) -> dict:
        return {n: v for n, v in mapping.items() if n in names}

    return replace(policy, max_risk=kept(policy.max_risk), attack_params=kept(policy.attack_params),
                   attack_products=kept(policy.attack_products), when_not_applicable=kept(policy.when_not_applicable),
                   utility={})


def one_draw(client: Client, setup: Setup, policy: GatePolicy, seed: int, only_attacks: bool = False) -> dict:
    """One release (:func:`release`), its audit and gate (:func:`tasks.audit.run`; ``only_attacks``: the policy's
    attacks alone, :func:`attacks_only`), and what the bench records."""
    cpu0, began = worker_cpu_s(client) + time.process_time(), time.perf_counter()
    released = release(client, setup, policy, seed)
    outcome = (attacks_only(client, released, policy, setup.spec.grid.bbox) if only_attacks else
               audit.run(client, released.raw, released.candidate, policy, seed, bbox=setup.spec.grid.bbox))
    attacks = {}
    for resolution, r in outcome.by_resolution:
        entry = {k: v for k, v in r.to_dict().items() if k not in ("evidence", "controls")}
        if r.controls is not None:
            entry["controls"] = {k: v for k, v in r.controls.to_dict().items()
                                 if k in ("statistic", "n_members", "n_controls", "member_value", "control_value",
                                          "difference_ci")}
        attacks.setdefault(r.attack, {})[f"{resolution:g}"] = entry
    return {"seed": seed, "blocked": outcome.decision.blocked, "privacy": outcome.decision.privacy,
            "utility": outcome.decision.utility, "reasons": outcome.decision.reasons, "attacks": attacks,
            "verdicts": {name: e.get("verdict", e["status"]) for name, e in outcome.decision.per_attack.items()},
            "failures": outcome.failures, "not_applicable": outcome.not_applicable,
            "n_controls": released.n_controls,
            "released_records": released.candidate.metadata.get("released_records"),
            "mechanism_s": released.mechanism_s, "draw_s": time.perf_counter() - began,
            "cpu_s": worker_cpu_s(client) + time.process_time() - cpu0,
            "loadavg": Path("/proc/loadavg").read_text().split()[:3]}


def candidate(key: str) -> Candidate:
    [found] = [c for c in CANDIDATES if c.key == key]
    return found


def default_policy(timezone: str = TZ) -> GatePolicy:
    """The default gate policy in the fleet's time zone (the flow applies the dataset's; the T-Drive sample's by
    default)."""
    return GatePolicy.default().in_timezone(timezone)


def run_candidate(client: Client, candidate: Candidate, clean: pd.DataFrame, policy: GatePolicy, draws: int,
                  seed: int, save_draws: Callable[[dict], None], done: list[dict] = (), fleet: Fleet | None = None,
                  only_attacks: bool = False) -> None:
    """``draws`` draws of the candidate, after the ``done`` ones of an earlier run (draw d keeps seed ``seed + d``);
    after each, ``save_draws`` gets the candidate's entry so far."""
    setup = Setup.of(candidate, clean, fleet)
    entry = {"key": candidate.key, "label": candidate.label, "mechanism": setup.spec.mechanism,
             "params": setup.spec.params, "spec": str(candidate.spec.relative_to(ROOT.parent)),
             "control": candidate.control, "draws": list(done)}
    for d in range(len(done), draws):
        last = one_draw(client, setup, policy, seed + d, only_attacks)
        entry["draws"].append(last)
        save_draws(entry)
        print(f"{candidate.key} draw {d}: {'blocked' if last['blocked'] else 'passed'} "
              f"({last['draw_s']:.1f} s wall, {last['cpu_s']:.1f} s CPU)", flush=True)


def worst(draw: dict, attack: str) -> dict:
    """The attack's result the gate decides on in one draw: the resolution with the highest upper end of the
    risk's interval (the default policy decides on the upper bound)."""
    return max(draw["attacks"][attack].values(), key=lambda r: (r["risk_ci_high"], r["risk"]))


def _range(values: list[float]) -> str:
    return f"{np.mean(values):.3f} [{min(values):.3f}, {max(values):.3f}]"


def fleet_of(entry: dict) -> str:
    return entry.get("fleet", "sample")  # entries written before the fleets were drawn on the sample


def tables(results: dict) -> str:
    """Per fleet, the verdicts, every attack's figures, and what was run, from the results file."""
    parts = []
    for fleet, title in ((key, f.title) for key, f in FLEETS.items()):
        cands = [c for c in results["candidates"] if fleet_of(c) == fleet]
        if cands:
            parts.append(fleet_tables(cands, "" if fleet == "sample" else f" on {title}"))
    m = results["candidates"][0]["machine"] if results["candidates"] else machine()
    parts.append(f"Machine: {m['nproc']} cores ({m['cpu']}), {m['ram_gb']} GB, Python {m['python']}, shared with "
                 "other engineers' jobs (hence the load average); the CPU seconds are the driver's and the Dask "
                 "workers' process time.\n")
    return "\n".join(parts)


def fleet_tables(cands: list[dict], on: str) -> str:
    """One fleet's tables (``on``: its title in the headings, empty for the bundled sample)."""
    lines = [f"### Verdicts over the draws{on}", "",
             ("| candidate | draws | passed | privacy passed | utility passed | draws with an attack too close to "
              "call | draws with too few objects or saturated | must block |"), "|---|---|---|---|---|---|---|---|"]
    for c in cands:
        d = c["draws"]
        close = sum(any(v == "too close to call" for v in x["verdicts"].values()) for x in d)
        few = sum(any(w in why for w in UNMEASURED for why in x["not_applicable"].values()) for x in d)
        lines.append(f"| {c['label']} | {len(d)} | {sum(not x['blocked'] for x in d)} | "
                     f"{sum(x['privacy'] == 'passed' for x in d)} | {sum(x['utility'] != 'blocked' for x in d)} | "
                     f"{close} | {few} | {'yes' if c['control'] else ''} |")
    lines += ["", (f"### Each attack as the gate reads it{on}: per draw, the resolution with the highest upper end "
                   "of the risk's 95% interval; mean [min, max] over the draws"), "",
              ("| candidate | attack | members (success rate) | controls (baseline) | risk | risk interval upper "
               "end | verdicts |"), "|---|---|---|---|---|---|---|"]
    for c in cands:
        for a in sorted({a for x in c["draws"] for a in x["attacks"]}):
            rs = [worst(x, a) for x in c["draws"] if a in x["attacks"]]
            counts: dict[str, int] = {}
            for x in c["draws"]:
                v = x["verdicts"].get(a, "not run")
                counts[v] = counts.get(v, 0) + 1
            lines.append(f"| {c['label']} | {a} | {_range([r['success_rate'] for r in rs])} | "
                         f"{_range([r['baseline'] for r in rs])} | {_range([r['risk'] for r in rs])} | "
                         f"{_range([r['risk_ci_high'] for r in rs])} | "
                         + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())) + " |")
    lines += ["", f"### What was run{on}", "",
              ("| candidate | draws | seeds | command | commit | started (UTC) | CPU s / draw | wall s / draw | "
              "load average (1 min) over the draws |"), "|---|---|---|---|---|---|---|---|---|"]
    for c in cands:
        d = c["draws"]
        load = [float(x["loadavg"][0]) for x in d]
        lines.append(f"| {c['label']} | {len(d)} | {d[0]['seed']}-{d[-1]['seed']} | `{c['command']}` | "
                     f"{c['commit']}{resumed(c)} | {c['machine']['date'][:16]} | {np.mean([x['cpu_s'] for x in d]):.1f} | "
                     f"{np.mean([x['draw_s'] for x in d]):.1f} | {min(load):.0f}-{max(load):.0f} |")
    return "\n".join(lines) + "\n"


def resumed(entry: dict) -> str:
    """What an entry resumed from (``--resume``): its first draws' commit."""
    r = entry.get("resumed")
    return f" (draws 0-{r['draws'] - 1} at {r['commit']})" if r else ""


def write_report(results: dict, suite: str = "main") -> None:
    _, begin, end = SUITES[suite]
    text = RESULTS_MD.read_text() if RESULTS_MD.exists() else (
        "# The gate's validity: pass rates over repeated draws\n\n")
    if begin not in text:
        text += "\n" + begin + "\n" + end + "\n"
    before, rest = text.split(begin, 1)
    after = rest.split(end, 1)[1]
    replace_text(RESULTS_MD, before + begin + "\n" + tables(results) + end + after)


def replace_text(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a temporary file renamed over it): runs of other candidates read it
    between their draws."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def save(path: Path, entry: dict) -> dict:
    """The results file with ``entry`` (one candidate's draws on one fleet) in place of that candidate's on that
    fleet, read afresh: runs of different candidates or fleets may share the file."""
    found = ({(fleet_of(c), c["key"]): c for c in json.loads(path.read_text())["candidates"]} if path.exists()
             else {})
    found[fleet_of(entry), entry["key"]] = entry
    fleets, order = list(FLEETS), [c.key for c in CANDIDATES]
    results = {"candidates": sorted(found.values(),
                                    key=lambda c: (fleets.index(fleet_of(c)), order.index(c["key"])))}
    replace_text(path, json.dumps(results, indent=1, default=str))
    return results


def saved_entry(path: Path, fleet: str, key: str) -> dict | None:
    """The candidate's entry on ``fleet`` in the results file, if any."""
    if not path.exists():
        return None
    return next((c for c in json.loads(path.read_text())["candidates"] if fleet_of(c) == fleet and c["key"] == key),
                None)


def saved_draws(path: Path, fleet: str, key: str, seed: int) -> list[dict]:
    """The draws of an earlier run to resume: refused unless they are draws seed, seed + 1, ... in order."""
    draws = (saved_entry(path, fleet, key) or {}).get("draws", [])
    if [d["seed"] for d in draws] != list(range(seed, seed + len(draws))):
        raise SystemExit(f"cannot resume {key} on {fleet}: its saved draws are not seeds {seed}, {seed + 1}, ...")
    return draws


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--only", default="", help="comma-separated candidate keys (default: all): "
                        + ", ".join(c.key for c in CANDIDATES))
    parser.add_argument("--seed", type=int, default=0, help="draw d uses seed + d")
    parser.add_argument("--workers", type=int, default=2, help="Dask worker processes (the flow uses 2)")
    parser.add_argument("--fleet", choices=list(FLEETS), default="sample",
                        help="sample: the bundled T-Drive sample; unseen: the taxis it leaves out (bench.tdrive_unseen); "
                        "sf: the San Francisco sample (bench.sf_data)")
    parser.add_argument("--report-only", action="store_true", help="rewrite the tables from the results file")
    parser.add_argument("--suite", choices=list(SUITES), default="main",
                        help="main: the tables of the candidates; blurring: the blurring suite, its own file and tables")
    parser.add_argument("--attacks", default="", help="comma-separated attacks of the default policy: run only "
                        "those, without utility (positive controls: a draw they block the default gate blocks)")
    parser.add_argument("--resume", action="store_true",
                        help="keep a candidate's draws already in the results file and run only the missing ones")
    args = parser.parse_args(argv)
    only = {x for x in args.only.split(",") if x}
    unknown = only - {c.key for c in CANDIDATES}
    if unknown:
        parser.error(f"unknown candidate(s) {', '.join(sorted(unknown))}")
    path = OUT / SUITES[args.suite][0]
    if args.report_only:
        write_report(json.loads(path.read_text()), args.suite)
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                            check=True).stdout.strip()
    OUT.mkdir(exist_ok=True)
    fleet = FLEETS[args.fleet]
    if not fleet.path.exists():
        parser.error(f"no {fleet.path.name} in {fleet.path.parent.name}: write it with python -m bench.tdrive_unseen")
    clean, _ = fleet.load()
    policy = default_policy(fleet.timezone)
    names = [x for x in args.attacks.split(",") if x]
    if names:
        policy = narrowed(policy, names)
    command = ".venv/bin/python -m bench.gate_validity " + shlex.join(sys.argv[1:] if argv is None else argv)
    with local_cluster(args.workers, memory_limit="9GB") as cluster, Client(cluster) as client:
        for candidate in CANDIDATES:
            if only and candidate.key not in only:
                continue
            run = {"fleet": args.fleet, "commit": commit, "command": command.strip(), "machine": machine(), "workers": args.workers,
                   "policy": policy.to_dict()}
            done = saved_draws(path, args.fleet, candidate.key, args.seed) if args.resume else []
            if done:
                run["resumed"] = {"draws": len(done), "commit": saved_entry(path, args.fleet, candidate.key)["commit"]}
            run_candidate(client, candidate, clean, policy, args.draws, args.seed,
                          lambda entry, run=run: write_report(save(path, {**entry, **run}), args.suite), done, fleet,
                          bool(names))

if __name__ == "__main__":
    main()
