"""The local cluster's database and logins, as its superuser: what ``trajpub db up``, ``steward add`` and
``requester add`` change (flows/services.py starts and stops the cluster)."""

from __future__ import annotations

import sqlalchemy as sa

from tasks.db import owner_engine, transaction
from trajpub import config
from trajpub.errors import TrajpubError


def owner_connection(credentials: dict[str, str]):
    """An autocommit psycopg connection of the superuser to the cluster's ``postgres`` database (roles and
    databases are cluster-wide; CREATE DATABASE cannot run in a transaction)."""
    import psycopg

    return psycopg.connect(host="127.0.0.1", port=config.PG_PORT, user=config.OWNER,
                           password=credentials[config.OWNER], dbname="postgres", autocommit=True)


def create_database_and_logins(credentials: dict[str, str], logins: tuple[str, ...]) -> None:
    """The database, and every login with its password (idempotent: passwords are set again each time, so a
    cluster from before passwords gets them); ``credentials`` other than ``logins`` are stewards."""
    import psycopg
    from psycopg import sql

    try:
        conn = owner_connection(credentials)
    except psycopg.OperationalError as exc:
        raise TrajpubError(f"the superuser cannot log in with the password in {config.CREDENTIALS_FILE} "
                           f"({str(exc).strip().splitlines()[-1]})", "trajpub db up") from None
    with conn:
        if not database_exists(conn, config.PG_DATABASE):
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(config.PG_DATABASE)))
        for login in logins:
            set_login(conn, login, credentials[login])
        if config.PREFECT_LOGIN in logins:
            create_prefect_database(conn, credentials)
        # the steward group: members are logins made by `trajpub steward add`
        if not role_exists(conn, "trajpub_steward"):
            conn.execute("CREATE ROLE trajpub_steward NOLOGIN")
        for login, password in credentials.items():
            if login not in logins:
                set_login(conn, login, password, group="trajpub_steward")


def database_exists(conn, database: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone() is not None


def create_prefect_database(conn, credentials: dict[str, str]) -> None:
    """The local Prefect server's database, owned by its login, closed to every other login (pg_hba.conf of
    flows/services.py lets that login reach only this database), with the pg_trgm extension Prefect's schema
    indexes names with (made here, as the superuser, before the server's first start)."""
    import psycopg
    from psycopg import sql

    name = sql.Identifier(config.PREFECT_DATABASE)
    if not database_exists(conn, config.PREFECT_DATABASE):
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(name, sql.Identifier(config.PREFECT_LOGIN)))
    conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(name))
    with psycopg.connect(host="127.0.0.1", port=config.PG_PORT, user=config.OWNER, password=credentials[config.OWNER],
                         dbname=config.PREFECT_DATABASE, autocommit=True) as prefect:
        prefect.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")


def role_exists(conn, role: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None


def set_login(conn, login: str, password: str, group: str | None = None) -> None:
    """Create ``login`` (or set its password again), SCRAM-hashed, in ``group`` if given."""
    from psycopg import sql

    verb = "ALTER" if role_exists(conn, login) else "CREATE"
    conn.execute(sql.SQL("SET password_encryption = 'scram-sha-256'"))
    conn.execute(sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(login), sql.Literal(password)))
    if group:
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(login)))


def register_requester(name: str) -> bool:
    """Register the canonical identity ``name`` in ``governance.requesters`` as the superuser; whether it was
    new. With an external database (TRAJPUB_DATABASE_URL), its operator does it: refused saying how."""
    if not config.uses_local_database():
        raise TrajpubError("TRAJPUB_DATABASE_URL is set: the external server's operator registers requesters "
                           f"(INSERT INTO governance.requesters (name) VALUES ('{name}'))", "requester add")
    return transaction(lambda conn: conn.execute(sa.text(
        "INSERT INTO governance.requesters (name) VALUES (:n) ON CONFLICT DO NOTHING"), {"n": name}).rowcount > 0,
        "register the requester", owner_engine())
