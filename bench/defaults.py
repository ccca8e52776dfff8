"""Is each mechanism's default useful on the T-Drive sample? A sweep of one mechanism's parameters
and of the release grid's cell size, scored like ``bench.references`` (the same records, adapters, Dask cluster and
:func:`audits.trajectory_utility.trajectory_metrics`); results go to ``bench/DEFAULTS_RESULTS.md`` by hand.

    .venv/bin/python -m bench.defaults --mechanism prefix_tree --cells 2000 8000 \
        --runs '{"epsilon": 5, "height": 8}' '{"epsilon": 5, "height": 3}'

A run is a JSON mapping of the mechanism's parameters (the others at their defaults).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd
from distributed import Client

from audits.trajectory_utility import TRAJECTORY_METRICS, trajectory_metrics
from bench.references import DATASETS, WINDOWS
from mechanisms import registry
from tasks import protect
from tasks.dask_cluster import local_cluster
from trajpub.grid import GridSpec
from trajpub.mechanism import PublicInputs
from trajpub.segment import to_grid
from trajpub.window import ReleaseWindow

N_PARTITIONS = 2


def measure(client: Client, frame: pd.DataFrame, grid: GridSpec, window: ReleaseWindow, mechanism: str, params: dict,
            seeds: list[int]) -> pd.DataFrame:
    """One row per seed: the metrics of the release of ``mechanism`` with ``params`` (timestamps in ``window``),
    and its runtime (s)."""
    codes = pd.factorize(frame["object_id"])[0] % N_PARTITIONS  # whole objects per partition
    futures = client.scatter([frame[codes == p].reset_index(drop=True) for p in range(N_PARTITIONS)])
    mech = registry.mechanism(mechanism)
    parsed = mech.parse_params(params)
    raw = frame[["object_id", "traj_id", "seq", "t", "lon", "lat"]]
    rows = []
    for seed in seeds:
        start = time.perf_counter()
        out = protect.run(mech, client, futures, PublicInputs(grid, window=window), parsed,
                          np.random.default_rng(seed))
        seconds = time.perf_counter() - start
        metrics = (trajectory_metrics(raw, out.points, grid.bbox, seed) if len(out.points)
                   else dict.fromkeys(TRAJECTORY_METRICS))  # an empty release has no utility to measure
        rows.append({**metrics, "runtime_s": seconds, "records": out.points["traj_id"].nunique()})
    return pd.DataFrame(rows)


def markdown(results: dict[str, pd.DataFrame]) -> str:
    """A table of mean ± sd per run."""
    columns = [*TRAJECTORY_METRICS, "runtime_s", "records"]
    lines = ["| run | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, df in results.items():
        cells = []
        for c in columns:
            values = pd.to_numeric(df[c], errors="coerce")
            cells.append("–" if values.isna().all() else f"{values.mean():.3f} ± {values.std(ddof=1):.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="tdrive")
    parser.add_argument("--mechanism", required=True)
    parser.add_argument("--cells", type=float, nargs="+", default=[2000.0], help="release grid cell sizes (m)")
    parser.add_argument("--runs", nargs="+", required=True, help="JSON parameter mappings")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    records, bbox = DATASETS[args.dataset]
    df = records()
    df = df.assign(seq=df.groupby("traj_id").cumcount())
    results: dict[str, pd.DataFrame] = {}
    with local_cluster(N_PARTITIONS) as cluster, Client(cluster) as client:
        for cell in args.cells:
            grid = GridSpec(bbox, cell)
            frame = to_grid(df, grid)
            for run in args.runs:
                label = f"{args.mechanism} {run} cell {cell:g} m"
                results[label] = measure(client, frame, grid, WINDOWS[args.dataset], args.mechanism, json.loads(run),
                                         list(range(args.seeds)))
                print(markdown({label: results[label]}).splitlines()[-1], flush=True)
    print(markdown(results))


if __name__ == "__main__":
    main()
