"""The release's Dask cluster: worker processes start with the malloc setting the audit's speed depends on (in
effect, not only in their environment) and with Great Expectations already imported (forked from the fork server),
give back the memory they freed between stages, and a second cluster on the machine starts without a console
warning."""

from __future__ import annotations

import ctypes
import os
import sys
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


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mmapped(size: int) -> int:
    """Bytes glibc maps afresh for one allocation of ``size`` bytes (mallinfo2's ``hblkhd``): all of them above
    the mmap threshold (glibc's default: 128 KiB, raised only by freeing a larger mapped block; 32 MiB under
    :data:`WORKER_ENVIRON`), none below it."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    before = libc.mallinfo2().hblkhd
    block = ctypes.create_string_buffer(size)
    after = libc.mallinfo2().hblkhd
    del block
    return after - before


def _holds(module: str) -> bool:
    return module in sys.modules


def test_worker_processes_get_the_mmap_threshold_and_start_with_great_expectations():
    with local_cluster(1) as cluster, Client(cluster) as client:
        [seen] = client.run(_environ, list(WORKER_ENVIRON)).values()
        [mapped_8, mapped_64] = [next(iter(client.run(_mmapped, mib << 20).values())) for mib in (8, 64)]
        [holds_gx] = client.run(_holds, "great_expectations").values()
        assert list(client.run(os.getpid).values()) != [os.getpid()]  # a separate worker process
    assert seen == {k: str(v) for k, v in WORKER_ENVIRON.items()}
    assert (mapped_8, mapped_64 >= 64 << 20) == (0, True)  # 8 MiB from the heap; 64 MiB mapped: the probe sees it
    assert holds_gx


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
