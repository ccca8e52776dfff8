"""The PostGIS connection, the numbered migrations in ``sql/`` and the repeatable views file ``sql/views.sql``."""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import TypeVar

import psycopg
import sqlalchemy as sa

from trajpub import config
from trajpub.errors import PolicyError, TrajpubError, one_line

T = TypeVar("T")
MIGRATION_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
MIGRATION_LOCK = 7_420_001  # advisory lock id: one migrator at a time
VIEWS_FILE = "views.sql"
"""The repeatable file in ``sql/``: the current definition of every view (docs/design.md, "Data model")."""


def database_url(login: str = config.PIPELINE) -> str:
    """The database URL for ``login`` (the pipeline role unless said otherwise): from the Prefect Secret block
    named by ``TRAJPUB_DATABASE_SECRET`` when set, else ``TRAJPUB_DATABASE_URL``, else the project's local cluster
    with the login's generated password. Credentials never go to logs, artifacts or lineage (lineage names the
    server by host and port only)."""
    block = os.environ.get("TRAJPUB_DATABASE_SECRET")
    if block:
        from prefect.blocks.system import Secret

        try:
            return Secret.load(block).get()
        except ValueError as exc:
            raise TrajpubError(f"cannot read the database URL from the Prefect Secret block '{block}': {exc}",
                               "TRAJPUB_DATABASE_SECRET") from None
    return config.database_url(login)


@lru_cache(maxsize=8)
def engine(url: str | None = None) -> sa.Engine:
    """A pooled engine for the trajpub database (one per URL per process), as the pipeline role by default."""
    return sa.create_engine(url or database_url(), pool_pre_ping=True, future=True)


def owner_engine() -> sa.Engine:
    """The superuser's engine: migrations and role management only."""
    return engine(database_url(config.OWNER))


def auditor_engine() -> sa.Engine:
    """The auditor's engine: the audit's evidence and its attestation (sql/036), never the pipeline's login."""
    return engine(config.database_url(config.AUDITOR))


def steward_engine(login: str) -> sa.Engine:
    """The engine of the steward ``login``: the database records this login with every decision."""
    return engine(database_url(login))


