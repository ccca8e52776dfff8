"""The release's Dask cluster: worker processes start with the malloc setting the audit's speed depends on, give
back the memory they freed between stages, and a second cluster on the machine starts without a console warning."""

from __future__ import annotations

import os
import warnings

import psutil
from distributed import Client

from tasks.dask_cluster import WORKER_ENVIRON, local_cluster, release_unused_memory

_HELD: list = []


def _fragment_heap(n: int = 100_000, size: int = 2048) -> int:
    """Allocate n blocks of ``size`` bytes from the C heap (above pymalloc's limit, below the mmap threshold), keep
    one in a hundred: about 200 MB freed but held by glibc between the kept ones. Returns the RSS then."""
    blocks = [bytes(size) for _ in range(n)]
    _HELD[:] = blocks[::100]
    del blocks
    return psutil.Process().memory_info().rss


def _rss() -> int:
    return psutil.Process().memory_info().rss


def _environ(names: list[str]) -> dict:
    return {name: os.environ.get(name) for name in names}


def test_worker_processes_get_the_mmap_threshold():
    with local_cluster(1) as cluster, Client(cluster) as client:
        [seen] = client.run(_environ, list(WORKER_ENVIRON)).values()
        assert list(client.run(os.getpid).values()) != [os.getpid()]  # a separate worker process
    assert seen == {k: str(v) for k, v in WORKER_ENVIRON.items()}


def test_two_clusters_at_once_start_without_a_port_warning():
    """Distributed's default HTTP port, 8787, is taken by the first cluster; the second warned on the console."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with local_cluster(1) as first, local_cluster(1) as second, Client(second) as client:
            assert client.submit(sum, [1, 2]).result() == 3
            assert first.scheduler.http_server.port != second.scheduler.http_server.port
    assert not [w for w in caught if "already in use" in str(w.message)], [str(w.message) for w in caught]


def test_freed_memory_goes_back_to_the_system_on_every_worker():
    """A worker's heap keeps what the stages freed when live blocks sit between the free ones (glibc trims only the
    top on its own): release_unused_memory hands it back (here ~200 MB per worker; at least 100 MB asked)."""
    with local_cluster(2) as cluster, Client(cluster) as client:
        before = client.run(_fragment_heap)
        release_unused_memory(client)
        after = client.run(_rss)
    assert len(before) == 2
    assert all(before[w] - after[w] > 100 * 2**20 for w in before), (before, after)
