"""A PostGIS cluster of a test module's own, beside the shared one: ``trajpub db up`` and ``trajpub db migrate`` in
a state folder and on a port of its own, with the shared Prefect server and Dask cluster. Tests that stop the
database run on one in the parallel run, while the shared database stays up for every other test."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from tests.integration.conftest import TRAJPUB
from trajpub import config


@dataclass
class PrivateDatabase:
    """The cluster's state folder and the environment that points ``trajpub`` (and a release run) at it."""

    state_dir: Path
    env: dict[str, str]
    engines: dict[str, sa.Engine] = field(default_factory=dict)

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """The real ``trajpub`` command line, on this cluster."""
        return subprocess.run([TRAJPUB, *args], capture_output=True, text=True, timeout=timeout, check=False,
                              env=self.env)

    def engine(self, login: str = config.PIPELINE) -> sa.Engine:
        """An engine on this cluster as ``login`` (the pipeline role by default), with its generated password."""
        if login in self.engines:
            return self.engines[login]
        password = json.loads((self.state_dir / "credentials.json").read_text())[login]
        url = sa.engine.URL.create("postgresql+psycopg", username=login, password=password, host="127.0.0.1",
                                   port=int(self.env["TRAJPUB_PG_PORT"]), database=config.PG_DATABASE)
        return self.engines.setdefault(login, sa.create_engine(url, pool_pre_ping=True))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def private_database(stewards: tuple[str, ...], requesters: tuple[str, ...]) -> Iterator[PrivateDatabase]:
    """Make, migrate and start a cluster with ``stewards`` and ``requesters`` registered (as an operator does, with
    the CLI), yield it, then stop it and remove its folder. The folder is under the system's temporary folder,
    traversable by the postgres user (who runs the server when the tests run as root); a cluster made anywhere
    else (``trajpub db up`` falls back to /var/tmp when the postgres user cannot reach the state folder, where
    the shared cluster may live) fails the fixture."""
    state = Path(tempfile.mkdtemp(prefix="trajpub-private-db-"))
    state.chmod(0o711)
    env = {**os.environ, "TRAJPUB_TEST_MODE": "1", "TRAJPUB_STATE_DIR": str(state),
           "TRAJPUB_PG_PORT": str(_free_port()), "PREFECT_API_URL": config.prefect_api_url(),
           "PREFECT_API_AUTH_STRING": os.environ.get("PREFECT_API_AUTH_STRING") or config.local_prefect_auth() or "",
           "PREFECT_HOME": os.environ.get("PREFECT_HOME", str(config.STATE_DIR / "prefect"))}
    env.pop("TRAJPUB_DATABASE_URL", None)
    db = PrivateDatabase(state, env)
    try:
        for args in (("db", "up"), ("db", "migrate"), *(("steward", "add", s) for s in stewards),
                     *(("requester", "add", r) for r in requesters)):
            done = db.cli(*args)
            assert done.returncode == 0, f"trajpub {' '.join(args)}: {done.stdout}{done.stderr}"
        assert (state / "pgdata" / "PG_VERSION").exists(), f"the private cluster is not in {state}"
        yield db
    finally:
        for engine in db.engines.values():
            engine.dispose()
        db.cli("db", "down")
        shutil.rmtree(state, ignore_errors=True)
