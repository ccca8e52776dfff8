"""The release's Dask cluster: worker processes start with the malloc setting the audit's speed depends on."""

from __future__ import annotations

import os

from distributed import Client

from tasks.dask_cluster import WORKER_ENVIRON, local_cluster


def _environ(names: list[str]) -> dict:
    return {name: os.environ.get(name) for name in names}


def test_worker_processes_get_the_mmap_threshold():
    with local_cluster(1) as cluster, Client(cluster) as client:
        [seen] = client.run(_environ, list(WORKER_ENVIRON)).values()
        assert list(client.run(os.getpid).values()) != [os.getpid()]  # a separate worker process
    assert seen == {k: str(v) for k, v in WORKER_ENVIRON.items()}
