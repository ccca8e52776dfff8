"""Faults during a release: the flow process killed during protect and during publish, PostgreSQL stopped
mid-run, a Dask worker process killed. In each case nothing partial is published, the release records what happened, and
re-running (or `trajpub recover`) completes it."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

import psutil
import pytest
import sqlalchemy as sa
from distributed import Client

from tests.integration.conftest import (
    base_spec,
    cli,
    load_tdrive_subset,
    start_release,
    wait_for_status,
    wait_until,
)
from tests.integration.private_database import PrivateDatabase, private_database
from trajpub import config

pytestmark = pytest.mark.integration


def q(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).all()


def published_tables(engine, dataset: str) -> set[str]:
    return {r[0] for r in q(engine, "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
                                    " AND table_schema = "
                                    "'published' AND table_name LIKE :p", p=f"{dataset}%")}


def kill_tree(pid: int) -> None:
    """SIGKILL a process and all its descendants (the CLI, its Dask nannies and workers): a crash."""
    root = psutil.Process(pid)
    for proc in [*root.children(recursive=True), root]:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)


@contextlib.contextmanager
def dataset_row_locked(owner: sa.Engine, dataset: str):
    """Hold the dataset's governance row (as the owner: the pipeline may not lock it for update): a release
    blocks in its budget reservation at plan (the ledger's cap trigger locks the row)."""
    with owner.connect() as conn:
        conn.execute(sa.text("SELECT 1 FROM governance.datasets WHERE dataset = :d FOR NO KEY UPDATE"),
                     {"d": dataset})  # the ledger's cap trigger (FOR UPDATE) waits; new releases (KEY SHARE) do not
        yield
        with contextlib.suppress(sa.exc.DBAPIError):  # the server may have been stopped meanwhile
            conn.rollback()


def waiting_on_lock(engine, query_fragment: str) -> bool:
    return bool(q(engine, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                          "query LIKE :f", f=f"%{query_fragment}%")[0][0])


@contextlib.contextmanager
def release_row_locked_once_validated(engine, run):
    """Hold the release's row from the moment it is validated: the flow then blocks when it records that the
    mechanism starts (its next write to the row), before the mechanism has the data."""
    with engine.connect() as conn:
        def grabbed() -> bool:
            assert run.proc.poll() is None, run.output()  # the flow must still be on its way to the mechanism
            if run.release_id is None:
                return False
            got = conn.execute(sa.text(
                "SELECT status, mechanism_started_at FROM governance.releases WHERE release_id = :r"
                " FOR NO KEY UPDATE SKIP LOCKED"), {"r": run.release_id}).first()
            if got and got.status == "validated":
                assert got.mechanism_started_at is None, "the flow started its mechanism before the lock"
                return True
            conn.rollback()
            return False

        # polled finely: the flow leaves 'validated' for its mechanism within a second or two
        wait_until(grabbed, 240, f"release {run.release_id} to be validated", poll_s=0.05)
        yield
        with contextlib.suppress(sa.exc.DBAPIError):
            conn.rollback()


def flow_run_state(flow_run_id):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id).state


def test_flow_killed_during_protect_is_recorded_and_a_rerun_completes(engine, loaded_tdrive, tmp_path):
    dataset = loaded_tdrive("killp")
    run = start_release(base_spec(dataset), tmp_path)
    with release_row_locked_once_validated(engine, run):
        wait_until(lambda: waiting_on_lock(engine, "mechanism_started_at"), 120, "the mechanism start to block")
        kill_tree(run.proc.pid)
        run.proc.wait(timeout=30)
    assert q(engine, "SELECT status FROM governance.releases WHERE release_id = :r",
             r=run.release_id) == [("validated",)]
    (flow_run_id,), = q(engine, "SELECT flow_run_id FROM governance.releases WHERE release_id = :r",
                        r=run.release_id)
    assert flow_run_state(flow_run_id).type.value == "RUNNING"  # nobody told Prefect the process died
    out = cli("recover", "--dataset", dataset)
    assert out.returncode == 0, out.stderr
    assert f"1 interrupted release(s) marked failed ({run.release_id})" in out.stdout
    state = flow_run_state(flow_run_id)  # the UI and the API no longer show a dead run as running
    assert state.type.value == "CRASHED" and "`trajpub recover` marked the release failed" in state.message
    (status, reason), = q(engine, "SELECT status, failure_reason FROM governance.releases WHERE release_id = :r",
                          r=run.release_id)
    assert status == "failed" and "interrupted while 'validated'" in reason
    assert published_tables(engine, dataset) == set()
    assert q(engine, "SELECT event_type FROM governance.lineage_events WHERE release_id = :r ORDER BY event_id",
             r=run.release_id) == [("START",), ("FAIL",)]
    # the budget reserved at plan is given back: the mechanism never had the data
    assert q(engine, "SELECT entry_kind, epsilon FROM governance.budget_ledger WHERE release_id = :r ORDER BY "
                     "entry_id", r=run.release_id) == [("charge", 10.0), ("release", -10.0)]
    rerun = start_release(base_spec(dataset), tmp_path)
    wait_for_status(engine, rerun, {"awaiting_approval"})
    assert cli("approve", str(rerun.release_id), "--steward", "ada").returncode == 0
    assert rerun.proc.wait(timeout=120) == 0
    assert published_tables(engine, dataset) == {f"{dataset}__r{rerun.release_id}",
                                                 f"{dataset}__r{rerun.release_id}_traj"}


