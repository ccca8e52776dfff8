"""Ways around governance in the database, each tried as the login that would try it (the pipeline's, a
steward's), and refused (docs/operations.md, "Security model"): publishing or unpublishing outside the
publisher's functions, a staged candidate changed after review, forged give-backs and charges, status moves
without their evidence, and a steward's SQL that the CLI would refuse."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tasks import governance, publish
from tests.integration.conftest import new_release, record_validation, to_awaiting_approval
from tests.integration.staged import SHAPES, approved_release, new_dataset
from tests.integration.test_roles import refused
from trajpub.errors import PolicyError
from trajpub.guarantee import Guarantee, PrivacyMap

pytestmark = pytest.mark.integration


def charge(engine: sa.Engine, release_id: int, dataset: str, epsilon: float) -> None:
    """The flow's reservation at plan: epsilon-DP per object."""
    with engine.begin() as conn:
        governance.charge_budget(conn, release_id, dataset, "m", Guarantee(
            model="epsilon-DP", privacy_unit="one object", statement="test", proven=True, epsilon=epsilon,
            privacy_map=PrivacyMap("epsilon-DP", "per_object")))


def published_relations(engine: sa.Engine, dataset: str) -> dict[str, int]:
    """The dataset's relations in ``published`` and their row counts."""
    with engine.connect() as conn:
        names = conn.execute(sa.text("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                                     " WHERE n.nspname = 'published' AND c.relkind IN ('r', 'v') AND c.relname LIKE :p ORDER BY 1"),
                             {"p": f"{dataset}%"}).scalars().all()
        return {n: conn.execute(sa.text(f'SELECT count(*) FROM published."{n}"')).scalar() for n in names}


# --- publishing: only the publisher's functions, which no login can act as ------------------------------------
def test_no_login_can_create_write_drop_or_grant_in_published(engine, owner, stewards):
    """The catalogue, for every login but the superuser: no CREATE on the schema, no privilege but SELECT (and no
    grant option) on any of its relations, no ownership, no membership of the publisher role."""
    dataset = new_dataset(engine)
    publish.publish(engine, approved_release(engine, dataset, "trajectories"), None)
    with owner.connect() as conn:
        logins = conn.execute(sa.text("SELECT rolname FROM pg_roles WHERE rolcanlogin AND NOT rolsuper")).scalars().all()
        assert {"trajpub_pipeline", "trajpub_consumer", *stewards} <= set(logins)
        relations = conn.execute(sa.text(
            "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'published' AND c.relkind IN ('r', 'v', 'm', 'p', 'f')")).scalars().all()
        assert any(f"{dataset}__r" in r for r in relations), relations
        rights = conn.execute(sa.text(
            "SELECT l.rolname, r.rel, pg_has_role(l.rolname, 'trajpub_publisher', 'MEMBER') AS publisher,"
            " has_schema_privilege(l.rolname, 'published', 'CREATE') AS creates,"
            " has_table_privilege(l.rolname, r.rel, 'INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')"
            "   AS writes,"
            " has_table_privilege(l.rolname, r.rel, 'SELECT WITH GRANT OPTION') AS grants,"
            " pg_has_role(l.rolname, c.relowner, 'MEMBER') AS owns"
            " FROM unnest(CAST(:logins AS text[])) AS l(rolname), unnest(CAST(:rels AS text[])) AS r(rel)"
            " JOIN pg_class c ON c.oid = CAST(r.rel AS regclass)"), {"logins": logins, "rels": relations}).all()
    assert rights and not [r for r in rights if any(r[2:])], [r for r in rights if any(r[2:])][:5]


def test_the_pipeline_cannot_publish_raw_data(engine):
    """As the pipeline: a table of raw points in ``published``, acting as the publisher, or a release marked
    published without the publisher's function, are all refused."""
    table = "raw_copy_" + new_dataset(engine)
    refused(engine, f"CREATE TABLE published.{table} AS SELECT * FROM raw.points LIMIT 1", "permission denied")
    refused(engine, "SET ROLE trajpub_publisher", "permission denied")
    rid = approved_release(engine, new_dataset(engine), "trajectories")
    refused(engine, "UPDATE governance.releases SET status = 'published' WHERE release_id = :r",
            "published only by governance.publish_release", r=rid)
    with engine.begin() as conn:
        conn.execute(sa.text("SELECT governance.publish_release(:r)"), {"r": rid})
        assert conn.execute(sa.text("SELECT status FROM governance.releases WHERE release_id = :r"),
                            {"r": rid}).scalar() == "published"
    assert published_relations(engine, table) == {}


def test_an_approved_release_publishes_exactly_its_staged_candidate(engine):
    """As the pipeline: once the release is protected its staged candidate cannot gain or lose rows, nor change
    its shape, so the publisher copies what the steward reviewed (the tiny candidate: 3 points of 2 trajectories),
    nothing else; and the function publishes only an approved release."""
    dataset = new_dataset(engine)
    waiting = new_release(engine, dataset)
    to_awaiting_approval(engine, waiting)
    refused(engine, "SELECT governance.publish_release(:r)", "only an approved release is published", r=waiting)
    rid = approved_release(engine, dataset, "trajectories")
    refused(engine, "DELETE FROM staging.candidate_points WHERE release_id = :r",
            "staged candidate is deleted only once it has ended", r=rid)
    refused(engine, "INSERT INTO staging.candidate_points (release_id, traj_id, seq, t, geom) SELECT :r,"
                    " 1000 + row_number() OVER (), 0, t, geom FROM raw.points LIMIT 5",
            "staged candidate is fixed once it is protected", r=rid)
    refused(engine, "UPDATE governance.releases SET summary = summary || CAST(:s AS jsonb) WHERE release_id = :r",
            "the shape of its staged candidate cannot change", s='{"shape": "fragments"}', r=rid)
    publish.publish(engine, rid, None)
    assert published_relations(engine, f"{dataset}__r{rid}") == {f"{dataset}__r{rid}": 3,
                                                                 f"{dataset}__r{rid}_traj": 2}


def test_a_steward_cannot_drop_or_write_a_published_table_nor_withdraw_around_the_function(engine, stewards):
    """As a steward: dropping, emptying, writing, re-granting a published table and recording a withdrawal
    without dropping anything are refused; the withdrawal function does the whole of it (and the pipeline cannot
    call it)."""
    dataset = new_dataset(engine)
    rid = approved_release(engine, dataset, "trajectories")
    publish.publish(engine, rid, None)
    table = f'published."{dataset}__r{rid}"'
    alice = stewards["alice"]
    refused(alice, f"DROP TABLE {table} CASCADE", "must be owner")
    refused(alice, f"TRUNCATE {table}", "permission denied")
    refused(alice, f"DELETE FROM {table}", "permission denied")
    refused(alice, f"INSERT INTO {table} (traj_id, seq, t, geom) VALUES (99, 0, now(),"
                   " ST_SetSRID(ST_MakePoint(116.3, 39.9), 4326))", "permission denied")
    refused(alice, f'CREATE TABLE published."{dataset}_x" (x int)', "permission denied")
    with alice.begin() as conn:  # a grant by a login without the grant option gives nothing
        conn.execute(sa.text(f"GRANT INSERT ON {table} TO trajpub_consumer"))
        assert not conn.execute(sa.text(f"SELECT has_table_privilege('trajpub_consumer', '{table}', 'INSERT')")).scalar()
    refused(alice, "SELECT governance.record_withdrawal(:r, 'no reason to keep the table', ARRAY[]::text[])",
            "permission denied", r=rid)
    refused(engine, "SELECT governance.withdraw_release(:r, 'the pipeline says so')", "permission denied", r=rid)
    assert published_relations(engine, f"{dataset}__r{rid}") == {f"{dataset}__r{rid}": 3,
                                                                 f"{dataset}__r{rid}_traj": 2}
    assert publish.withdraw(alice, rid, "wrong file") == [f"published.{dataset}__r{rid}",
                                                          f"published.{dataset}__r{rid}_traj"]
    assert published_relations(engine, dataset) == {}
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT r.status, w.steward FROM governance.releases r JOIN governance.withdrawals"
                                    " w USING (release_id) WHERE release_id = :r"), {"r": rid}).one() == \
            ("withdrawn", "alice")


