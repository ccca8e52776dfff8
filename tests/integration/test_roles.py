"""On the real database: every connection authenticates, each role can do its part and
no more, and a steward is the login the connection authenticated, not a name typed in."""

from __future__ import annotations

import stat
import uuid

import psycopg
import pytest
import sqlalchemy as sa

from flows import services
from tasks import governance, logins
from tasks.db import database_url
from tests.integration.conftest import cli, new_release, to_awaiting_approval
from trajpub import config
from trajpub.errors import PolicyError

pytestmark = pytest.mark.integration


def connect(user: str, password: str | None) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=config.PG_PORT, user=user, password=password,
                           dbname=config.PG_DATABASE, connect_timeout=10)


# --- finding 3: roles were nominal (trust for every local connection, the app as superuser) -------------------
@pytest.mark.parametrize("user", ["postgres", "trajpub_pipeline", "trajpub_consumer", "alice"])
def test_no_login_without_its_password(engine, user):
    for password in (None, "wrong"):
        with pytest.raises(psycopg.OperationalError, match="password"):
            connect(user, password).close()


def test_every_connection_needs_a_password_and_the_passwords_are_the_local_users_only(engine):
    rules = [line.split() for line in services.HBA.splitlines() if line and not line.startswith("#")]
    assert rules and all(rule[-1] in ("scram-sha-256", "reject") for rule in rules)
    with logins.owner_connection(services._credentials()) as conn:
        hba = conn.execute("SELECT type, auth_method, error FROM pg_hba_file_rules").fetchall()
        assert hba and all(method in ("scram-sha-256", "reject") and error is None for _, method, error in hba), hba
        assert conn.execute("SELECT count(*) FROM pg_authid WHERE rolcanlogin AND (rolpassword IS NULL OR "
                            "rolpassword NOT LIKE 'SCRAM-SHA-256$%')").fetchone() == (0,)
    assert stat.S_IMODE(config.CREDENTIALS_FILE.stat().st_mode) == 0o600


def test_the_prefect_server_keeps_its_state_in_its_own_database_which_no_other_login_reaches(engine, stewards):
    """The local Prefect server's state is in the cluster's ``prefect`` database: a flow made through its API is a
    row there, read as the server's own login. No login but that one and the superuser reaches that database, and
    that login reaches no other."""
    from prefect.client.orchestration import get_client

    name = f"store-probe-{uuid.uuid4().hex[:12]}"
    with get_client(sync_client=True) as client:
        client.create_flow_from_name(name)
    credentials = services._credentials()
    prefect_login = config.PREFECT_LOGIN
    with psycopg.connect(host="127.0.0.1", port=config.PG_PORT, user=prefect_login,
                         password=credentials[prefect_login], dbname=config.PREFECT_DATABASE) as conn:
        assert conn.execute("SELECT count(*) FROM flow WHERE name = %s", (name,)).fetchone() == (1,)
    for user in (config.PIPELINE, config.CONSUMER, *stewards):
        with pytest.raises(psycopg.OperationalError, match="pg_hba.conf rejects"):
            psycopg.connect(host="127.0.0.1", port=config.PG_PORT, user=user, password=credentials[user],
                            dbname=config.PREFECT_DATABASE, connect_timeout=10).close()
    with pytest.raises(psycopg.OperationalError, match="pg_hba.conf rejects"):
        connect(prefect_login, credentials[prefect_login]).close()


def test_the_flow_connects_as_the_pipeline_role_not_a_superuser(engine):
    with engine.connect() as conn:
        who, superuser, creates_roles = conn.execute(sa.text(
            "SELECT session_user, rolsuper, rolcreaterole FROM pg_roles WHERE rolname = session_user")).one()
    assert (who, superuser, creates_roles) == ("trajpub_pipeline", False, False)
    consumer = sa.create_engine(database_url("trajpub_consumer"))
    with consumer.connect() as conn, pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
        conn.execute(sa.text("SELECT count(*) FROM raw.points"))


# --- finding 4: the pipeline role could change governance ------------------------------------------------------
@pytest.fixture
def dataset(engine, dataset_name):
    with engine.begin() as conn:  # as the pipeline loads it: default caps
        conn.execute(sa.text("INSERT INTO raw.datasets (dataset) VALUES (:d)"), {"d": dataset_name})
        conn.execute(sa.text("INSERT INTO governance.datasets (dataset) VALUES (:d)"), {"d": dataset_name})
    return dataset_name


