"""Four-eyes by lookalike names, tried as the roles that would try it (docs/design.md, "Identities"): a steward login
that only looks different from the requester's name, a requester's name that only looks different from a
steward's login, and a requested_by that is not a person at all. Each is refused by the database, whatever the
client, and by the command line before a flow run exists."""

from __future__ import annotations

import re
import secrets

import pytest
import sqlalchemy as sa
import yaml
from psycopg import sql
from sqlalchemy.engine import URL

from tasks import governance
from tests.integration.conftest import base_spec, cli, new_release, to_awaiting_approval
from trajpub import config
from trajpub.errors import PolicyError

pytestmark = pytest.mark.integration

# Lookalikes of "alice": what the issue found passing four-eyes, and their kin. Two are alice herself after NFKC
# and case folding (fullwidth, upper case); the others are not identities at all.
LOOKALIKES = {
    "zero-width space": "alice\u200b",
    "zero-width joiner inside": "al\u200dice",
    "soft hyphen": "alice\u00ad",
    "no-break space": "alice\u00a0",
    "tab": "alice\t",
    "Cyrillic a": "\u0430lice",
    "Cyrillic e": "alic\u0435",
    "combining acute accent": "alice\u0301",
    "fullwidth a": "\uff41lice",
    "upper case": "ALICE",
}


@pytest.fixture
def dataset(engine, stewards, dataset_name):
    """A dataset under four-eyes (set by the steward ada) with one release requested by alice, awaiting
    approval."""
    with engine.begin() as conn:  # as the pipeline loads it: default caps
        conn.execute(sa.text("INSERT INTO raw.datasets (dataset) VALUES (:d)"), {"d": dataset_name})
        conn.execute(sa.text("INSERT INTO governance.datasets (dataset) VALUES (:d)"), {"d": dataset_name})
    with stewards["ada"].begin() as conn:
        governance.set_dataset_policy(conn, dataset_name, four_eyes=True)
    return dataset_name


@pytest.fixture(scope="module")
def lookalike_logins(owner):
    """A steward login for each lookalike, made as an external server's operator could make it (``CREATE ROLE
    ... IN ROLE trajpub_steward``; ``trajpub steward add`` refuses these names), as engines that log in with
    their password."""
    password = secrets.token_urlsafe(16)
    with owner.begin() as conn:  # the owner's pooled connection keeps its transactions (no autocommit)
        raw = conn.connection.dbapi_connection
        for login in LOOKALIKES.values():
            exists = raw.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (login,)).fetchone()
            raw.execute(sql.SQL("{} ROLE {} LOGIN PASSWORD {}").format(
                sql.SQL("ALTER" if exists else "CREATE"), sql.Identifier(login), sql.Literal(password)))
            raw.execute(sql.SQL("GRANT trajpub_steward TO {}").format(sql.Identifier(login)))
    engines = {name: sa.create_engine(URL.create(
        "postgresql+psycopg", username=login, password=password, host="127.0.0.1", port=config.PG_PORT,
        database=config.PG_DATABASE), poolclass=sa.pool.NullPool) for name, login in LOOKALIKES.items()}
    yield engines
    with owner.begin() as conn:
        raw = conn.connection.dbapi_connection
        for login in LOOKALIKES.values():
            raw.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(login)))


def status(engine: sa.Engine, release_id: int) -> str:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT status FROM governance.releases WHERE release_id = :r"),
                            {"r": release_id}).scalar_one()


@pytest.mark.parametrize("lookalike", list(LOOKALIKES))
def test_a_lookalike_of_the_requesters_name_cannot_approve_under_four_eyes(engine, dataset, lookalike_logins,
                                                                             lookalike):
    rid = new_release(engine, dataset, requested_by="alice")
    to_awaiting_approval(engine, rid)
    with lookalike_logins[lookalike].connect() as conn:  # the lookalike login really authenticated
        assert conn.execute(sa.text("SELECT session_user")).scalar_one() == LOOKALIKES[lookalike]
    with lookalike_logins[lookalike].begin() as conn, pytest.raises(PolicyError) as refusal:
        governance.decide(conn, rid, "approved", None)
    assert ("four-eyes policy: alice requested release" in refusal.value.message
            or "the deciding login has U+" in refusal.value.message), refusal.value.message
    assert status(engine, rid) == "awaiting_approval"
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM governance.approvals WHERE release_id = :r"),
                            {"r": rid}).scalar_one() == 0


