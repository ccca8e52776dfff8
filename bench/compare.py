"""A comparison on the T-Drive sample: every mechanism at its example spec's parameters plus a
small grid, through the real comparison flow (PostGIS, Prefect, Dask, the default gate); the time to the steward's
review and the frontier go to ``bench/COMPARE_RESULTS.md`` by hand.

    TRAJPUB_PG_PORT=... TRAJPUB_PREFECT_PORT=... .venv/bin/python -m bench.compare [--skip MECHANISM ...]

The sample is loaded into a fresh dataset whose caps the owner raises (every DP candidate is charged); the flow
waits ``--wait`` seconds for a pick that does not come, and the candidates stay awaiting approval.
"""

from __future__ import annotations

import argparse
import time
import uuid

import sqlalchemy as sa

from mechanisms import registry
from mechanisms.registry import example_spec_file
from tasks import compare
from tasks.db import engine, owner_engine
from trajpub import config
from trajpub.errors import ReleaseBlocked
from trajpub.spec import read_spec_file

NEEDS_PUBLIC_INPUTS = {"mixzone", "klt"}  # their examples read Helsinki's roads and POIs, not loaded for Beijing
#: (k, Psi)-anonymity without its Helsinki road network: constant Psi of 500 m (the (k-delta) ablation)
OVERRIDES = {"kpsi_anonymity": {"road_network": None, "road_aware": False, "psi_mode": "constant", "delta_m": 500.0}}
GRID = [{"mechanism": "objtrace", "grid_key": "epsilon", "values": [1.0, 2.0]},
        {"mechanism": "glove", "grid_key": "k", "values": [10]},
        {"mechanism": "prefix_tree", "grid_key": "epsilon", "values": [5.0]},
        {"mechanism": "w4m", "grid_key": "k", "values": [10]}]


def candidates(skip: set[str]) -> list[dict]:
    """Each mechanism at its example spec's parameters, then the grid's variations of some of them."""
    out = []
    for name in sorted(registry.REGISTRY):
        if name in NEEDS_PUBLIC_INPUTS | skip:
            continue
        params = {**read_spec_file(example_spec_file(name)).get("params", {}), **OVERRIDES.get(name, {})}
        out.append({"mechanism": name, "params": params})
        for g in GRID:
            if g["mechanism"] == name:
                fixed = {k: v for k, v in params.items() if k != g["grid_key"]}
                values = [v for v in g["values"] if v != params.get(g["grid_key"])]
                out.append({"mechanism": name, "params": fixed, "grid": {g["grid_key"]: values}})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip", nargs="*", default=[], help="mechanisms to leave out")
    parser.add_argument("--wait", type=float, default=5.0, help="seconds the flow waits for a pick")
    args = parser.parse_args()
    config.apply_environment()  # the project's Prefect server, before Prefect is imported
    from flows.compare import compare_flow
    from tasks.load import load_source

    dataset = f"bench_compare_{uuid.uuid4().hex[:6]}"
    load_source(engine(), "tdrive", config.SHARED_DATA_DIR / "tdrive_sample_odd_taxis.csv.gz", dataset)
    with owner_engine().begin() as conn:  # the steward's caps: every candidate is charged
        conn.execute(sa.text("UPDATE governance.datasets SET epsilon_cap = 1000, ldp_epsilon_cap = 1000,"
                             " pufferfish_epsilon_cap = 1000 WHERE dataset = :d"), {"d": dataset})
    spec = {**read_spec_file(config.PROJECT_ROOT / "flows" / "specs" / "compare" / "tdrive_compare.yaml"),
            "name": "bench_compare", "dataset": dataset, "approval_timeout_s": args.wait,
            "candidates": candidates(set(args.skip))}
    _, planned = compare.parse(spec)
    print(f"{len(planned)} candidates: " + "; ".join(p.label for p in planned))
    began = time.perf_counter()
    try:
        outcome = compare_flow(spec=spec)
    except ReleaseBlocked as blocked:  # no candidate to recommend: the table still says why
        print(f"blocked: {blocked}")
        outcome = blocked.outcome
    print(f"comparison to the end of the pause: {time.perf_counter() - began:.0f} s (the pause: {args.wait:g} s)")
    with engine().connect() as conn:
        rows = [compare.outcome(conn, r, p.label) for r, p in zip(outcome["releases"], planned, strict=True)]
    from tasks.compare_review import HEADER, table_rows

    print("| " + " | ".join(HEADER) + " |\n" + "|---" * len(HEADER) + "|")
    for row in table_rows(rows):
        print("| " + " | ".join(str(c).replace("|", "/") for c in row) + " |")


if __name__ == "__main__":
    main()