def refused(eng: sa.Engine, sql: str, match: str, **params) -> None:
    with eng.begin() as conn, pytest.raises(sa.exc.DBAPIError, match=match):
        conn.execute(sa.text(sql), params)


@pytest.mark.parametrize("sql", [
    "UPDATE governance.datasets SET epsilon_cap = 1e9 WHERE dataset = :d",
    "UPDATE governance.datasets SET delta_cap = 0.5 WHERE dataset = :d",
    "UPDATE governance.datasets SET four_eyes = false WHERE dataset = :d",
    "INSERT INTO governance.datasets (dataset, epsilon_cap) VALUES (:d || '_x', 1e9)",
])
def test_the_pipeline_cannot_loosen_a_datasets_policy(engine, stewards, dataset, sql):
    refused(engine, sql, "permission denied", d=dataset)
    with stewards["ada"].begin() as conn:  # a steward can
        assert conn.execute(sa.text("UPDATE governance.datasets SET four_eyes = true, epsilon_cap = 3 "
                                    "WHERE dataset = :d"), {"d": dataset}).rowcount == 1


def test_the_pipeline_cannot_rewrite_the_requester_or_move_a_release_backwards(engine, owner, stewards, dataset):
    rid = new_release(engine, dataset, requested_by="alice")
    refused(engine, "UPDATE governance.releases SET requested_by = 'nobody' WHERE release_id = :r",
            "permission denied", r=rid)
    refused(owner, "UPDATE governance.releases SET requested_by = 'nobody' WHERE release_id = :r",
            "cannot change", r=rid)  # the owner neither (short of disabling triggers)
    to_awaiting_approval(engine, rid)
    refused(engine, "UPDATE governance.releases SET status = 'approved' WHERE release_id = :r",
            "only by a steward's decision", r=rid)
    with stewards["bob"].begin() as conn:
        governance.decide(conn, rid, "rejected", "too coarse")
    for eng in (engine, owner):
        refused(eng, "UPDATE governance.releases SET status = 'awaiting_approval' WHERE release_id = :r",
                "is 'rejected' and cannot become 'awaiting_approval'", r=rid)
    refused(engine, "INSERT INTO governance.releases (dataset, mechanism, params, spec, requested_by, status) "
                    "VALUES (:d, 'm', '{}', '{}', 'x', 'approved')", "starts planned", d=dataset)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT status, requested_by FROM governance.releases WHERE release_id = :r"),
                            {"r": rid}).one() == ("rejected", "alice")


def test_the_database_refuses_a_charge_over_the_cap_whatever_the_client(engine, dataset):
    """The cap holds for a client that skips the application's check: the ledger's trigger refuses."""
    first, second = new_release(engine, dataset), new_release(engine, dataset)
    insert = ("INSERT INTO governance.budget_ledger (dataset, release_id, mechanism, epsilon, privacy_unit, account,"
              " unit, unit_epsilon, unit_delta, conversion) VALUES (:d, :r, 'm', :e, 'one object', 'epsilon-DP',"
              " 'object', :e, 0, 'as stated')")
    with engine.begin() as conn:
        conn.execute(sa.text(insert), {"d": dataset, "r": first, "e": 9.5})  # the default cap is 10
    refused(engine, insert, "needs epsilon-DP epsilon 1 per object but dataset '.*' has only 0.5 of its cap 10 left",
            d=dataset, r=second, e=1.0)


# --- finding 5: four-eyes bypassed by case; the steward was a free-text name ---------------------------------
@pytest.mark.parametrize("requested_by", ["alice", "Alice", "\uff21\uff2c\uff29\uff23\uff25"])  # fullwidth: NFKC
def test_four_eyes_compares_the_authenticated_login(engine, stewards, dataset, requested_by):
    rid = new_release(engine, dataset, requested_by=requested_by)
    to_awaiting_approval(engine, rid)
    assert cli("four-eyes", dataset, "on", "--steward", "ada").returncode == 0
    with stewards["alice"].begin() as conn, pytest.raises(PolicyError, match="four-eyes policy: alice"):
        governance.decide(conn, rid, "approved", None)
    out = cli("approve", str(rid), "--steward", "alice", "--wait", "1")
    assert out.returncode == 1 and "four-eyes" in out.stderr, out.stderr
    # a name is not an identity: "Alice" has no login (no password), so it cannot approve at all
    out = cli("approve", str(rid), "--steward", "Alice", "--wait", "1")
    assert out.returncode == 1 and "no password for the login 'Alice'" in out.stderr, out.stderr
    with stewards["bob"].begin() as conn:
        assert governance.decide(conn, rid, "approved", None) == "bob"
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT steward FROM governance.approvals WHERE release_id = :r"),
                            {"r": rid}).scalar() == "bob"