@pytest.mark.parametrize("lookalike", [k for k in LOOKALIKES if k not in ("fullwidth a", "upper case")])
def test_a_lookalike_of_a_stewards_login_cannot_be_recorded_as_the_requester(engine, dataset, lookalike):
    """The other way round: alice asks under a name that only looks different from her login, to approve her
    own release. The database refuses to record it, for the pipeline role as for any client."""
    with pytest.raises(PolicyError, match=r"requested_by has U\+[0-9A-F]{4} at position \d+"):
        new_release(engine, dataset, requested_by=LOOKALIKES[lookalike])


@pytest.mark.parametrize("lookalike", ["fullwidth a", "upper case"])
def test_a_name_that_folds_to_a_stewards_login_is_that_steward(engine, stewards, dataset, lookalike):
    rid = new_release(engine, dataset, requested_by=LOOKALIKES[lookalike])
    to_awaiting_approval(engine, rid)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT requested_by FROM governance.releases WHERE release_id = :r"),
                            {"r": rid}).scalar_one() == "alice"
    with stewards["alice"].begin() as conn, pytest.raises(PolicyError, match="four-eyes policy: alice"):
        governance.decide(conn, rid, "approved", None)
    with stewards["bob"].begin() as conn:
        assert governance.decide(conn, rid, "approved", None) == "bob"


@pytest.mark.parametrize("requested_by", ["mallory", "nobody.registered"])
def test_the_requester_must_be_a_registered_person(engine, dataset, requested_by):
    with pytest.raises(PolicyError, match=f"requested_by '{requested_by}' is neither a registered requester nor"):
        new_release(engine, dataset, requested_by=requested_by)
    with engine.begin() as conn, pytest.raises(sa.exc.DBAPIError, match="neither a registered requester"):
        conn.execute(sa.text("INSERT INTO governance.releases (dataset, mechanism, params, spec, requested_by) "
                             "VALUES (:d, 'm', '{}', '{}', :who)"), {"d": dataset, "who": requested_by})


@pytest.mark.parametrize(("requested_by", "message"), [
    ("alice\u200b", r"requested_by 'alice\\u200b' has U\+200B ZERO WIDTH SPACE \(an invisible format character\)"),
    ("\u0430lice", r"has U\+0430 CYRILLIC SMALL LETTER A \(a letter of another script or a symbol\) at position 1"),
    (["alice", "bob"], "requested_by must be one name .* not list"),
    (42, "requested_by must be one name .* not int"),
    ("mallory", "requested_by 'mallory' is neither a registered requester nor a steward's login"),
])
def test_a_spec_cannot_name_a_list_a_number_a_lookalike_or_an_unregistered_person(engine, dataset, tmp_path,
                                                                                  requested_by, message):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(base_spec(dataset, requested_by=requested_by), allow_unicode=True),
                    encoding="utf-8")
    out = cli("release", "run", "--wait", "--spec", str(spec))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert re.search(message, out.stderr), out.stderr
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM governance.releases WHERE dataset = :d"),
                            {"d": dataset}).scalar_one() == 0


def test_a_registered_requester_is_recorded_canonically(engine, dataset):
    out = cli("requester", "add", "\uff32\uff45\uff51\uff55\uff45\uff53\uff54\uff45\uff52")  # "Requester", fullwidth
    assert out.returncode == 0 and "requester requester" in out.stdout, out.stdout + out.stderr
    out = cli("requester", "add", "eve\u200b")
    assert out.returncode == 1 and "U+200B ZERO WIDTH SPACE" in out.stderr, out.stderr
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM governance.requesters WHERE name LIKE 'eve%'")).scalar() == 0


def test_the_database_and_python_agree_on_every_identity(engine):
    """One rule in two places (trajpub/identity.py, governance.identity_key): the same canonical form or the same
    refusal, for the lookalikes and for compatibility characters NFKC folds."""
    from trajpub.errors import ParameterError
    from trajpub.identity import canonical_identity

    names = [*LOOKALIKES.values(), "alice", "Demo-Engineer.2", "\u212aelvin", "\ufb01sh", "stra\u00dfe", "9lives",
             "a" * 63, "a" * 64, "", "x y", "\u0131stanbul", "\u0130stanbul", "caf\u00e9", "cafe\u0301"]
    with engine.connect() as conn:
        for name in names:
            try:
                expected = canonical_identity(name)
            except ParameterError:
                expected = None
            assert conn.execute(sa.text("SELECT governance.identity_key(:n)"), {"n": name}).scalar() == expected, \
                ascii(name)