def test_flow_killed_during_publish_publishes_nothing_and_recover_completes_it(engine, owner, loaded_tdrive,
                                                                               tmp_path):
    dataset = loaded_tdrive("killpub")
    run = start_release(base_spec(dataset), tmp_path)
    wait_for_status(engine, run, {"awaiting_approval"})
    with owner.connect() as blocker:  # the test's own hand on the database, not a role of the platform
        # publish writes its tables, then blocks on its lineage event; the process dies there
        blocker.execute(sa.text("LOCK TABLE governance.lineage_events IN SHARE MODE"))
        approve = cli("approve", str(run.release_id), "--steward", "ada", "--wait", "1")
        # approved, and not carried out in time: exit 1 until it is published, saying what to run
        assert approve.returncode == 1 and "is still 'approved'" in approve.stderr, approve.stderr
        assert "trajpub recover" in approve.stderr
        wait_until(lambda: waiting_on_lock(engine, "INSERT INTO governance.lineage_events"), 120,
                   "publish to block on the lineage event")
        kill_tree(run.proc.pid)
        run.proc.wait(timeout=30)
        blocker.rollback()
    wait_until(lambda: not waiting_on_lock(engine, "INSERT INTO governance.lineage_events"), 60,
               "the dead publish transaction to end")
    assert published_tables(engine, dataset) == set()
    assert q(engine, "SELECT status, published_table FROM governance.releases WHERE release_id = :r",
             r=run.release_id) == [("approved", None)]
    (flow_run_id,), = q(engine, "SELECT flow_run_id FROM governance.releases WHERE release_id = :r",
                        r=run.release_id)
    assert flow_run_state(flow_run_id).type.value == "RUNNING"
    out = cli("recover", "--dataset", dataset)
    assert out.returncode == 0, out.stderr
    assert f"release {run.release_id} was approved but not published; now published" in out.stdout
    state = flow_run_state(flow_run_id)
    assert state.type.value == "CRASHED" and "`trajpub recover` published the release" in state.message
    assert published_tables(engine, dataset) == {f"{dataset}__r{run.release_id}",
                                                 f"{dataset}__r{run.release_id}_traj"}


@pytest.fixture(scope="module")
def outage_db():
    """A cluster of this module's own for the tests that stop PostgreSQL: the shared one stays up for the tests
    that run beside them."""
    yield from private_database(stewards=("ada",), requesters=("pytest",))


@pytest.fixture(scope="module")
def outage_dataset(outage_db, tdrive_subset):
    """A function that loads the 40-taxi subset into a fresh dataset of :func:`outage_db` (as
    :func:`loaded_tdrive` does on the shared database)."""
    return lambda prefix: load_tdrive_subset(tdrive_subset, prefix, outage_db.engine(),
                                             outage_db.engine(config.OWNER), outage_db.engine("ada"))


def test_postgres_stopped_mid_run_is_retried_and_the_release_completes(outage_db, outage_dataset, tmp_path):
    dataset = outage_dataset("pgstop")
    run = start_release(base_spec(dataset, approval_timeout_s=5), tmp_path, environment=outage_db.env)
    # the budget is reserved at plan, under the dataset's row lock
    postgres_down_while_blocked(outage_db, dataset_row_locked(outage_db.engine(config.OWNER), dataset),
                                "INSERT INTO governance.budget_ledger")
    completed_after_the_outage(outage_db.engine(), run, "plan")


def postgres_down_while_blocked(db: PrivateDatabase, held, blocked_query: str, until=None) -> None:
    """Stop the PostgreSQL of ``db`` once the release waits on the lock ``held`` holds (its waiting statement
    contains ``blocked_query``), keep it down until ``until()`` holds (if given), then start it again, whatever
    happens."""
    try:
        with held:
            wait_until(lambda: waiting_on_lock(db.engine(), blocked_query), 120,
                       f"the release to block in {blocked_query}")
            down = db.cli("db", "down")
            assert down.returncode == 0 and "stopped" in down.stdout, down.stdout + down.stderr
            kept = down.stdout.split("to remove it for good: rm -rf ")[1].strip()  # it says where the data stays
            assert Path(kept, "PG_VERSION").exists() or Path(kept, "pgdata", "PG_VERSION").exists(), down.stdout
        if until is not None:
            wait_until(until, 120, "the release to react to the outage")
    finally:
        up = db.cli("db", "up")  # whatever happened, the server is back for the test that follows
    assert up.returncode == 0, up.stderr


