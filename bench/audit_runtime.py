"""The audit gate's cost: every attack and every utility metric on the 300-taxi T-Drive sample and on
3x, 5x, 10x scale-ups, through the production code path. ``python -m bench.audit_runtime``.

The release audited is the raw data itself (the worst case for every attack: nothing is hidden, so matching sets
are small and every target is attacked): as a truthful release (12 attacks), without owners as a synthetic release
(``signature_linkage_synthetic``) and as exact counts of the 1-3-cell fragments of a random half of the
trajectories on the 8 x 8 grid (``membership``). For each form, :func:`tasks.audit.run_attacks` (the attacks in
parallel on a two-worker :func:`tasks.dask_cluster.local_cluster`, the production cluster on this machine), then
:func:`tasks.audit.measure_utility` on the driver, exactly as :func:`tasks.audit.run` calls them. Per attack: its
compute seconds on its worker (Dask task stream).

Scale-up: every taxi copied ``f - 1`` times under new object ids, each copy shifted by 200-500 m in a random
direction (:func:`bench.tdrive.replicate`): a denser fleet, as hard for the attacks as the sample.

Outputs: ``bench/audit/runtime.json`` and ``bench/AUDIT_RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
from distributed import Client, get_task_stream

from audits import ATTACKS
from audits.gate import GatePolicy
from bench.fgs_pufferfish import machine
from bench.tdrive import BBOX, GRID_FASTPUB, TZ, load_clean, on_grid, prepare, raw_fragments, replicate
from tasks.audit import attack_frames, measure_utility, run_attacks
from tasks.dask_cluster import WORKER_ENVIRON, local_cluster
from trajpub.candidate import CandidateRelease, Shape

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "audit"
RESULTS_MD = ROOT / "AUDIT_RESULTS.md"
BAR_1X_S, BAR_10X_S = 60.0, 600.0
ATTACK_PARAMS: dict[str, dict] = {
    "home_work": {"timezone": TZ},
    "known_points": {"seed": 0},
    "membership": {"seed": 0},
    "ap_attack": {"seed": 0},
    **{name: {"timezone": TZ, "seed": 0} for name in ATTACKS if name.startswith("reidentification_")},
}


def policy() -> GatePolicy:
    """Every registered attack; the ceilings do not matter (no gate decision is taken)."""
    return GatePolicy(max_risk={name: 1.0 for name in ATTACKS}, attack_params=ATTACK_PARAMS, timeout_s=BAR_10X_S)


def forms(raw) -> dict[str, tuple[CandidateRelease, tuple]]:
    """The raw data as a release of each kind: (candidate, (background, release) as the attacks see them)."""
    truthful = CandidateRelease(Shape.TRUTHFUL, raw.copy(), {"mechanism": "raw"})
    synthetic = CandidateRelease(Shape.SYNTHETIC, raw.drop(columns="object_id"), {"mechanism": "raw"})
    raw8 = on_grid(raw, GRID_FASTPUB)
    aggregate = raw_fragments(raw8, 0)
    return {"truthful": (truthful, attack_frames(raw, truthful)),
            "synthetic": (synthetic, (raw, synthetic.points)),
            "aggregate": (aggregate, attack_frames(raw8, aggregate))}


def audit(client: Client, raw) -> dict:
    """All attacks of every form, then the utility figures of the truthful form: wall seconds of each part."""
    pol = policy()
    out: dict = {"attacks": {}, "failures": {}}
    started = time.perf_counter()
    with get_task_stream(client) as stream:
        for kind, (_, (background, release)) in forms(raw).items():
            results, failures, not_applicable = run_attacks(client, pol, background, release, kind)
            failures |= {name: f"not applicable: {why}" for name, why in not_applicable.items()}
            for r in results:
                out["attacks"][r.attack] = {"kind": kind, "n_targets": r.n_targets, "success_rate": r.success_rate,
                                            "ci": [r.ci_low, r.ci_high], "baseline": r.baseline, "risk": r.risk}
            out["failures"].update(failures)
        out["attacks_wall_s"] = time.perf_counter() - started
        util_started = time.perf_counter()
        candidate, (_, release) = forms(raw)["truthful"]
        out["utility"] = measure_utility(raw, candidate, release, 0, BBOX)
        out["utility_wall_s"] = time.perf_counter() - util_started
        time.sleep(0.5)  # the task stream receives the last events
    out["audit_wall_s"] = time.perf_counter() - started
    for task in stream.data:
        key = task["key"] if isinstance(task["key"], str) else str(task["key"])
        if key.startswith("attack-"):
            name = key[len("attack-"):].rsplit("-trajpub-attack-start-", 1)[0]
            compute = sum(s["stop"] - s["start"] for s in task["startstops"] if s["action"] == "compute")
            out["attacks"].setdefault(name, {})["worker_s"] = compute
    return out


def exponent(sizes: list[float], times: list[float]) -> float:
    """Least-squares slope of log t on log n."""
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])


def report(results: dict) -> str:
    runs = results["runs"]
    f = [r["factor"] for r in runs]
    lines = ["# The audit gate's cost: every attack and every metric, 1x to 10x", "",
             (f"Command: `.venv/bin/python -m bench.audit_runtime --scales {','.join(map(str, f))}`. "
             f"Machine: {results['machine']['nproc']} cores ({results['machine']['cpu']}), "
             f"{results['machine']['ram_gb']} GB, shared with other work (load average in the table). "
             f"Run {results['machine']['date'][:16]} UTC at commit {results['commit']}. Workers: "
             f"two single-threaded processes with {WORKER_ENVIRON}."), "",
             ("The raw data audited as its own release (truthful: 12 attacks; synthetic form: "
             "`signature_linkage_synthetic`; exact fragment counts on 8 x 8 cells: `membership`), then every utility "
             "metric of `measure_utility`, through `tasks.audit.run_attacks` and `tasks.audit.measure_utility`. "
             f"Bars: {BAR_1X_S:g} s at 1x, {BAR_10X_S:g} s at 10x, near-linear growth."), "",
             "| | " + " | ".join(f"{x}x" for x in f) + " |", "|---|" + "---|" * len(f)]
    lines.append("| raw points | " + " | ".join(f"{r['points']:,}" for r in runs) + " |")
    lines.append("| objects | " + " | ".join(f"{r['objects']:,}" for r in runs) + " |")
    lines.append("| trajectories | " + " | ".join(f"{r['trajectories']:,}" for r in runs) + " |")
    lines.append("| attacks wall s | " + " | ".join(f"{r['attacks_wall_s']:.1f}" for r in runs) + " |")
    lines.append("| utility wall s | " + " | ".join(f"{r['utility_wall_s']:.1f}" for r in runs) + " |")
    lines.append("| **audit wall s** | " + " | ".join(f"**{r['audit_wall_s']:.1f}**" for r in runs) + " |")
    lines.append("| per 1x of data | " + " | ".join(f"{r['audit_wall_s'] / r['factor']:.1f}" for r in runs) + " |")
    lines.append("| attacks failed / timed out | " + " | ".join(str(len(r["failures"])) for r in runs) + " |")
    lines.append("| load average at start | " + " | ".join(r["loadavg"][0] for r in runs) + " |")
    names = sorted({n for r in runs for n in r["attacks"]})
    lines += ["", ("Seconds per attack on its worker, and the exponent b of t ~ n^b (least squares over the scales; "
                   "1 is linear):"), "", "| attack | " + " | ".join(f"{x}x" for x in f) + " | b |",
              "|---|" + "---|" * (len(f) + 1)]
    for name in names:
        t = [r["attacks"].get(name, {}).get("worker_s") for r in runs]
        b = exponent(f, t) if all(x for x in t) and len(f) > 1 else math.nan
        lines.append(f"| {name} | " + " | ".join("n/a" if x is None else f"{x:.2f}" for x in t) + f" | {b:.2f} |")
    total = [r["audit_wall_s"] for r in runs]
    if len(f) > 1:
        lines.append("| **audit wall** | " + " | ".join(f"{x:.1f}" for x in total) + f" | {exponent(f, total):.2f} |")
    first = runs[0]
    lines += ["", f"Attack results at {first['factor']}x (the raw data against itself: upper bounds):", "",
              "| attack | form | targets | success [95% CI] | baseline | risk |", "|---|---|---|---|---|---|"]
    for name in names:
        a = first["attacks"].get(name)
        if a and "success_rate" in a:
            lines.append(f"| {name} | {a['kind']} | {a['n_targets']} | {a['success_rate']:.3f} "
                         f"[{a['ci'][0]:.3f}, {a['ci'][1]:.3f}] | {a['baseline']:.4f} | {a['risk']:.3f} |")
    if any(r["failures"] for r in runs):
        lines += ["", "Failures: " + "; ".join(f"{r['factor']}x {k}: {v}" for r in runs
                                              for k, v in r["failures"].items())]
    lines += ["", ("Sampling that keeps the cost linear (a matching attack compares each target with every "
              "candidate, so attacking all targets costs targets x candidates, quadratic in the fleet): "
              "`ap_attack` attacks at most `max_targets` = 5,000 records and the re-identification kinds at most "
              "300 targets, a uniform sample when there are more (every candidate stays a candidate; the interval "
              "is the sample's). At 1x nothing is sampled (4,3xx records, 288 targets)."), "",
              ("What made the bars reachable (the previous run, at commit 36a22a0: 59.6 s at 1x, and 10x over "
              "600 s with 6 attacks timed out):"), "",
              ("- INF with a tolerance asks the k-d tree for the nearest point in the box first and lists the whole "
              "box only for the few points whose nearest box neighbour lies outside the disc (same values; 24 s and "
              "7.6 GB at 1x before, now under a second)."),
              ("- Worker processes start with `MALLOC_MMAP_THRESHOLD_` = 32 MiB (`tasks.dask_cluster.WORKER_ENVIRON`): "
              "Dask's nanny sets `MALLOC_TRIM_THRESHOLD_`, which turned every array above 128 kB into a fresh mmap "
              "and made allocation-heavy attacks 2-4x slower on workers than in one process."),
              ("- Target sampling in `ap_attack` (5,000 records) and the re-identification kinds (300 targets): "
              "their cost was targets x candidates (exponents 2.3 and 1.8 before)."),
              ("- `timeout_s` now bounds each attack's own running time from the moment it starts on a worker, "
              "not the whole batch (attacks queued behind others used to time out without having run)."),
              ("- The grid spans the projected bbox boundary, not only its corners (points near the southern edge "
              "of the bbox used to fall off the grid at the scale-ups)."),
              "", ("Still super-linear at these sizes: `signature_linkage` (b about 1.7, but 3.8 s at 10x: its sparse "
              "records x objects product) and the re-identification kinds around 1.2-1.3 (per-target work grows "
              "with the candidates' point counts).")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="1,3,5,10")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report-only", action="store_true", help="rewrite the report from runtime.json")
    args = parser.parse_args(argv)
    if args.report_only:
        RESULTS_MD.write_text(report(json.loads((OUT / "runtime.json").read_text())))
        return
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                            check=True).stdout.strip()
    results: dict = {"machine": machine(), "commit": commit, "runs": []}
    clean, _ = load_clean()
    OUT.mkdir(exist_ok=True)
    with local_cluster(2, memory_limit="9GB") as cluster, Client(cluster) as client:
        for factor in (int(x) for x in args.scales.split(",")):
            raw = prepare(replicate(clean, factor, args.seed))
            load = Path("/proc/loadavg").read_text().split()[:3]
            entry = {"factor": factor, "points": len(raw), "objects": int(raw["object_id"].nunique()),
                     "trajectories": int(raw["traj_id"].nunique()), "loadavg": load, **audit(client, raw)}
            results["runs"].append(entry)
            print(f"{factor}x: audit {entry['audit_wall_s']:.1f} s (attacks {entry['attacks_wall_s']:.1f}, "
                  f"utility {entry['utility_wall_s']:.1f}), failures {entry['failures']}", flush=True)
            (OUT / "runtime.json").write_text(json.dumps(results, indent=1, default=str))
    RESULTS_MD.write_text(report(results))


if __name__ == "__main__":
    main()
