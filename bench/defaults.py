"""Issue 13 item 4: is each mechanism's default useful on the T-Drive sample? A sweep of one mechanism's parameters
and of the release grid's cell size, scored like ``bench.utility`` (the same records, adapters, Dask cluster and
:func:`audits.utility.trajectory_metrics`); results go to ``bench/DEFAULTS_RESULTS.md`` by hand.

    .venv/bin/python -m bench.defaults --mechanism prefix_tree --cells 2000 8000 \
        --runs '{"epsilon": 5, "height": 8}' '{"epsilon": 5, "height": 3}'

A run is a JSON mapping of the mechanism's parameters (the others at their defaults).
"""

from __future__ import annotations

import argparse
import json

import pandas as pd
from distributed import Client

from bench.utility import DATASETS, N_PARTITIONS, markdown, measure
from tasks.dask_cluster import local_cluster
from trajpub.grid import GridSpec
from trajpub.segment import to_grid


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
                results[label] = measure(client, frame, grid, args.mechanism, json.loads(run),
                                         list(range(args.seeds)))
                print(markdown({label: results[label]}).splitlines()[-1], flush=True)
    print(markdown(results))


if __name__ == "__main__":
    main()
