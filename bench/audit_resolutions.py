"""What the adversary's resolutions cost: the gate's attacks on the 300-taxi T-Drive sample
(1x), the raw data released unchanged as a truthful and as a synthetic release (the worst case of
:mod:`bench.audit_runtime`), once on the release's own 2 km grid (:func:`tasks.audit.run_attacks`) and once at
the default policy's four cell sizes (:func:`tasks.audit.run_at_resolutions`, the production path), on a
two-worker :func:`tasks.dask_cluster.local_cluster`. ``python -m bench.audit_resolutions``.

Output: ``bench/audit/resolutions.json`` and ``bench/AUDIT_RESOLUTIONS_RESULTS.md`` (wall seconds, the worst risk
per attack and where it was found, and the machine's load average: the machine is shared).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from distributed import Client

from audits.gate import GatePolicy, worst_per_attack
from bench.audit_runtime import ATTACK_PARAMS, BAR_10X_S, forms
from bench.fgs_pufferfish import machine
from bench.tdrive import GRID, load_clean, prepare
from tasks.audit import run_at_resolutions, run_attacks
from tasks.dask_cluster import local_cluster

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "audit" / "resolutions.json"
RESULTS_MD = ROOT / "AUDIT_RESOLUTIONS_RESULTS.md"
NOTE = ("Read the ratio, not the seconds, when the load average is high: the machine may be shared. With four "
        "resolutions the gridless attacks (known points, home/work) still run once; each grid attack runs four times, "
        "and the finest grid costs most.")


def main() -> None:
    default = GatePolicy.default()
    params = {name: ATTACK_PARAMS.get(name, {}) for name in default.max_risk}
    policy = GatePolicy(max_risk=default.max_risk, attack_params=params, timeout_s=BAR_10X_S,
                        resolutions_m=default.resolutions_m)
    own = GatePolicy(max_risk=default.max_risk, attack_params=params, timeout_s=BAR_10X_S)
    raw = prepare(load_clean()[0])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                            check=True).stdout.strip()
    out: dict = {"machine": machine(), "commit": commit, "resolutions_m": list(policy.resolutions_m), "forms": {}}
    with local_cluster(2, memory_limit="9GB") as cluster, Client(cluster) as client:
        for kind in ("truthful", "synthetic"):
            _, (background, release) = forms(raw)[kind]
            began = time.perf_counter()
            results, _, _ = run_attacks(client, own, background, release, kind)
            own_s = time.perf_counter() - began
            began = time.perf_counter()
            by_res, failures, _ = run_at_resolutions(client, policy, background, release, kind, GRID.bbox)
            res_s = time.perf_counter() - began
            where = {r.attack: (size, r.risk) for size, r in by_res if r in worst_per_attack(policy, by_res)}
            out["forms"][kind] = {"own_grid_s": own_s, "four_resolutions_s": res_s, "failures": failures,
                                  "own_grid_risk": {r.attack: r.risk for r in results},
                                  "worst": {a: {"resolution_m": s, "risk": k} for a, (s, k) in where.items()},
                                  "loadavg": Path("/proc/loadavg").read_text().split()[:3]}
            print(kind, json.dumps(out["forms"][kind], default=str), flush=True)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1, default=str))
    lines = ["# The adversary's resolutions: audit cost", "",
             (f"`python -m bench.audit_resolutions` (commit {commit}; {out['machine']['nproc']} cores, "
              f"{out['machine']['cpu']}; a machine shared with other jobs, load average in the table). The raw "
              "300-taxi sample released unchanged, the default policy's attacks of each kind."), "",
             "| release kind | own 2 km grid (s) | 250 m, 500 m, 1 km, 2 km (s) | ratio | load avg |", "|---|---|---|---|---|"]
    for kind, f in out["forms"].items():
        lines.append(f"| {kind} | {f['own_grid_s']:.1f} | {f['four_resolutions_s']:.1f} | "
                     f"{f['four_resolutions_s'] / f['own_grid_s']:.2f} | {' '.join(f['loadavg'])} |")
    lines += ["", NOTE, "", "Worst risk per attack and the cell size where it was found (0 = an attack that reads no grid):",
              ""]
    for kind, f in out["forms"].items():
        lines += [f"- {kind}: " + ", ".join(f"{a} {w['risk']:.3f} at {w['resolution_m']:g} m (own grid "
                                            f"{f['own_grid_risk'].get(a, float('nan')):.3f})"
                                            for a, w in sorted(f["worst"].items()))]
    RESULTS_MD.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
