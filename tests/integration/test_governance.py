"""Steward controls and the budget ledger on the real database: races, four-eyes, append-only, withdrawal."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from tasks import governance
from tasks.db import database_url
from tests.integration.conftest import (
    base_spec,
    cli,
    new_release,
    start_release,
    to_awaiting_approval,
    wait_for_status,
)
from trajpub.errors import PolicyError

pytestmark = pytest.mark.integration


def q(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).all()


@pytest.fixture
def bare_dataset(owner, dataset_name):
    """A dataset with governance rows and no points: enough for ledger and approval rules (its cap set by the
    owner: the pipeline cannot choose a cap)."""
    with owner.begin() as conn:
        conn.execute(sa.text("INSERT INTO raw.datasets (dataset) VALUES (:d)"), {"d": dataset_name})
        conn.execute(sa.text("INSERT INTO governance.datasets (dataset, epsilon_cap) VALUES (:d, 5.5)"),
                     {"d": dataset_name})
    return dataset_name


def test_twenty_concurrent_charges_never_overspend(engine, bare_dataset):
    """20 releases charge ε = 1 at the same moment against a cap of 5.5: exactly 5 are charged."""
    releases = [new_release(engine, bare_dataset) for _ in range(20)]
    barrier = threading.Barrier(len(releases), timeout=60)
    outcomes: dict[int, str] = {}
    unpooled = sa.create_engine(engine.url, poolclass=sa.pool.NullPool)  # one connection per thread

    def charge(rid: int) -> None:
        with unpooled.connect() as conn:
            barrier.wait()
            try:
                with conn.begin():
                    governance.charge_budget(conn, rid, bare_dataset, "prefix_tree", 1.0, 0.0,
                                             "one trajectory record", 7)
                outcomes[rid] = "charged"
            except PolicyError:
                outcomes[rid] = "refused"

    threads = [threading.Thread(target=charge, args=(rid,)) for rid in releases]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(outcomes.values()).count("charged") == 5 and len(outcomes) == 20
    (spent, n, cap_k), = q(engine, "SELECT sum(epsilon), count(*), min(max_records_per_object) FROM "
                                   "governance.budget_ledger WHERE dataset = :d", d=bare_dataset)
    assert (spent, n, cap_k) == (5.0, 5, 7)


def test_delta_is_composed_and_capped(engine, stewards, bare_dataset):
    rid = new_release(engine, bare_dataset)
    with engine.begin() as conn, pytest.raises(PolicyError, match="delta cap 0"):
        governance.charge_budget(conn, rid, bare_dataset, "m", 1.0, 1e-6, "one object")
    with stewards["ada"].begin() as conn:
        conn.execute(sa.text("UPDATE governance.datasets SET delta_cap = 1.5e-6 WHERE dataset = :d"),
                     {"d": bare_dataset})
    with engine.begin() as conn:
        governance.charge_budget(conn, rid, bare_dataset, "m", 1.0, 1e-6, "one object")
    with engine.begin() as conn, pytest.raises(PolicyError, match="needs delta 1e-06"):
        governance.charge_budget(conn, new_release(engine, bare_dataset), bare_dataset, "m", 1.0, 1e-6, "obj")


def test_approvals_are_written_only_by_the_decision_functions(engine, stewards, bare_dataset):
    """No role inserts an approval directly, the steward included: a decision goes through governance.decide,
    which records the connection's login; the pipeline and the consumer cannot call it."""
    rid = new_release(engine, bare_dataset)
    to_awaiting_approval(engine, rid)
    consumer = sa.create_engine(database_url("trajpub_consumer"))
    for eng in (engine, consumer, stewards["ada"]):
        with eng.begin() as conn, pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
            conn.execute(sa.text("INSERT INTO governance.approvals (release_id, decision, steward) "
                                 "VALUES (:r, 'approved', 'mallory')"), {"r": rid})
    for eng in (engine, consumer):
        with eng.begin() as conn, pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
            conn.execute(sa.text("SELECT governance.decide(:r, 'approved', '')"), {"r": rid})
    with stewards["ada"].begin() as conn:
        assert governance.decide(conn, rid, "approved", None) == "ada"
    assert q(engine, "SELECT steward FROM governance.approvals WHERE release_id = :r", r=rid) == [("ada",)]