# --- the ledger ------------------------------------------------------------------------------------------------
GIVE_BACK = ("INSERT INTO governance.budget_ledger (dataset, release_id, mechanism, epsilon, delta, privacy_unit,"
             " account, unit, unit_epsilon, unit_delta, conversion, entry_kind, reason) VALUES (:d, :r, 'm', :e, 0,"
             " 'one object', 'epsilon-DP', 'object', :ue, 0, 'forged', 'release', 'forged')")


def test_a_forged_give_back_cannot_reopen_an_exhausted_cap(engine, bare_dataset):
    """As the pipeline: a give-back row on another dataset's failed release (its charge's epsilon, a larger unit
    figure) would take this dataset's spent epsilon below its cap; refused, as is the same row in that release's
    own dataset (the unit figure is not its charge's), and the cap stays exhausted."""
    spent = new_release(engine, bare_dataset)
    charge(engine, spent, bare_dataset, 5.5)  # bare_dataset's whole cap
    other_dataset = new_dataset(engine)
    other = new_release(engine, other_dataset)
    charge(engine, other, other_dataset, 1.0)  # its mechanism never ran
    with engine.begin() as conn:
        governance.transition(conn, other, "failed", "test: planned and failed")
    refused(engine, GIVE_BACK, f"release {other} is of dataset '{other_dataset}': its ledger rows cannot be in "
                               f"dataset '{bare_dataset}'", d=bare_dataset, r=other, e=-1.0, ue=-5.5)
    refused(engine, GIVE_BACK, "cannot give its budget back", d=other_dataset, r=other, e=-1.0, ue=-5.5)
    late = new_release(engine, bare_dataset)
    with pytest.raises(PolicyError, match="has only 0 of its cap 5.5 left"):
        charge(engine, late, bare_dataset, 1.0)
    with engine.begin() as conn:  # the release's own give-back, as the flow writes it, is accepted
        assert governance.release_reservation(conn, other, "test: failed before its mechanism")


