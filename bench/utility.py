"""Issue 13's utility table: trajpub's synthetic mechanisms on the cleaned T-Drive (or GeoLife) sample.

Each mechanism runs through its flow adapter (``tasks.protect``) on a local Dask cluster (2 single-threaded
workers, the objects split between 2 partitions as the flow splits them), on the records of
:mod:`bench.utility_data` prepared on a 2 km grid over the dataset's bbox; every release is scored with
:func:`audits.utility.trajectory_metrics` against the cleaned records. Runtime = the adapter's ``run`` (counting
on the workers, noise and synthesis on the driver).

    .venv/bin/python -m bench.utility --dataset tdrive --seeds 3 --runs objtrace:1 objtrace:5 dpt:5

A run is ``mechanism:epsilon`` (the mechanism's other parameters at their defaults). :func:`measure` is the
function other benches call (refbench adds PrivTrace and LDPTrace rows scored by the same metrics).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from distributed import Client

from audits.utility import TRAJECTORY_METRICS, trajectory_metrics
from bench.utility_data import GEOLIFE_BBOX, TDRIVE_BBOX, geolife_records, tdrive_records
from tasks.dask_cluster import local_cluster
from tasks.protect import adapter
from trajpub.grid import GridSpec
from trajpub.segment import to_grid

DATASETS = {"tdrive": (tdrive_records, TDRIVE_BBOX), "geolife": (geolife_records, GEOLIFE_BBOX)}
CELL_SIZE_M = 2000.0
N_PARTITIONS = 2


def prepared(dataset: str) -> tuple[pd.DataFrame, GridSpec]:
    """The dataset's cleaned records with ``seq`` and the 2 km grid's ``x, y, cell``, and that grid."""
    records, bbox = DATASETS[dataset]
    grid = GridSpec(bbox, CELL_SIZE_M)
    df = records()
    return to_grid(df.assign(seq=df.groupby("traj_id").cumcount()), grid), grid


def measure(client: Client, frame: pd.DataFrame, grid: GridSpec, mechanism: str, params: dict,
            seeds: list[int]) -> pd.DataFrame:
    """One row per seed: the metrics of the release of ``mechanism`` with ``params``, and its runtime (s)."""
    codes = pd.factorize(frame["object_id"])[0] % N_PARTITIONS  # whole objects per partition
    futures = client.scatter([frame[codes == p].reset_index(drop=True) for p in range(N_PARTITIONS)])
    mech = adapter(mechanism)
    parsed = mech.parse_params(params)
    raw = frame[["object_id", "traj_id", "seq", "t", "lon", "lat"]]
    rows = []
    for seed in seeds:
        start = time.perf_counter()
        out = mech.run(client, futures, grid, parsed, np.random.default_rng(seed))
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
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--runs", nargs="+", default=["objtrace:1", "objtrace:5", "dpt:5", "adatrace:1",
                                                      "adatrace:5", "prefix_tree:5"])
    args = parser.parse_args()
    frame, grid = prepared(args.dataset)
    results = {}
    with local_cluster(N_PARTITIONS) as cluster, Client(cluster) as client:
        for run in args.runs:
            mechanism, epsilon = run.split(":")
            results[run] = measure(client, frame, grid, mechanism, {"epsilon": float(epsilon)},
                                   list(range(args.seeds)))
    print(markdown(results))


if __name__ == "__main__":
    main()
