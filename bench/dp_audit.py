"""The large empirical DP audit of every privacy claim: ``python -m bench.dp_audit [--only NAME ...]``.

For every mechanism of :mod:`audits.dp_scenarios`: each scenario at ε = 1 audited against its claim, and for
the tight scenarios a negative control (the mechanism run at 2ε, i.e. half the noise its claim needs, audited
against ε) that must be caught. ``--selection`` runs per dataset pick the event, ``--runs`` fresh runs per
dataset bound ε (:mod:`audits.dp_audit`). Writes ``bench/dp_audit/<mechanism>.json``; the curated record is
``bench/DP_AUDIT_RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from audits.dp_scenarios import AuditedClaim, all_scenarios, audit_mechanism
from bench.fgs_pufferfish import machine

OUT = Path(__file__).resolve().parent / "dp_audit"
EPSILON = 1.0


def row(a: AuditedClaim, control: bool, seconds: float) -> dict:
    o = a.outcome
    return {"mechanism": a.scenario.mechanism, "neighbours": a.scenario.neighbours, "model": a.scenario.model,
            "unit": a.scenario.unit, "run_epsilon": a.run_epsilon, "claim": a.claim, "object_claim": a.object_claim,
            "control": control, "lower_bound": o.lower_bound, "runs": o.runs, "selection_runs": o.selection_runs,
            "p_first": o.p_first, "p_second": o.p_second,
            "event": {"threshold": o.event.threshold, "above": o.event.above, "first": o.event.first},
            "seconds": round(seconds, 1)}


def table() -> str:
    """The markdown table of every ``bench/dp_audit/*.json``."""
    lines = [("| mechanism | neighbours | model, unit | run at ε | claim (unit) | claim (object) | audited lower "
             "bound | runs (select + fresh) | p₁ / p₂ | verdict |"), "|---" * 10 + "|"]
    for path in sorted(OUT.glob("*.json")):
        for r in json.loads(path.read_text())["rows"]:
            refuted = r["lower_bound"] > r["claim"]
            if r["control"]:
                verdict = "negative control caught" if refuted else "negative control NOT caught"
            elif r["model"] in ("epsilon-DP", "epsilon-LDP"):
                verdict = "consistent with claim" if not refuted else (
                    "above the per-record ε, within the object's ε (group privacy)"
                    if r["lower_bound"] <= r["object_claim"] else "claim refuted")
            else:
                verdict = "not DP: bound printed"
            lines.append(f"| {r['mechanism']} | {r['neighbours']} | {r['model']}, {r['unit']} | {r['run_epsilon']:g} "
                         f"| {r['claim']:g} | {r['object_claim']:g} | {r['lower_bound']:.3f} | {r['selection_runs']} + "
                         f"{r['runs']} | {r['p_first']:.4f} / {r['p_second']:.4f} | {verdict} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", action="store_true", help="print the markdown table of the stored results")
    ap.add_argument("--only", nargs="*", help="mechanism names (default: all)")
    ap.add_argument("--selection", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args()
    if args.table:
        print(table())
        return
    OUT.mkdir(exist_ok=True)
    names = dict.fromkeys(s.mechanism for s in all_scenarios())
    for i, name in enumerate(n for n in names if not args.only or n in args.only):
        rows = []
        for control in (False, True):
            t0 = time.perf_counter()
            audited = audit_mechanism(name, EPSILON, run_epsilon=2 * EPSILON if control else EPSILON,
                                      tight_only=control, selection_runs=args.selection, runs=args.runs,
                                      seed=args.seed + 2 * i + control)
            rows += [row(a, control, (time.perf_counter() - t0) / len(audited)) for a in audited]
            for r in rows[-len(audited):] if audited else []:
                print(json.dumps(r), flush=True)
        (OUT / f"{name}.json").write_text(json.dumps({"machine": machine(), "selection": args.selection,
                                                      "runs": args.runs, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
