"""The Dask cluster a release runs on: a LocalCluster sized to the machine, or an existing scheduler."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

import dask
from distributed import Client, LocalCluster

from trajpub.errors import TrajpubError

#: Set in every worker process before it starts. Dask's nanny sets ``MALLOC_TRIM_THRESHOLD_``, which turns off
#: glibc's dynamic mmap threshold: every array above 128 KiB becomes a fresh mmap and the allocation-heavy attacks
#: ran 2-4x slower on workers than in one process (bench/AUDIT_RESULTS.md). A fixed 32 MiB threshold (the dynamic
#: threshold's ceiling) restores the single-process speed.
WORKER_ENVIRON = {"MALLOC_MMAP_THRESHOLD_": 32 * 1024 * 1024}


def local_cluster(n_workers: int, **kwargs) -> LocalCluster:
    """A LocalCluster of single-threaded worker processes with :data:`WORKER_ENVIRON`."""
    config = {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in WORKER_ENVIRON.items()}
    with dask.config.set(config):
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                            silence_logs=40, **kwargs)


def dask_address(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get("TRAJPUB_DASK_ADDRESS") or None


@contextlib.contextmanager
def dask_client(address: str | None = None) -> Iterator[Client]:
    """A client on ``address`` (or ``TRAJPUB_DASK_ADDRESS``), else on a LocalCluster with one single-threaded
    worker process per core."""
    logging.getLogger("distributed").setLevel(logging.WARNING)
    address = dask_address(address)
    if address:
        try:
            client = Client(address, timeout="30s")
        except (OSError, TimeoutError) as exc:
            raise TrajpubError(f"cannot reach the Dask scheduler: {exc}", f"dask address {address}") from None
        with client:
            yield client
        return
    n = os.cpu_count() or 1
    with local_cluster(n) as cluster, Client(cluster) as client:
        yield client


def n_workers(client: Client) -> int:
    return max(1, len(client.scheduler_info().get("workers", {})))