def test_a_give_back_is_refused_while_the_release_runs(engine, bare_dataset):
    """As the pipeline: giving back the reservation of a release that has not failed (its mechanism could still
    run, uncharged) is refused, even with the charge's exact figures."""
    rid = new_release(engine, bare_dataset)
    charge(engine, rid, bare_dataset, 2.0)
    refused(engine, GIVE_BACK, "cannot give its budget back", d=bare_dataset, r=rid, e=-2.0, ue=-2.0)


@pytest.mark.parametrize(("account", "unit_epsilon"), [
    ("epsilon-DP", None),  # an epsilon account without its figure: the cap trigger would not count it
    ("heuristic", 1.0),    # a figure where the account has none
])
def test_a_charge_has_its_unit_figure_exactly_when_its_account_has_one(engine, bare_dataset, account, unit_epsilon):
    """As the pipeline: an epsilon-DP charge of epsilon 100 with no unit figure (over the cap of 5.5 but not
    counted against it), or a heuristic one with a figure, is refused."""
    rid = new_release(engine, bare_dataset)
    refused(engine, "INSERT INTO governance.budget_ledger (dataset, release_id, mechanism, epsilon, privacy_unit,"
                    " account, unit, unit_epsilon, unit_delta, conversion) VALUES (:d, :r, 'm', 100, 'one object',"
                    " :a, 'object', :ue, 0, 'forged')", "budget_ledger_figures_check", d=bare_dataset, r=rid,
            a=account, ue=unit_epsilon)


