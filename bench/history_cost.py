"""Does a weekly release's cost grow with the history a dataset holds? (docs/design.md, "Relative windows")

Two datasets of the same 40 T-Drive taxis: ``week`` holds one week (the sample's, 2-8 February 2008, Beijing
time), ``year`` holds 52 weeks, the sample shifted by 0..51 weeks and loaded one week at a time (each week a
source of its own, as a weekly feed appends). The database work of a release of the last week (the part that can
depend on the table: the snapshot, its SHA-256 and per-object counts, :func:`tasks.ingest.take_snapshot`, and
reading every object's points of the window, :func:`tasks.ingest.partition_csv`) is timed on both, three times
each (median); the rest of a release (validation, mechanism, audit) reads only the window's points, which are
the same. Each weekly load's time is recorded too: a load appends, it does not reread the history.

    .venv/bin/python -m bench.history_cost [--weeks 52] [--out bench/HISTORY_RESULTS.md]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from bench.weeks import FIRST, WEEK, load_weeks, sample
from tasks import db
from tasks.datasets import drop_dataset
from tasks.ingest import partition_csv, psycopg_dsn, take_snapshot


def release_reads(eng: sa.Engine, dataset: str, start: datetime, end: datetime) -> float:
    """Seconds of a release's database reads of ``[start, end)``: the snapshot, then every object's points."""
    began = time.perf_counter()
    snapshot, objects = take_snapshot(eng, dataset, start, end)
    ids = [o for o, _ in objects]
    size = len(partition_csv(psycopg_dsn(eng), snapshot.filter_params(), ids))
    assert size > 0 and snapshot.n_points > 0
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", type=int, default=52)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--steward", default="ada", help="The steward login that drops the datasets afterwards.")
    args = parser.parse_args()
    eng = db.engine()
    points = sample()
    tag = uuid.uuid4().hex[:6]
    week, year = f"hist_week_{tag}", f"hist_year_{tag}"
    last = args.weeks - 1
    load_weeks(eng, week, points, range(last, last + 1))
    loads = load_weeks(eng, year, points, range(args.weeks), lambda line: print(line, flush=True))
    with eng.connect() as conn:
        sizes = {d: conn.execute(sa.text("SELECT count(*) FROM raw.points WHERE dataset = :d"), {"d": d}).scalar()
                 for d in (week, year)}
        indexes = [r[0] for r in conn.execute(sa.text(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'raw' AND tablename = 'points' ORDER BY indexname"))]
    start = FIRST + last * WEEK
    with eng.connect() as conn:  # how PostgreSQL finds the window's points in the year
        plan = [r[0] for r in conn.execute(sa.text(
            "EXPLAIN SELECT count(*) FROM raw.points WHERE dataset = :d AND point_id <= 9223372036854775807"
            " AND t >= :s AND t < :e"), {"d": year, "s": start, "e": start + WEEK})]
    scans = sorted({line.strip().lstrip("-> ").split("  ")[0] for line in plan if "Scan" in line})
    timings = {d: [release_reads(eng, d, start, start + WEEK) for _ in range(args.repeat)] for d in (week, year)}
    med = {d: statistics.median(t) for d, t in timings.items()}
    ratio = med[year] / med[week]
    first_loads = statistics.median(s for _, _, s in loads[:5])
    last_loads = statistics.median(s for _, _, s in loads[-5:])
    lines = [
        f"- run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; raw.points indexes: " + "; ".join(f"`{i}`" for i in indexes),
        f"- `week` holds {sizes[week]:,} points, `year` {sizes[year]:,} ({args.weeks} weekly loads)",
        (f"- the release's database reads of the last week: {med[week]:.2f} s on `week`, {med[year]:.2f} s on `year` "
        f"(median of {args.repeat}; runs {', '.join(f'{t:.2f}' for t in timings[year])} s): ratio {ratio:.2f}"),
        f"- the snapshot's filter on `year` is planned as: {'; '.join(scans)}",
        (f"- a weekly load: {first_loads:.1f} s for the first five weeks, {last_loads:.1f} s for the last five "
        "(median)"),
    ]
    print("\n".join(lines))
    if args.out:
        with args.out.open("a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n\n")
    for d in (week, year):  # the benchmark's datasets go (a steward's command: trajpub dataset drop)
        drop_dataset(db.steward_engine(args.steward), d)


if __name__ == "__main__":
    main()