def test_append_only_tables_refuse_truncate(owner):
    for table in ("governance.approvals", "governance.budget_ledger", "governance.withdrawals"):
        with owner.begin() as conn, pytest.raises(sa.exc.ProgrammingError, match="append-only"):
            conn.execute(sa.text(f"TRUNCATE {table} CASCADE"))


def test_withdraw_drops_the_tables_and_keeps_lineage_and_ledger(engine, loaded_tdrive, tmp_path):
    dataset = loaded_tdrive("wd")
    rids = []
    for _ in range(2):  # two published releases: withdrawing the newer repoints the views to the older
        run = start_release(base_spec(dataset), tmp_path)
        wait_for_status(engine, run, {"awaiting_approval"})
        assert cli("approve", str(run.release_id), "--steward", "ada").returncode == 0
        assert run.proc.wait(timeout=120) == 0, run.output()
        rids.append(run.release_id)
    old, new = rids
    ledger_before = q(engine, "SELECT release_id, epsilon FROM governance.budget_ledger WHERE dataset = :d "
                              "ORDER BY release_id", d=dataset)
    assert cli("withdraw", str(new), "--steward", "ada").returncode != 0  # a reason is required
    out = cli("withdraw", str(new), "--steward", "ada", "--reason", "a point of interest was exposed")
    assert out.returncode == 0, out.stderr
    tables = {r[0] for r in q(engine, "SELECT table_name FROM information_schema.tables WHERE "
                                      "table_schema = 'published' AND table_name LIKE :p", p=f"{dataset}%")}
    assert f"{dataset}__r{new}" not in tables and f"{dataset}__r{new}_traj" not in tables
    assert {f"{dataset}__r{old}", f"{dataset}__r{old}_traj"} <= tables
    assert q(engine, f"SELECT count(*) FROM published.{dataset}_latest") == \
        q(engine, f"SELECT count(*) FROM published.{dataset}__r{old}")
    assert q(engine, "SELECT status FROM governance.releases WHERE release_id = :r", r=new) == [("withdrawn",)]
    assert q(engine, "SELECT release_id, epsilon FROM governance.budget_ledger WHERE dataset = :d "
                     "ORDER BY release_id", d=dataset) == ledger_before
    events = [r[0] for r in q(engine, "SELECT event_type FROM governance.lineage_events WHERE release_id = :r "
                                      "ORDER BY event_id", r=new)]
    assert events == ["START", "COMPLETE", "OTHER"]
    assert q(engine, "SELECT steward, reason FROM governance.withdrawals WHERE release_id = :r", r=new) == [
        ("ada", "a point of interest was exposed")]
    assert cli("withdraw", str(new), "--steward", "ada", "--reason", "again").returncode == 1
    consumer = sa.create_engine(database_url("trajpub_consumer"))
    with consumer.connect() as conn:  # the consumer no longer sees the withdrawn release in the lineage view
        assert conn.execute(sa.text("SELECT count(*) FROM published.release_lineage WHERE release_id = :r"),
                            {"r": new}).scalar() == 0


def test_one_release_per_dataset_computes_at_a_time(engine, loaded_tdrive, tmp_path):
    """While another release holds the dataset's slot, a new one waits in 'planned' (and fails with a clear
    reason when its queue timeout passes); once the slot is free it goes on."""
    from tasks.db import release_slot
    from tests.integration.conftest import wait_until

    dataset = loaded_tdrive("slot")
    with release_slot(engine, dataset, timeout_s=5):
        impatient = start_release(base_spec(dataset, queue_timeout_s=2), tmp_path)
        assert impatient.proc.wait(timeout=120) != 0
        (status, reason), = q(engine, "SELECT status, failure_reason FROM governance.releases WHERE "
                                      "release_id = :r", r=impatient.release_id)
        assert status == "failed" and f"another release of dataset '{dataset}'" in reason
        patient = start_release(base_spec(dataset, approval_timeout_s=2), tmp_path)
        wait_until(lambda: "waiting for the running release" in patient.output(), 120, "the release to queue")
        assert q(engine, "SELECT status FROM governance.releases WHERE release_id = :r",
                 r=patient.release_id) == [("planned",)]
    assert patient.proc.wait(timeout=240) == 0, patient.output()
    assert q(engine, "SELECT status FROM governance.releases WHERE release_id = :r",
             r=patient.release_id) == [("awaiting_approval",)]
