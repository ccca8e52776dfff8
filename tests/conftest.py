"""Shared fixtures. Integration tests use the real PostGIS and Prefect servers that `make test` starts."""

from __future__ import annotations

import uuid

import pytest

from trajpub import config

config.apply_environment()


def pytest_collection_modifyitems(config, items):
    """Tests under ``tests/integration`` are marked ``integration`` (``make test-unit`` deselects them). Under
    pytest-xdist (``make test``: ``-n 2 --dist loadfile``) a worker runs all of a module's tests, so a module
    fixture is made once, by one worker. (``--dist loadgroup`` does not group under pytest 9: xdist 3.8 renames
    ``item._nodeid``, which pytest 9 no longer reads.)"""
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def engine():
    """The real trajpub database, migrated, as the pipeline role (what the flow connects as). Fails (never
    skips) when the server is not up."""
    import sqlalchemy as sa

    from tasks import db

    eng = db.engine()
    try:
        with eng.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.OperationalError as exc:  # pragma: no cover - environment problem, reported clearly
        pytest.fail(f"PostGIS is not reachable at {eng.url.render_as_string()}: run `make test` "
                    f"(or `trajpub db up`) first. {exc}")
    db.migrate(db.owner_engine())
    return eng


@pytest.fixture(scope="session")
def owner(engine):
    """The superuser's engine, for a test's setup only (the code under test connects as the pipeline role)."""
    from tasks import db

    return db.owner_engine()


@pytest.fixture
def dataset_name() -> str:
    """A fresh dataset name per test, so tests never see each other's rows."""
    return f"t_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def dask_cluster(tmp_path_factory):
    """One two-worker process cluster per test process, on loopback over TLS with certificates written for it
    (:func:`tasks.dask_cluster.tls_files`): the unit tests' client, the integration tests' flows and the gate's
    300-taxi audits share it, so a test process starts two worker processes, not six."""
    from tasks.dask_cluster import local_cluster, tls_files

    with local_cluster(2, security=tls_files(tmp_path_factory.mktemp("dask-tls"))) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def dask_client(dask_cluster):
    """A client of the session's cluster: what the release flow's protect and audit tasks use."""
    from distributed import Client

    with Client(dask_cluster) as client:
        yield client
