"""The CPU an idle two-worker cluster uses, with Dask's default diagnostics and with trajpub's
(:data:`tasks.dask_cluster.QUIET_DIAGNOSTICS`): the scheduler and the nannies (this process) and the two worker
processes, over ``--seconds`` of idleness after the cluster has settled.

``python -m bench.dask_idle [--seconds 30]``; the result goes to bench/SUITE_TIME_RESULTS.md by hand.
"""

from __future__ import annotations

import argparse
import platform
import time

import psutil
from distributed import Client

from tasks import dask_cluster


def idle_cpu(diagnostics: dict, seconds: float) -> tuple[float, float]:
    """(CPU seconds of this process, of the worker processes) while a fresh cluster with the Dask settings
    ``diagnostics`` idles for ``seconds``."""
    with dask_cluster.local_cluster(2, diagnostics=diagnostics) as cluster, Client(cluster):
        time.sleep(3)  # the workers' start-up is not idleness
        me = psutil.Process()

        def cpu() -> tuple[float, float]:
            workers = me.children(recursive=True)
            return sum(me.cpu_times()[:2]), sum(sum(w.cpu_times()[:2]) for w in workers)

        before = cpu()
        time.sleep(seconds)
        after = cpu()
    return after[0] - before[0], after[1] - before[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    seconds = parser.parse_args().seconds
    print(f"machine: {platform.node()}, {psutil.cpu_count()} cores; idle for {seconds:g} s")
    for name, diagnostics in (("Dask defaults", {}), ("QUIET_DIAGNOSTICS", dask_cluster.QUIET_DIAGNOSTICS)):
        parent, workers = idle_cpu(diagnostics, seconds)
        print(f"{name:18s} scheduler+nannies {parent:5.2f} CPU-s, workers {workers:5.2f} CPU-s: "
              f"{(parent + workers) / seconds:.1%} of a core")


if __name__ == "__main__":
    main()
