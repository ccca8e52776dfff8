"""Steward controls and the budget ledger on the real database: races, four-eyes, append-only, withdrawal."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from tasks import governance, publish
from tasks.db import auditor_engine, database_url
from tests.integration.conftest import (
    base_spec,
    cli,
    new_release,
    record_validation,
    start_release,
    to_awaiting_approval,
)
from tests.integration.staged import approved_release, new_dataset
from trajpub.errors import PolicyError
from trajpub.guarantee import Guarantee, PrivacyMap

pytestmark = pytest.mark.integration


def q(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).all()


def guarantee(epsilon: float, delta: float = 0.0, account: str = "epsilon-DP", rule: str = "per_object",
              records_per_object: int | None = None) -> Guarantee:
    return Guarantee(model=account, privacy_unit="one object" if rule == "per_object" else "one trajectory record",
                     statement="test", proven=True, epsilon=epsilon, delta=delta,
                     privacy_map=PrivacyMap(account, rule, records_per_object))


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
                    governance.charge_budget(conn, rid, bare_dataset, "prefix_tree", guarantee(1.0))
                outcomes[rid] = "charged"
            except PolicyError:
                outcomes[rid] = "refused"

    threads = [threading.Thread(target=charge, args=(rid,)) for rid in releases]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(outcomes.values()).count("charged") == 5 and len(outcomes) == 20
    (spent, n, unit), = q(engine, "SELECT sum(unit_epsilon), count(*), min(unit) FROM "
                                  "governance.budget_ledger WHERE dataset = :d", d=bare_dataset)
    assert (spent, n, unit) == (5.0, 5, "object")


def test_delta_is_composed_and_capped(engine, stewards, bare_dataset):
    rid = new_release(engine, bare_dataset)
    with engine.begin() as conn, pytest.raises(PolicyError, match="delta cap 0"):
        governance.charge_budget(conn, rid, bare_dataset, "m", guarantee(1.0, 1e-6))
    with stewards["ada"].begin() as conn:
        conn.execute(sa.text("UPDATE governance.datasets SET delta_cap = 1.5e-6 WHERE dataset = :d"),
                     {"d": bare_dataset})
    with engine.begin() as conn:
        governance.charge_budget(conn, rid, bare_dataset, "m", guarantee(1.0, 1e-6))
    with engine.begin() as conn, pytest.raises(PolicyError, match="needs delta 1e-06"):
        governance.charge_budget(conn, new_release(engine, bare_dataset), bare_dataset, "m",
                                 guarantee(1.0, 1e-6))


def test_the_ledger_charges_per_object_and_never_sums_models(engine, bare_dataset):
    """ε = 0.5 per record with 7 records per object costs 3.5 per object (group privacy); ε-LDP and Pufferfish
    have their own caps (10 by default); a heuristic guarantee is counted without ε."""
    rids = [new_release(engine, bare_dataset) for _ in range(5)]  # before the charges lock the dataset row
    with engine.begin() as conn:
        per_record = governance.charge_budget(conn, rids[0], bare_dataset, "prefix_tree",
                                              guarantee(0.5, rule="group_privacy", records_per_object=7))
        for rid, account in zip(rids[1:3], ("epsilon-LDP", "Pufferfish"), strict=True):
            governance.charge_budget(conn, rid, bare_dataset, "m", guarantee(5.0, account=account))
        governance.charge_budget(conn, rids[3], bare_dataset, "w4m",
                                 Guarantee(model="heuristic", privacy_unit="one trajectory", statement="t",
                                           proven=False, privacy_map=PrivacyMap("heuristic", "not_dp")))
    assert (per_record.epsilon, per_record.unit) == (3.5, "object")
    with engine.connect() as conn:
        acc = governance.accounts(conn, bare_dataset)
    assert {k: (a.spent, a.releases) for k, a in acc.items()} == {
        "epsilon-DP": (3.5, 1), "epsilon-LDP": (5.0, 1), "Pufferfish": (5.0, 1), "heuristic": (0.0, 1)}
    # 3.5 + 7 x 0.5 = 7 > 5.5 per object, though 0.5 + 0.5 per record would fit
    with engine.begin() as conn, pytest.raises(PolicyError, match="epsilon 3.5 per object .* only 2 of its cap 5.5"):
        governance.charge_budget(conn, rids[4], bare_dataset, "prefix_tree",
                                 guarantee(0.5, rule="group_privacy", records_per_object=7))
    # nothing capping an object's records: unbounded per object, refused; per record it would be 0.5
    with engine.begin() as conn, pytest.raises(PolicyError, match="unbounded"):
        governance.check_budget(conn, bare_dataset, guarantee(0.5, rule="group_privacy"))
    assert cli("budget", "unit", bare_dataset, "record", "--steward", "ada").returncode == 1  # the ledger has entries
    shown = cli("budget", "show", "--dataset", bare_dataset)
    assert "epsilon-DP: epsilon 3.5 per object spent of cap 5.5 (2 left)" in shown.stdout, shown.stdout


def test_a_record_unit_dataset_charges_the_mechanisms_own_epsilon(engine, bare_dataset):
    assert cli("budget", "unit", bare_dataset, "record", "--steward", "ada").returncode == 0
    rid = new_release(engine, bare_dataset)
    with engine.begin() as conn:
        charge = governance.charge_budget(conn, rid, bare_dataset, "prefix_tree", guarantee(0.5, rule="group_privacy"))
    assert (charge.epsilon, charge.unit) == (0.5, "record")


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


def test_withdraw_drops_the_tables_and_keeps_lineage_and_ledger(engine):
    dataset = new_dataset(engine)
    rids = []
    for _ in range(2):  # two published releases: withdrawing the newer repoints the views to the older
        rids.append(approved_release(engine, dataset, "trajectories", charge=1.0))
        publish.publish(engine, rids[-1], None)
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
    assert events == ["COMPLETE", "OTHER"]
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


def stage_rows(engine, rid: int) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO staging.candidate_points (release_id, traj_id, seq, geom) VALUES"
                             " (:r, 1, 0, ST_SetSRID(ST_MakePoint(116.4, 39.9), 4326))"), {"r": rid})
        conn.execute(sa.text("INSERT INTO staging.candidate_owners (release_id, traj_id, object_id, source_traj_id)"
                             " VALUES (:r, 1, 'taxi-1', 7)"), {"r": rid})
        conn.execute(sa.text("INSERT INTO staging.candidate_fragments (release_id, fragment_id, cells,"
                             " estimated_count, round, geom) VALUES (:r, 1, '{3}', 9.5, 1,"
                             " ST_SetSRID(ST_MakePoint(116.4, 39.9), 4326))"), {"r": rid})
    with auditor_engine().begin() as conn:  # the audit's evidence is the auditor's to write (sql/036)
        conn.execute(sa.text("INSERT INTO governance.audit_results (release_id, attack, success_rate, ci_low,"
                             " ci_high, baseline, risk, threshold, passed, evidence) VALUES"
                             " (:r, 'signature_linkage', 0.5, 0.4, 0.6, 0.1, 0.44, 0.2, false, '{}')"), {"r": rid})


def staged(engine, rid: int) -> list[int]:
    return [q(engine, f"SELECT count(*) FROM {t} WHERE release_id = :r", r=rid)[0][0]
            for t in governance.STAGING_TABLES]


def block(engine, rid: int) -> None:
    with engine.begin() as conn:
        record_validation(conn, rid)
        for status in ("validated", "protected", "audited", "blocked"):
            governance.transition(conn, rid, status, "test")


def test_an_ended_release_leaves_nothing_in_staging_and_keeps_its_audit(engine, bare_dataset):
    rid = new_release(engine, bare_dataset)
    stage_rows(engine, rid)
    assert staged(engine, rid) == [1, 1, 1]
    block(engine, rid)
    assert staged(engine, rid) == [0, 0, 0]
    assert q(engine, "SELECT risk FROM governance.audit_results WHERE release_id = :r", r=rid) == [(0.44,)]
    assert q(engine, "SELECT staging_purged_at IS NOT NULL FROM governance.releases WHERE release_id = :r",
             r=rid) == [(True,)]


def test_a_retention_setting_keeps_the_evidence_that_long(engine, owner, bare_dataset):
    assert cli("retention", bare_dataset, "3", "--steward", "ada").returncode == 0
    rid = new_release(engine, bare_dataset)
    stage_rows(engine, rid)
    block(engine, rid)
    with engine.begin() as conn:
        assert rid not in governance.purge_expired_staging(conn)
    assert staged(engine, rid) == [1, 1, 1]  # blocked, but the steward keeps the evidence 3 days
    with owner.begin() as conn:  # four days later (the test moves the clock; no role of the platform can)
        conn.execute(sa.text("UPDATE governance.release_transitions SET at = at - interval '4 days'"
                             " WHERE release_id = :r"), {"r": rid})
    with engine.begin() as conn:
        assert rid in governance.purge_expired_staging(conn)
    assert staged(engine, rid) == [0, 0, 0]
    assert q(engine, "SELECT count(*) FROM governance.audit_results WHERE release_id = :r", r=rid) == [(1,)]
    refused = cli("retention", bare_dataset, "-1", "--steward", "ada")
    assert refused.returncode != 0


def test_migration_014_converts_old_ledger_rows_honestly(engine, owner, bare_dataset):
    """The conversion of migration 014, run on rows in the old layout (in a transaction rolled back): per-record
    ε-DP with a recorded cap → ε x cap per object; per-object Pufferfish as it is; heuristic → no ε; per-record
    ε-DP without a cap and per-trajectory ε-LDP → unconvertible."""
    from trajpub.config import SQL_DIR

    sql = (SQL_DIR / "014_unit_of_protection.sql").read_text()
    start = sql.index("UPDATE governance.budget_ledger l SET")
    update = sql[start:sql.index(";", start)]
    old = [("epsilon-DP", 1.0, 7, 1.0), ("epsilon-DP", 1.0, None, 1.0), ("epsilon-LDP", 10.0, None, 10.0),
           ("epsilon-Pufferfish (analytic, data-dependent)", 2.0, None, 2.0), ("heuristic", 0.0, None, None)]
    with engine.begin() as conn:  # releases as they were recorded then, with their own guarantee
        rids = [governance.create_release(conn, {"dataset": bare_dataset, "mechanism": "m", "requested_by": "r",
                                                 "window_start": None, "window_end": None}, {},
                                          {"model": model, "epsilon": stated}) for model, _, _, stated in old]
    with owner.connect() as conn, conn.begin() as tx:
        conn.execute(sa.text("ALTER TABLE governance.budget_ledger ALTER COLUMN account DROP NOT NULL,"
                             " ALTER COLUMN unit DROP NOT NULL, ALTER COLUMN conversion DROP NOT NULL"))
        conn.execute(sa.text("ALTER TABLE governance.budget_ledger DISABLE TRIGGER ledger_append_only"))
        # the rows of then predate migration 026's checks of a row's unit and figures
        conn.execute(sa.text("ALTER TABLE governance.budget_ledger DISABLE TRIGGER ledger_release_check,"
                             " DROP CONSTRAINT budget_ledger_figures_check"))
        for rid, (_, eps, k, _) in zip(rids, old, strict=True):
            conn.execute(sa.text("INSERT INTO governance.budget_ledger (dataset, release_id, mechanism, epsilon,"
                                 " privacy_unit, max_records_per_object) VALUES (:d, :r, 'm', :e, 'one trajectory"
                                 " record', :k)"), {"d": bare_dataset, "r": rid, "e": eps, "k": k})
        conn.execute(sa.text(update))
        rows = conn.execute(sa.text("SELECT account, unit_epsilon, conversion FROM governance.budget_ledger"
                                    " WHERE release_id = ANY(:r) ORDER BY release_id"), {"r": rids}).all()
        acc = governance.accounts(conn, bare_dataset)
        tx.rollback()
    assert [(a, e) for a, e, _ in rows] == [("epsilon-DP", 7.0), ("epsilon-DP", None), ("epsilon-LDP", None),
                                            ("Pufferfish", 2.0), ("heuristic", None)]
    assert [c.split(":")[0] for _, _, c in rows] == ["migrated", "unconvertible", "unconvertible", "migrated",
                                                     "migrated"]
    assert acc["epsilon-DP"].unconvertible == (rids[1],) and acc["epsilon-DP"].spent == 7.0
    with engine.connect() as conn:  # rolled back: nothing of it is left
        assert governance.accounts(conn, bare_dataset)["epsilon-DP"].releases == 0
