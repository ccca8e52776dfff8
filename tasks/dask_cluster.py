"""The Dask cluster a release runs on: a LocalCluster sized to the machine, or an existing scheduler."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from distributed import Client, LocalCluster

from trajpub.errors import TrajpubError


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
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as client:
        yield client


def n_workers(client: Client) -> int:
    return max(1, len(client.scheduler_info().get("workers", {})))
