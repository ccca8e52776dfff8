"""The PostGIS connection and the numbered migrations in ``sql/``."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import sqlalchemy as sa

from trajpub import config
from trajpub.errors import PolicyError, TrajpubError

MIGRATION_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
MIGRATION_LOCK = 7_420_001  # advisory lock id: one migrator at a time


@lru_cache(maxsize=4)
def engine(url: str | None = None) -> sa.Engine:
    """A pooled engine for the trajpub database (one per URL per process)."""
    return sa.create_engine(url or config.database_url(), pool_pre_ping=True, future=True)


def dataset_lock_key(dataset: str) -> int:
    """The advisory-lock key of one dataset: a load into it and a snapshot of it exclude each other (so no point
    id below a snapshot's pin commits after it), while loads into other datasets go on."""
    return int.from_bytes(hashlib.sha256(f"trajpub.dataset.{dataset}".encode()).digest()[:8], "big", signed=True)


def release_lock_key(dataset: str) -> int:
    """The advisory-lock key that lets one release of a dataset compute at a time (distinct from
    :func:`dataset_lock_key`, so loads and snapshots are not held up by a running release)."""
    return dataset_lock_key(f"release:{dataset}")


@contextmanager
def release_slot(eng: sa.Engine, dataset: str, timeout_s: float, poll_s: float = 1.0,
                 say=lambda message: None) -> Iterator[None]:
    """Hold the dataset's release slot: a session advisory lock on a connection of its own, so that a crashed
    flow process (or a lost connection) frees it at once. Waits up to ``timeout_s``, then fails saying which
    releases of the dataset are running."""
    with eng.connect() as conn:
        key = release_lock_key(dataset)
        deadline = time.monotonic() + timeout_s
        said = False
        while not conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
            conn.commit()
            if time.monotonic() > deadline:
                running = conn.execute(sa.text(
                    "SELECT string_agg(release_id::text, ', ' ORDER BY release_id) FROM governance.releases"
                    " WHERE dataset = :d AND status IN ('planned', 'validated', 'protected', 'audited')"),
                    {"d": dataset}).scalar()
                raise PolicyError(f"another release of dataset '{dataset}' (release {running or '?'}) is running; "
                                  f"waited {timeout_s:g} s", "queue_timeout_s")
            if not said:
                say(f"waiting for the running release of dataset '{dataset}' to finish its computation")
                said = True
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


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every migration file, in order."""
    found = []
    for path in sorted(config.SQL_DIR.glob("*.sql")):
        m = MIGRATION_NAME.match(path.name)
        if not m:
            raise TrajpubError("migration file names must look like 001_name.sql", f"file {path}")
        found.append((int(m.group(1)), path.name, path.read_text()))
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise TrajpubError("two migration files share a version number", f"folder {config.SQL_DIR}")
    return found


def migrate(eng: sa.Engine | None = None) -> list[str]:
    """Apply the migrations not yet recorded in ``governance.schema_migrations``; return their names.

    Each migration runs in its own transaction together with its version row, so a failing migration leaves
    nothing half-applied.
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
                    # the driver's cursor without parameters: '%' in plpgsql must not be read as a placeholder
                    conn.connection.dbapi_connection.cursor().execute(sql)
                    conn.execute(sa.text("INSERT INTO governance.schema_migrations (version, name, sha256) "
                                         "VALUES (:v, :n, :s)"), {"v": version, "n": name, "s": digest})
                applied_now.append(name)
        finally:
            conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK})
            conn.commit()
    return applied_now


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
