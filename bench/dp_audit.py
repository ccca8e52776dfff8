"""The large empirical DP audit of every privacy claim: ``python -m bench.dp_audit [--only NAME ...]``.

For every scenario of :mod:`audits.dp_scenarios`: the mechanism at ε = 1 audited against its claim, and for the
tight scenarios a negative control (the mechanism run at 2ε, i.e. half the noise its claim needs, audited
against ε) that must be caught. ``--selection`` runs per dataset pick the event, ``--runs`` fresh runs per
dataset bound ε (:mod:`audits.dp_audit`). Writes ``bench/dp_audit/<mechanism>.json``; the curated record is
``bench/DP_AUDIT_RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from audits.dp_audit import audit_pair
from audits.dp_scenarios import Scenario, all_scenarios
from bench.fgs_pufferfish import machine

OUT = Path(__file__).resolve().parent / "dp_audit"
EPSILON = 1.0


def audit_scenario(s: Scenario, epsilon: float, claim: float, selection: int, runs: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    out = audit_pair(lambda which, n, r: s.run(which, n, epsilon, r), selection, runs, rng)
    return {"mechanism": s.mechanism, "neighbours": s.neighbours, "model": s.model, "unit": s.unit,
            "run_epsilon": epsilon, "claim": claim, "object_claim": s.object_factor * claim / s.claim_factor,
            "lower_bound": out.lower_bound, "runs": out.runs, "selection_runs": out.selection_runs,
            "p_first": out.p_first, "p_second": out.p_second,
            "event": {"threshold": out.event.threshold, "above": out.event.above, "first": out.event.first},
            "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="mechanism names (default: all)")
    ap.add_argument("--selection", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    by_mechanism: dict[str, list[dict]] = {}
    for i, s in enumerate(all_scenarios()):
        if args.only and s.mechanism not in args.only:
            continue
        claim = EPSILON * s.claim_factor
        rows = by_mechanism.setdefault(s.mechanism, [])
        rows.append({**audit_scenario(s, EPSILON, claim, args.selection, args.runs, args.seed + 2 * i),
                     "control": False})
        if s.tight:
            rows.append({**audit_scenario(s, 2 * EPSILON, claim, args.selection, args.runs, args.seed + 2 * i + 1),
                         "control": True})
        for r in rows[-2 if s.tight else -1:]:
            print(json.dumps(r), flush=True)
    for name, rows in by_mechanism.items():
        (OUT / f"{name}.json").write_text(json.dumps({"machine": machine(), "selection": args.selection,
                                                      "runs": args.runs, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