def lock_key(name: str) -> int:
    """A 64-bit advisory-lock key for a name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def dataset_lock_key(dataset: str) -> int:
    """The advisory-lock key of one dataset: a load into it and a snapshot of it exclude each other (so no point
    id below a snapshot's pin commits after it), while loads into other datasets go on."""
    return lock_key(f"trajpub.dataset.{dataset}")


def release_lock_key(dataset: str) -> int:
    """The advisory-lock key that lets one release of a dataset compute at a time (distinct from
    :func:`dataset_lock_key`, so loads and snapshots are not held up by a running release)."""
    return lock_key(f"trajpub.dataset.release:{dataset}")


def alive_lock_key(flow_run_id: str) -> int:
    """The advisory-lock key a release's flow process holds while it runs (from before it records the release
    until it ends): free means the process is gone."""
    return lock_key(f"trajpub.flow-run-alive.{flow_run_id}")


class LockTimeout(Exception):
    """A session lock was not free within its timeout."""


@contextmanager
def session_lock(eng: sa.Engine, key: int, timeout_s: float = 0.0, poll_s: float = 1.0,
                 on_wait=lambda: None) -> Iterator[None]:
    """Hold a session advisory lock on a connection of its own, so that a crashed process (or a lost
    connection) frees it at once. Polls up to ``timeout_s`` (calling ``on_wait`` once), then raises
    :class:`LockTimeout`."""
    with eng.connect() as conn:
        deadline = time.monotonic() + timeout_s
        waited = False
        while not conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
            conn.commit()
            if time.monotonic() >= deadline:
                raise LockTimeout(key)
            if not waited:
                on_wait()
                waited = True
            time.sleep(poll_s)
        conn.commit()
        try:
            yield
        finally:
            try:
                conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                conn.commit()
            except sa.exc.DBAPIError:  # the connection is gone, and the lock with it
                pass


def lock_is_held(conn: sa.Connection, key: int) -> bool:
    """Whether some other session holds the advisory lock ``key`` (checked by trying it)."""
    free = conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar()
    if free:
        conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
    return not free


@contextmanager
def release_slot(eng: sa.Engine, dataset: str, timeout_s: float, poll_s: float = 1.0,
                 say=lambda message: None) -> Iterator[None]:
    """Hold the dataset's release slot (one release of a dataset computes at a time). Waits up to ``timeout_s``,
    then fails saying which releases of the dataset are running."""
    key = release_lock_key(dataset)
    try:
        with session_lock(eng, key, timeout_s, poll_s, on_wait=lambda: say(
                f"waiting for the running release of dataset '{dataset}' to finish its computation")):
            yield
    except LockTimeout as exc:
        if exc.args != (key,):
            raise
        with eng.connect() as conn:
            running = conn.execute(sa.text(
                "SELECT string_agg(release_id::text, ', ' ORDER BY release_id) FROM governance.releases"
                " WHERE dataset = :d AND status IN ('planned', 'validated', 'protected', 'audited')"),
                {"d": dataset}).scalar()
        raise PolicyError(f"another release of dataset '{dataset}' (release {running or '?'}) is running; "
                          f"waited {timeout_s:g} s", "queue_timeout_s") from None


TRANSIENT_SQLSTATES = {
    "40001",  # serialization_failure
    "40P01",  # deadlock_detected
    "55P03",  # lock_not_available
    "57P01",  # admin_shutdown (the server is stopping)
    "57P02",  # crash_shutdown
    "57P03",  # cannot_connect_now (the server is starting)
}


def is_transient(exc: BaseException) -> bool:
    """A database error worth retrying: a lost or refused connection, a server restart, a serialization failure
    or deadlock. Errors in the statement or the data (syntax, constraint, permission) are permanent."""
    if isinstance(exc, sa.exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        exc = exc.orig
    if isinstance(exc, psycopg.OperationalError) and not isinstance(exc, psycopg.errors.QueryCanceled):
        return True  # connection refused / terminated, server shutting down or starting
    return getattr(exc, "sqlstate", None) in TRANSIENT_SQLSTATES


def retries() -> int:
    """How often a transaction is retried after a transient database error: ``TRAJPUB_DB_RETRIES`` (default 5,
    after 0.5, 1, 2, 4 and 8 s: about 15 s in all, long enough for a server restart); 0 fails at the first."""
    value = os.environ.get("TRAJPUB_DB_RETRIES", "5")
    if not value.isdigit():
        raise TrajpubError(f"TRAJPUB_DB_RETRIES must be a whole number of retries, not {value!r}",
                           "TRAJPUB_DB_RETRIES")
    return int(value)


def with_retries(fn: Callable[[], T], what: str, attempts: int | None = None, first_delay_s: float = 0.5,
                 say=lambda message: None) -> T:
    """``fn()``, retried with exponential backoff (0.5, 1, 2, 4, 8 s) while it fails with a transient database
    error, at most ``attempts`` times in all (default: once and :func:`retries` more); a permanent error, or the
    last transient one, is raised at once. ``fn`` must be one transaction (it either committed or left nothing)."""
    attempts = 1 + retries() if attempts is None else attempts
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts or not is_transient(exc):
                raise
            delay = first_delay_s * 2 ** (attempt - 1)
            say(f"{what}: transient database error ({type(exc).__name__}); retry {attempt} in {delay:g} s")
            time.sleep(delay)
    raise AssertionError("unreachable")


def transaction(body: Callable[[sa.Connection], T], what: str, eng: sa.Engine | None = None,
                say=lambda message: None) -> T:
    """``body(conn)`` in one transaction, the whole transaction retried on transient errors
    (:func:`with_retries`)."""
    def attempt() -> T:
        with (eng or engine()).begin() as conn:
            return body(conn)

    return with_retries(attempt, what, say=say)


def copy_rows(conn: sa.Connection, statement: str, rows: Iterable[tuple]) -> None:
    """``COPY ... FROM STDIN`` of ``rows`` on the connection's psycopg connection (inside its transaction)."""
    raw = conn.connection.dbapi_connection
    assert isinstance(raw, psycopg.Connection)
    with raw.cursor() as cur, cur.copy(statement) as cp:
        for row in rows:
            cp.write_row(row)


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every numbered migration file, in order."""
    found = []
    for path in sorted(config.SQL_DIR.glob("*.sql")):
        if path.name == VIEWS_FILE:
            continue
        m = MIGRATION_NAME.match(path.name)
        if not m:
            raise TrajpubError("migration file names must look like 001_name.sql", f"file {path}")
        found.append((int(m.group(1)), path.name, path.read_text()))
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise TrajpubError("two migration files share a version number", f"folder {config.SQL_DIR}")
    return found


def migrate(eng: sa.Engine | None = None) -> list[str]:
    """Apply the migrations not yet recorded in ``governance.schema_migrations``, then :data:`VIEWS_FILE` when it
    changed or a migration was applied; return the names of the files applied.

    Each file runs in its own transaction together with its record (version row, or the views file's digest in
    ``governance.repeatable_migrations``), so a failing file leaves nothing half-applied.
    """
    eng = eng or engine()
    applied_now = []
    with eng.connect() as conn:
        conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK})
        conn.commit()  # the session-level lock outlives the transaction
        try:
            with conn.begin():
                conn.execute(sa.text("CREATE SCHEMA IF NOT EXISTS governance"))
                conn.execute(sa.text(
                    "CREATE TABLE IF NOT EXISTS governance.schema_migrations ("
                    " version int PRIMARY KEY, name text NOT NULL, sha256 text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"))
                conn.execute(sa.text(
                    "CREATE TABLE IF NOT EXISTS governance.repeatable_migrations ("
                    " name text PRIMARY KEY, sha256 text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"))
            done = {v: sha for v, sha in conn.execute(
                sa.text("SELECT version, sha256 FROM governance.schema_migrations"))}
            conn.commit()
            for version, name, sql in migrations():
                digest = hashlib.sha256(sql.encode()).hexdigest()
                if version in done:
                    if done[version] != digest:
                        raise TrajpubError("an applied migration was edited; add a new migration instead",
                                           f"file sql/{name}")
                    continue
                with conn.begin():
                    _run_script(conn, sql, name)
                    conn.execute(sa.text("INSERT INTO governance.schema_migrations (version, name, sha256) "
                                         "VALUES (:v, :n, :s)"), {"v": version, "n": name, "s": digest})
                applied_now.append(name)
            if apply_views(conn, force=bool(applied_now)):
                applied_now.append(VIEWS_FILE)
        finally:
            conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK})
            conn.commit()
    return applied_now


def apply_views(conn: sa.Connection, force: bool) -> bool:
    """Run :data:`VIEWS_FILE` in one transaction when its digest differs from the recorded one (or ``force``: a
    numbered migration just ran and may have dropped a view with a table); return whether it ran."""
    sql = (config.SQL_DIR / VIEWS_FILE).read_text()
    digest = hashlib.sha256(sql.encode()).hexdigest()
    recorded = conn.execute(sa.text("SELECT sha256 FROM governance.repeatable_migrations WHERE name = :n"),
                            {"n": VIEWS_FILE}).scalar()
    conn.commit()
    if recorded == digest and not force:
        return False
    with conn.begin():
        _run_script(conn, sql, VIEWS_FILE)
        conn.execute(sa.text("INSERT INTO governance.repeatable_migrations (name, sha256) VALUES (:n, :s) "
                             "ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, applied_at = now()"),
                     {"n": VIEWS_FILE, "s": digest})
    return True


def _run_script(conn: sa.Connection, sql: str, name: str) -> None:
    """The SQL file ``name``, in the connection's transaction, on the driver's cursor without parameters ('%' in
    plpgsql must not be read as a placeholder); the server's refusal becomes one sentence naming the file."""
    try:
        conn.connection.dbapi_connection.cursor().execute(sql)
    except psycopg.Error as exc:
        raise TrajpubError(f"the file failed and nothing of it was applied: {one_line(exc)}",
                           f"file sql/{name}") from None


def status(eng: sa.Engine | None = None) -> dict:
    """Server version, PostGIS version and the applied migrations."""
    eng = eng or engine()
    with eng.connect() as conn:
        out = {"server": conn.execute(sa.text("SHOW server_version")).scalar_one()}
        out["postgis"] = conn.execute(sa.text(
            "SELECT extversion FROM pg_extension WHERE extname = 'postgis'")).scalar()
        has_table = conn.execute(sa.text("SELECT to_regclass('governance.schema_migrations')")).scalar()
        out["migrations"] = [r[0] for r in conn.execute(sa.text(
            "SELECT name FROM governance.schema_migrations ORDER BY version"))] if has_table else []
    return out
