"""Bounded waits on the Dask futures of the ingest and validation stages, so that a lost worker fails the release
(its budget given back by :func:`tasks.outcomes.fail`: the mechanism never ran) instead of leaving it waiting.

A worker lost with partitions the flow sent it cancels their futures: the scheduler cannot recompute scattered
data ("caused the cluster to lose scattered data, which can't be recovered"), and no worker can read them again
from PostGIS (workers hold no database credential: docs/design.md, "Decision codes and the control plane"). A task
whose workers are all gone waits in the scheduler for ever ("no-worker"), so every wait is also bounded by a time
derived from the snapshot's size (:func:`stage_timeout_s`), Dask's own advice for waits that must end
(``distributed.wait(..., timeout=)``, ``Future.result(timeout=)``)."""

from __future__ import annotations

from concurrent.futures import CancelledError

from distributed import Client, Future, wait

from trajpub.errors import TrajpubError

#: The least time a stage's wait allows, whatever the data's size: a busy machine's worker start and GX import.
BASE_S = 600.0
#: Seconds per point and worker on top: about 20x the measured rate (bench/SCALE_RESULTS.md: 15.5 million points
#: validated in 370 s on two workers, 48 microseconds per point and worker), so a slow machine never trips it.
PER_POINT_S = 1e-3


class WorkerLost(TrajpubError):
    """The Dask cluster lost a partition (its worker left) or did not finish a stage within its bound."""


def stage_timeout_s(n_points: int, n_workers: int) -> float:
    """How long one wait of a stage over ``n_points`` on ``n_workers`` workers may take before it fails."""
    return BASE_S + PER_POINT_S * n_points / max(1, n_workers)


def settle(futures: list[Future], what: str, timeout_s: float) -> None:
    """Wait until every future has finished (computed or failed) within ``timeout_s``; raise :class:`WorkerLost`
    when the time is up or when a future was cancelled (its data lost with a worker)."""
    try:
        wait(futures, timeout=timeout_s)
    except TimeoutError:
        raise late(futures, what, timeout_s) from None
    except CancelledError:  # Dask's FuturesCancelledError: the data of some was lost with a worker
        raise lost(futures, what) from None


def late(futures: list[Future], what: str, timeout_s: float) -> WorkerLost:
    unfinished = sum(f.status not in ("finished", "error") for f in futures)
    return WorkerLost(f"the Dask workers did not finish {what} within {timeout_s:.0f} s ({unfinished} of "
                      f"{len(futures)} not done: a worker lost or stuck); run the release again", "Dask")


def lost(futures: list[Future], what: str) -> WorkerLost:
    """:func:`lost_partitions` for ``futures``, counting those whose data went with a worker."""
    return lost_partitions(what, sum(f.status in ("cancelled", "lost") for f in futures), len(futures))


def lost_partitions(what: str, n_lost: int, total: int) -> WorkerLost:
    return WorkerLost(f"a Dask worker was lost during {what} with {n_lost} of {total} partitions, which no worker can "
                      "read again from the database (workers hold no credential); run the release again", "Dask")


def gather(client: Client, futures: list[Future], what: str, timeout_s: float) -> list:
    """:func:`settle`, then the results (a task's own error is raised as it is)."""
    settle(futures, what, timeout_s)
    try:
        return client.gather(futures)
    except (CancelledError, OSError):  # lost between the wait and the gather (or its worker did not answer)
        raise lost(futures, what) from None


def result(future: Future, what: str, timeout_s: float):
    """One future's result within ``timeout_s``, a lost or late one raised as :class:`WorkerLost`."""
    try:
        return future.result(timeout=timeout_s)
    except TimeoutError:
        raise late([future], what, timeout_s) from None
    except (CancelledError, OSError):
        raise lost_partitions(what, 1, 1) from None
