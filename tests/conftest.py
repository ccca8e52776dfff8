"""Shared fixtures. Integration tests use the real PostGIS and Prefect servers that `make test` starts."""

from __future__ import annotations

import uuid

import pytest

from trajpub import config

config.apply_environment()


@pytest.fixture(scope="session")
def engine():
    """The real trajpub database, migrated. Fails (never skips) when the server is not up."""
    import sqlalchemy as sa

    from tasks import db

    eng = db.engine()
    try:
        with eng.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.OperationalError as exc:  # pragma: no cover - environment problem, reported clearly
        pytest.fail(f"PostGIS is not reachable at {config.database_url()}: run `make test` "
                    f"(or `trajpub db up`) first. {exc}")
    db.migrate(eng)
    return eng


@pytest.fixture
def dataset_name() -> str:
    """A fresh dataset name per test, so tests never see each other's rows."""
    return f"t_{uuid.uuid4().hex[:10]}"