def test_a_charge_is_in_its_releases_dataset(engine, bare_dataset):
    """As the pipeline: a release charged to another dataset's budget (plenty left there) would run on its own
    dataset uncharged; refused."""
    rid = new_release(engine, bare_dataset)
    elsewhere = new_dataset(engine)
    with pytest.raises(PolicyError, match=f"release {rid} is of dataset '{bare_dataset}'"):
        charge(engine, rid, elsewhere, 1.0)


# --- status moves need their evidence --------------------------------------------------------------------------
def test_a_fabricated_release_cannot_walk_to_awaiting_approval(engine, bare_dataset):
    """As the pipeline: validated without a validation result, audited with a staged candidate but no audit
    result, awaiting approval without a charge and a staged candidate: each refused (the forgery of the audit's
    evidence: tests/integration/test_evidence.py)."""
    def move(rid: int, status: str) -> None:
        with engine.begin() as conn:
            governance.transition(conn, rid, status)

    bare = new_release(engine, bare_dataset)
    with pytest.raises(PolicyError, match="cannot become validated: no validation result"):
        move(bare, "validated")
    unstaged = new_release(engine, bare_dataset)
    with engine.begin() as conn:
        record_validation(conn, unstaged)
    for status in ("validated", "protected", "audited"):  # audited: nothing staged, nothing to audit
        move(unstaged, status)
    with pytest.raises(PolicyError, match="cannot await approval: the ledger holds no charge for it"):
        move(unstaged, "awaiting_approval")
    unaudited = new_release(engine, bare_dataset)
    with engine.begin() as conn:
        record_validation(conn, unaudited)
        governance.transition(conn, unaudited, "validated")
        publish.stage(conn, unaudited, SHAPES["trajectories"]().check())
        governance.transition(conn, unaudited, "protected")
    with pytest.raises(PolicyError, match="cannot become audited: its staged candidate has no audit result"):
        move(unaudited, "audited")
    with engine.connect() as conn:
        assert [governance.get_release(conn, r)["status"] for r in (bare, unstaged, unaudited)] == \
            ["planned", "audited", "protected"]


# --- a steward's SQL holds to the CLI's rules ------------------------------------------------------------------
@pytest.mark.parametrize(("column", "value"), [
    ("epsilon_cap", "Infinity"), ("epsilon_cap", "NaN"), ("ldp_epsilon_cap", "Infinity"),
    ("pufferfish_epsilon_cap", "Infinity"),
])
def test_a_steward_cannot_set_a_cap_that_is_not_positive_and_finite(engine, stewards, bare_dataset, column, value):
    refused(stewards["ada"], f"UPDATE governance.datasets SET {column} = CAST(:v AS float8) WHERE dataset = :d",
            "check constraint", v=value, d=bare_dataset)
    with engine.connect() as conn:
        assert conn.execute(sa.text(f"SELECT {column} FROM governance.datasets WHERE dataset = :d"),
                            {"d": bare_dataset}).scalar() in (5.5, 10.0)


def test_a_steward_cannot_change_the_unit_under_charges(engine, stewards, bare_dataset):
    with stewards["ada"].begin() as conn:  # no charge yet: allowed, and back
        for unit in ("record", "object"):
            conn.execute(sa.text("UPDATE governance.datasets SET privacy_unit = :u WHERE dataset = :d"),
                         {"u": unit, "d": bare_dataset})
    charge(engine, new_release(engine, bare_dataset), bare_dataset, 1.0)
    refused(stewards["ada"], "UPDATE governance.datasets SET privacy_unit = 'record' WHERE dataset = :d",
            "already has 1 ledger entries in its unit; the unit cannot change under them", d=bare_dataset)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT privacy_unit FROM governance.datasets WHERE dataset = :d"),
                            {"d": bare_dataset}).scalar() == "object"