def test_a_decision_code_carries_the_issuing_login_once(engine, stewards, dataset):
    """The Prefect UI form's path: the flow (pipeline role) presents a code; the approval names the steward who
    issued it, four-eyes applies to that login, and a code works once, for its release only: any presentation
    spends it, accepted or not (sql/027)."""
    rid, other = new_release(engine, dataset, requested_by="alice"), new_release(engine, dataset)
    for r in (rid, other):
        to_awaiting_approval(engine, r)
    assert cli("four-eyes", dataset, "on", "--steward", "ada").returncode == 0

    def code_of(login: str) -> str:
        with stewards[login].begin() as conn:
            return governance.issue_decision_code(conn, rid, "approved")

    alices = code_of("alice")
    with pytest.raises(PolicyError, match="four-eyes policy: alice"):
        governance.decide_by_code(engine, rid, "approved", None, alices)
    bobs = code_of("bob")
    for wrong_code, release in (("0" * 32, rid), (bobs, other), (bobs, rid)):  # bob's spent by the 2nd
        with pytest.raises(PolicyError, match="not valid for release"):
            governance.decide_by_code(engine, release, "approved", None, wrong_code)
    bobs = code_of("bob")
    with pytest.raises(PolicyError, match="issued to approved, not to rejected"):  # the code binds the decision
        governance.decide_by_code(engine, rid, "rejected", "swapped", bobs)
    bobs = code_of("bob")
    assert governance.decide_by_code(engine, rid, "approved", None, bobs) == "bob"
    with pytest.raises(PolicyError, match="not valid for release"):
        governance.decide_by_code(engine, rid, "approved", None, bobs)  # used
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT decision, steward FROM governance.approvals WHERE release_id = :r"),
                            {"r": rid}).one() == ("approved", "bob")
        with pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
            conn.execute(sa.text("SELECT * FROM governance.decision_codes"))


def test_steward_logins_are_checked_names(engine):
    for bad in ("Alice", "postgres", "trajpub_pipeline", "a b", "x'; DROP ROLE alice; --"):
        out = cli("steward", "add", bad)
        assert out.returncode == 1 and out.stderr.startswith("error: a steward's login"), (bad, out.stderr)


def test_the_flow_refuses_a_wrong_code_and_waits_for_a_right_one(engine, loaded_tdrive, tmp_path):
    """The form's answer as the Prefect UI sends it (resume with run input): a wrong code leaves the release
    awaiting approval and the flow paused again; the issued code publishes it under the issuing login."""
    from prefect.client.orchestration import get_client
    from prefect.flow_runs import resume_flow_run

    from tests.integration.conftest import base_spec, start_release, wait_for_status, wait_until

    def paused(flow_run_id) -> bool:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(flow_run_id).state
        return bool(state and state.is_paused())

    run = start_release(base_spec(loaded_tdrive("code"), approval_timeout_s=300), tmp_path)
    try:
        wait_for_status(engine, run, {"awaiting_approval"})
        with engine.connect() as conn:
            flow_run_id = conn.execute(sa.text("SELECT flow_run_id FROM governance.releases WHERE release_id = :r"),
                                       {"r": run.release_id}).scalar()
        wait_until(lambda: paused(flow_run_id), 60, "the flow to pause")
        answer = {"release_id": run.release_id, "decision": "approve", "comment": "ok"}
        resume_flow_run(flow_run_id, run_input={**answer, "decision_code": "not-a-code"})
        wait_until(lambda: "the decision was refused" in run.output() and paused(flow_run_id), 60,
                   "the flow to refuse the code and pause again")
        assert wait_for_status(engine, run, {"awaiting_approval"}) == "awaiting_approval"
        issued = cli("steward", "code", str(run.release_id), "--steward", "alice", "--decision", "approve",
                     "--comment", "ok")
        assert issued.returncode == 0, issued.stderr
        resume_flow_run(flow_run_id, run_input={**answer, "decision_code": issued.stdout.strip()})
        assert run.proc.wait(timeout=180) == 0, run.output()[-3000:]
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT r.status, a.steward FROM governance.releases r JOIN "
                                        "governance.approvals a USING (release_id) WHERE release_id = :r"),
                                {"r": run.release_id}).one() == ("published", "alice")
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
