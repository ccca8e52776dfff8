"""What a release's Dask cluster costs to start, up to every worker holding Great Expectations (the validation
stage's first need), with the workers forked from a fork server that imported it once
(:data:`tasks.dask_cluster.WORKER_PRELOAD`) against Dask's default of spawning each worker afresh: the wall time and
the CPU of the worker processes and the fork server, for the first cluster of a process and for a second one.

``python -m bench.dask_start [--rounds 3]``; each method runs in a process of its own (the fork server is one per
process); the result goes to bench/SUITE_TIME_RESULTS.md by hand, with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import psutil
from distributed import Client

from tasks import dask_cluster
from tasks.validate import warm_up_workers


def children_cpu() -> float:
    """CPU seconds (user + system) of every process below this one, the ended ones it waited for included."""
    me = psutil.Process()
    live = sum(sum(p.cpu_times()[:2]) for p in me.children(recursive=True) if p.is_running())
    return live + sum(me.cpu_times()[2:4])


def one_cluster(method: str) -> dict:
    """Start a two-worker cluster whose workers start with ``method``, warm every worker up
    (:func:`tasks.validate.warm_up`), stop it."""
    t0, c0 = time.monotonic(), children_cpu()
    with dask_cluster.local_cluster(2, workers_start=method) as cluster, Client(cluster) as client:
        started = time.monotonic() - t0
        client.gather(warm_up_workers(client))
        ready, cpu = time.monotonic() - t0, children_cpu() - c0
    return {"started_s": round(started, 1), "ready_s": round(ready, 1), "cpu_s": round(cpu, 1)}


def measure(method: str) -> list[dict]:
    """The first and the second cluster of a process whose workers start with ``method``."""
    return [one_cluster(method), one_cluster(method)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", choices=("spawn", "forkserver"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print("| method | cluster | started (s) | all workers hold GX (s) | CPU of workers and fork server (s) |")
    print("|---|---|---|---|---|")
    for _ in range(args.rounds):
        for method in ("spawn", "forkserver"):
            out = subprocess.run([sys.executable, "-m", "bench.dask_start", "--one", method], capture_output=True,
                                 text=True, check=True).stdout
            for which, row in zip(("first", "second"), json.loads(out.splitlines()[-1]), strict=True):
                print(f"| {method} | {which} | {row['started_s']} | {row['ready_s']} | {row['cpu_s']} |")
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
