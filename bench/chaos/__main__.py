"""``python -m bench.chaos [--faults N] [--seed S]``: the chaos bench (:mod:`bench.chaos`), writing
bench/CHAOS_RESULTS.md."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from bench.chaos import report
from bench.chaos.run import run


def main() -> None:
    p = argparse.ArgumentParser(description="Random faults against concurrent releases; invariants after each.")
    p.add_argument("--faults", type=int, default=100, help="how many faults to inject")
    p.add_argument("--seed", type=int, default=42, help="the random generator's seed (faults, moments, decisions)")
    p.add_argument("--concurrency", type=int, default=4, help="releases kept alive at once (over 2 datasets)")
    p.add_argument("--taxis", type=int, default=40, help="T-Drive taxis in each dataset")
    p.add_argument("--max-minutes", type=float, default=float("inf"),
                   help="start no fault after this many minutes (the count reached is reported)")
    p.add_argument("--drain-minutes", type=float, default=15,
                   help="after the last fault, how long the releases left may take to end before they count as hung")
    p.add_argument("--no-write", action="store_true", help="do not write bench/CHAOS_RESULTS.md")
    args = p.parse_args()
    started = datetime.now(UTC)
    logs = report.ROOT / "bench" / "out" / "chaos" / f"{started:%Y%m%dT%H%M%S}"
    result = run(args.faults, args.seed, args.concurrency, args.taxis, max_s=args.max_minutes * 60,
                 drain_s=args.drain_minutes * 60,
                 keep_logs=logs, say=lambda s: print(s, flush=True))
    print(f"{len(result.faults)} faults, {len(result.broken)} violations, {len(result.hung)} hung releases, "
          f"{result.wall_s / 60:.1f} min", flush=True)
    if not args.no_write:
        report.write(result, started)
        print(f"wrote {report.RESULTS}")
    print(f"logs in {logs}")


if __name__ == "__main__":
    main()
