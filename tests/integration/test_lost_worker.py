"""A Dask worker lost during ingest or validation (tasks/dask_wait.py): the stage's waits end, in one sentence,
within a bound set by the data's size, and the release fails with its budget given back; it never waits in
``planned`` holding its dataset's slot. Real Dask clusters, real worker processes killed with SIGKILL."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import pytest
import sqlalchemy as sa
from distributed import Client

from tasks import dask_wait
from tests.integration.conftest import base_spec, start_release, wait_until
from tests.integration.test_recovery import kill_tree, published_tables, q, waiting_on_lock

pytestmark = pytest.mark.integration


def echo(data: bytes) -> int:
    return len(data)


def warm() -> str:
    return "ready"


@pytest.fixture(scope="module")
def two_workers():
    from tasks.dask_cluster import local_cluster

    with local_cluster(2) as cluster, Client(cluster) as client:
        yield client


def kill_worker_process(client: Client, address: str) -> None:
    """SIGKILL the worker process at ``address`` (its nanny starts a new one, at another address, empty)."""
    pid = client.run(os.getpid, workers=[address])[address]
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: address not in client.scheduler_info()["workers"], 60, "the scheduler to drop the worker")


def test_partitions_lost_with_their_worker_fail_the_wait_in_one_sentence(two_workers):
    client = two_workers
    first, second = sorted(client.scheduler_info()["workers"])
    sent = client.scatter([b"a" * 100, b"b" * 100], workers=[first], hash=False, direct=True)
    kept = client.scatter([b"c" * 100], workers=[second], hash=False, direct=True)
    assert dask_wait.gather(client, client.map(echo, sent + kept, pure=False), "validation", 60) == [100] * 3
    kill_worker_process(client, first)
    # the two partitions it held, and what depends on them (Dask may cancel a whole batch of tasks)
    with pytest.raises(dask_wait.WorkerLost, match="a Dask worker was lost during validation with [23] of 3 "
                                                   "partitions, which no worker can read again"):
        dask_wait.gather(client, client.map(echo, sent + kept, pure=False), "validation", 60)


def test_a_task_held_to_a_lost_worker_fails_at_its_bound(two_workers):
    """A task only a worker that is gone may run waits in the scheduler for ever: the bounded wait ends it."""
    client = two_workers
    first = min(client.scheduler_info()["workers"])
    held = client.submit(warm, workers=[first], allow_other_workers=False, pure=False)
    assert dask_wait.result(held, "the workers' start", 60) == "ready"
    kill_worker_process(client, first)  # its result is lost; only the lost worker may compute it again
    with pytest.raises(dask_wait.WorkerLost, match=r"did not finish the workers' start within 3 s \(1 of 1 not done"):
        dask_wait.gather(client, [held], "the workers' start", 3)


@contextlib.contextmanager
def snapshot_blocked(engine: sa.Engine, dataset: str):
    """Hold the dataset's advisory lock, which a snapshot takes to wait for loads in flight (the release waits in
    its ingest stage, after plan), and let it go on exit."""
    from tasks.db import dataset_lock_key

    with engine.connect() as conn:
        conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": dataset_lock_key(dataset)})
        try:
            yield
        finally:
            conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": dataset_lock_key(dataset)})
            conn.commit()


def test_a_release_whose_worker_is_lost_during_ingest_fails_and_gives_its_budget_back(engine, loaded_tdrive,
                                                                                        tmp_path):
    """A whole worker (nanny and worker) of a separate-process cluster (the TRAJPUB_DASK_ADDRESS path) killed
    while the release takes its snapshot: the release goes on with the worker left (before the bounded waits, the
    GX warm-up held to the lost worker waited for ever, the release stuck in ``planned``) and, its bbox leaving
    nearly every point out, fails validation: failed, the charge given back, nothing published."""
    from tasks.dask_cluster import process_cluster

    dataset = loaded_tdrive("lostw")
    spec = base_spec(dataset, bbox=[116.0, 39.0, 116.01, 39.01])  # a corner of Beijing no taxi drove through
    with process_cluster(2, tmp_path / "dask") as cluster:
        with snapshot_blocked(engine, dataset):
            run = start_release(spec, tmp_path, environment=cluster.environment())
            wait_until(lambda: waiting_on_lock(engine, "pg_advisory_xact_lock"), 300, "the snapshot to block")
            kill_tree(cluster.workers[0].pid)
            cluster.workers[0].wait(timeout=30)
            with Client(cluster.address, security=cluster.security) as client:
                wait_until(lambda: len(client.scheduler_info()["workers"]) == 1, 60,
                           "the scheduler to drop the worker")
        try:
            code = run.proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            kill_tree(run.proc.pid)
            raise AssertionError(f"release {run.release_id} did not end:\n{run.output()[-4000:]}") from None
    (status, reason, started), = q(engine, "SELECT status, failure_reason, mechanism_started_at FROM "
                                          "governance.releases WHERE release_id = :r", r=run.release_id)
    assert code != 0 and status == "failed" and started is None, run.output()
    assert "failed validation" in reason and "Traceback" not in reason, reason
    ledger = q(engine, "SELECT entry_kind, epsilon FROM governance.budget_ledger WHERE release_id = :r ORDER BY "
                       "entry_id", r=run.release_id)
    assert [kind for kind, _ in ledger] == ["charge", "release"] and ledger[0][1] > 0
    assert ledger[1][1] == -ledger[0][1]
    assert published_tables(engine, dataset) == set()
