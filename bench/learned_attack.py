"""The learned membership attacker (:mod:`audits.learned_membership`) on the blurring suite's releases: the same
draws as ``bench.gate_validity --suite blurring`` (same fleets, candidates, seeds and production functions: controls
held out, the mechanism on the Dask runner, times coarsened), the attacker run in process on each release.

    .venv/bin/python -m bench.learned_attack [--fleet sample] [--only citytrace,blur_combined] [--draws 2]

Prints one line per draw (AUC with DeLong's 95% interval, advantage, the model's coefficients) and writes every
draw to ``bench/gate_validity/learned.json`` (a re-run of a fleet replaces that fleet's draws).
"""

from __future__ import annotations

import argparse
import json
import time

from distributed import Client

from audits.learned_membership import learned_membership
from bench.gate_validity import CANDIDATES, FLEETS, OUT, Setup, default_policy, release, replace_text
from tasks.dask_cluster import local_cluster

RESULTS = OUT / "learned.json"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleet", choices=list(FLEETS), default="sample")
    parser.add_argument("--only", default="", help="comma-separated candidate keys of bench.gate_validity")
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    only = [k for k in args.only.split(",") if k] or [c.key for c in CANDIDATES if c.key.startswith("blur_")
                                                     or c.key in ("citytrace", "objtrace_e5")]
    fleet = FLEETS[args.fleet]
    clean, _ = fleet.load()
    policy = default_policy(fleet.timezone)
    rows = []
    with local_cluster(2, memory_limit="9GB") as cluster, Client(cluster) as client:
        for candidate in (c for c in CANDIDATES if c.key in only):
            setup = Setup.of(candidate, clean, fleet)
            for d in range(args.draws):
                released = release(client, setup, policy, args.seed + d)
                began = time.process_time()
                r = learned_membership(released.raw.result(), released.candidate.points, args.seed + d)
                advantage = r.advantage
                rows.append({"fleet": args.fleet, "key": candidate.key, "seed": args.seed + d, "auc": r.auc,
                             "auc_low": r.auc_low, "auc_high": r.auc_high, "advantage": advantage,
                             "coefficients": r.coefficients, "n_members": r.n_members,
                             "n_controls": r.n_controls, "cpu_s": time.process_time() - began})
                print(f"{args.fleet} {candidate.key} seed {args.seed + d}: AUC {r.auc:.3f} [{r.auc_low:.3f}, "
                      f"{r.auc_high:.3f}], advantage {advantage[0]:.3f} [{advantage[1]:.3f}, {advantage[2]:.3f}], "
                      f"coefficients {r.coefficients}, {rows[-1]['cpu_s']:.1f} s CPU", flush=True)
    kept = [r for r in (json.loads(RESULTS.read_text()) if RESULTS.exists() else []) if r["fleet"] != args.fleet]
    replace_text(RESULTS, json.dumps(kept + rows, indent=1))


if __name__ == "__main__":
    main()