def completed_after_the_outage(engine, run, retried: str) -> None:
    """The release reached review after its step ``retried`` met a transient database error, charged once."""
    assert run.proc.wait(timeout=300) == 0, run.output()
    assert f"{retried}: transient database error" in run.output()
    assert q(engine, "SELECT status FROM governance.releases WHERE release_id = :r",
             r=run.release_id) == [("awaiting_approval",)]
    assert q(engine, "SELECT count(*) FROM governance.budget_ledger WHERE release_id = :r",
             r=run.release_id) == [(1,)]


@contextlib.contextmanager
def snapshot_blocked(engine, dataset: str):
    """Hold the dataset's advisory lock, which a snapshot takes to wait for loads in flight: the release blocks in
    its ingest stage, after plan."""
    from tasks.db import dataset_lock_key

    with engine.connect() as conn:
        conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": dataset_lock_key(dataset)})
        yield
        with contextlib.suppress(sa.exc.DBAPIError):  # the server may have been stopped meanwhile
            conn.rollback()


def test_postgres_down_longer_than_a_transaction_retries_the_ingest_stage(outage_db, outage_dataset, tmp_path):
    """tasks/stages.py: PostgreSQL down longer than the ~15 s one database call retries for makes the ingest and
    validate stage fail with a transient error, and Prefect runs the whole stage again 20 s later
    (``retry_condition_fn``); the release then completes, with its validation stored once."""
    engine = outage_db.engine()
    dataset = outage_dataset("pgstage")
    run = start_release(base_spec(dataset, approval_timeout_s=5), tmp_path, environment=outage_db.env)
    # down until Prefect schedules the stage's retry: longer than the snapshot's own retries
    postgres_down_while_blocked(outage_db, snapshot_blocked(engine, dataset), "pg_advisory_xact_lock",
                                until=lambda: "Retry 1/2 will start" in run.output())
    completed_after_the_outage(engine, run, "snapshot")
    assert q(engine, "SELECT count(*) FROM governance.validation_results WHERE release_id = :r",
             r=run.release_id) == [(1,)]


def test_a_dask_worker_process_killed_mid_run_is_survived_and_nothing_half_is_released(engine, loaded_tdrive,
                                                                                        tmp_path):
    """A release on a cluster of separate processes (``dask scheduler`` + two ``dask worker``, the
    TRAJPUB_DASK_ADDRESS path) loses one whole worker (its nanny and worker process, SIGKILL) while the
    validated partitions sit in worker memory: the release fails closed (the flow sent those partitions; no worker
    can read them again from PostGIS, holding no credential), or, when Dask could recompute what was lost, it
    reaches review over every object of its snapshot; nothing is published either way."""
    from tasks.dask_cluster import process_cluster

    dataset = loaded_tdrive("worker")
    with process_cluster(2, tmp_path / "dask") as cluster:
        run = start_release(base_spec(dataset, approval_timeout_s=5), tmp_path, environment=cluster.environment())
        wait_until(lambda: run.release_id, 600, "the release to be planned")  # a busy machine starts it slowly
        with release_row_locked_once_validated(engine, run):  # the prepared partitions sit in worker memory
            wait_until(lambda: waiting_on_lock(engine, "mechanism_started_at"), 120, "the mechanism start to block")
            victim = cluster.workers[0]
            kill_tree(victim.pid)
            victim.wait(timeout=30)
            with Client(cluster.address, security=cluster.security) as client:
                wait_until(lambda: len(client.scheduler_info()["workers"]) == 1, 60,
                           "the scheduler to drop the killed worker")
        code = run.proc.wait(timeout=300)
    (status, reason, summary), = q(engine, "SELECT status, failure_reason, summary FROM governance.releases "
                                           "WHERE release_id = :r", r=run.release_id)
    assert published_tables(engine, dataset) == set()
    if status == "failed":  # fail closed: said so, and lineage FAIL
        assert code != 0 and reason, run.output()
        assert q(engine, "SELECT event_type FROM governance.lineage_events WHERE release_id = :r ORDER BY event_id",
                 r=run.release_id) == [("START",), ("FAIL",)]
        return
    assert code == 0 and status == "awaiting_approval", run.output()
    (n_raw, n_objects), = q(engine, "SELECT count(*), count(DISTINCT object_id) FROM raw.points WHERE dataset = :d",
                            d=dataset)
    assert (summary["snapshot"]["n_points"], summary["snapshot"]["n_objects"]) == (n_raw, n_objects)
    # nothing half: preparation, after the kill, read every point the validation (before it) kept, not only the
    # surviving worker's partitions
    (n_rows, n_quarantined), = q(engine, "SELECT n_rows, n_quarantined FROM governance.validation_results"
                                         " WHERE release_id = :r", r=run.release_id)
    assert n_rows == n_raw
    assert summary["prepare"]["points_in"] == n_rows - n_quarantined and summary["prepare"]["trajectories"] > 0
