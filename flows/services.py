"""Start and stop the real services a release needs: a project-local PostGIS cluster and a Prefect server.

Both are idempotent: ``up`` on a running service does nothing. With ``TRAJPUB_DATABASE_URL`` or
``PREFECT_API_URL`` set, the existing servers are used and nothing is started.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from trajpub import config
from trajpub.errors import TrajpubError

PG_BIN = Path("/usr/lib/postgresql/15/bin")
POSTGIS_CONTROL = Path("/usr/share/postgresql/15/extension/postgis.control")
APT_INSTALL = ("DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
               "postgresql-15 postgresql-15-postgis-3")


def _postgres_can_reach(path: Path) -> bool:
    """Whether the postgres user can traverse every parent folder of ``path`` (not so under /root, say)."""
    return all(p.stat().st_mode & 0o001 for p in path.resolve().parents if p.exists())


# The cluster lives in the project's .trajpub/ folder; when the server's user cannot reach it (a clone under
# /root, run as root), in a folder named after the project path under /var/tmp.
PG_HOME = (config.STATE_DIR if os.geteuid() != 0 or _postgres_can_reach(config.STATE_DIR)
           else Path("/var/tmp") / f"trajpub-{hashlib.sha256(str(config.PROJECT_ROOT).encode()).hexdigest()[:10]}")
PGDATA = PG_HOME / "pgdata"
PG_SOCKET_DIR = PG_HOME / "pgsocket"
PREFECT_PID = config.STATE_DIR / "prefect-server.pid"
PREFECT_LOG = config.STATE_DIR / "prefect-server.log"


def _is_root() -> bool:
    return os.geteuid() == 0


def _as_postgres(cmd: list[str]) -> list[str]:
    """initdb and pg_ctl refuse to run as root: run them as the postgres user then."""
    return ["runuser", "-u", "postgres", "--", *cmd] if _is_root() else cmd


def ensure_postgis_installed() -> None:
    if (PG_BIN / "initdb").exists() and POSTGIS_CONTROL.exists():
        return
    if not _is_root():
        raise TrajpubError("PostgreSQL 15 with PostGIS 3 is not installed; run as root: "
                           f"apt-get update && {APT_INSTALL}", "trajpub db up")
    print("installing PostgreSQL 15 + PostGIS 3 from Debian packages ...", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql-15",
                    "postgresql-15-postgis-3"], check=True, env=env, stdout=subprocess.DEVNULL)


def pg_running() -> bool:
    if not PGDATA.exists():
        return False
    rc = subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(PGDATA), "status"]),
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode
    return rc == 0


def db_up() -> str:
    """Install (if needed), initialise and start the local cluster on 127.0.0.1; create the database."""
    if not config.uses_local_database():
        return f"using the existing database TRAJPUB_DATABASE_URL ({_redact(config.database_url())})"
    ensure_postgis_installed()
    if not (PGDATA / "PG_VERSION").exists():
        print(f"initialising a PostgreSQL cluster in {PGDATA} ...", flush=True)
        PGDATA.mkdir(parents=True, exist_ok=True)
        PG_SOCKET_DIR.mkdir(parents=True, exist_ok=True)
        if _is_root():
            shutil.chown(PGDATA, "postgres", "postgres")
            shutil.chown(PG_SOCKET_DIR, "postgres", "postgres")
        PGDATA.chmod(0o700)
        subprocess.run(_as_postgres([str(PG_BIN / "initdb"), "-D", str(PGDATA), "-U", "postgres",
                                     "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"]),
                       check=True, stdout=subprocess.DEVNULL)
    if not pg_running():
        opts = (f"-p {config.PG_PORT} -c listen_addresses=127.0.0.1 -k {PG_SOCKET_DIR} "
                "-c max_connections=200 -c shared_buffers=512MB")
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(PGDATA), "-l",
                                     str(PGDATA / "server.log"), "-w", "-t", "60", "-o", opts, "start"]),
                       check=True, stdout=subprocess.DEVNULL)
    _create_database()
    return f"PostGIS running on 127.0.0.1:{config.PG_PORT} (data in {PGDATA})"


def _create_database() -> None:
    import psycopg

    with psycopg.connect(f"host=127.0.0.1 port={config.PG_PORT} user=postgres dbname=postgres",
                         autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (config.PG_DATABASE,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{config.PG_DATABASE}"')


def db_down() -> str:
    if not config.uses_local_database():
        return "TRAJPUB_DATABASE_URL is set: not stopping a server this project did not start"
    if pg_running():
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(PGDATA), "-m", "fast", "-w", "stop"]),
                       check=True, stdout=subprocess.DEVNULL)
        return "PostGIS stopped"
    return "PostGIS was not running"


def _redact(url: str) -> str:
    """Hide a password in a database URL before it is printed or logged."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def prefect_healthy(api_url: str | None = None) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url or config.prefect_api_url()}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def server_up(timeout_s: float = 120) -> str:
    """Start ``prefect server start`` on loopback in the background and wait until it is healthy."""
    if "PREFECT_API_URL" in os.environ and os.environ["PREFECT_API_URL"] != config.LOCAL_PREFECT_API_URL:
        if not prefect_healthy():
            raise TrajpubError(f"the Prefect API at {config.prefect_api_url()} does not answer", "PREFECT_API_URL")
        return f"using the existing Prefect server at {config.prefect_api_url()}"
    if prefect_healthy(config.LOCAL_PREFECT_API_URL):
        return f"Prefect server already up at {config.LOCAL_PREFECT_API_URL}"
    config.apply_environment()
    config.STATE_DIR.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PREFECT_API_URL": config.LOCAL_PREFECT_API_URL}
    log = PREFECT_LOG.open("ab")
    proc = subprocess.Popen([str(Path(sys.executable).with_name("prefect")), "server", "start", "--host",
                             "127.0.0.1", "--port", str(config.PREFECT_PORT)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    PREFECT_PID.write_text(str(proc.pid))
    print("starting the Prefect server ", end="", flush=True)
    deadline = time.monotonic() + timeout_s
    while not prefect_healthy(config.LOCAL_PREFECT_API_URL):
        if proc.poll() is not None:
            raise TrajpubError(f"the Prefect server exited with code {proc.returncode}", str(PREFECT_LOG))
        if time.monotonic() > deadline:
            raise TrajpubError(f"the Prefect server was not healthy after {timeout_s:.0f} s", str(PREFECT_LOG))
        print(".", end="", flush=True)
        time.sleep(1)
    print(flush=True)
    return f"Prefect server up at {config.LOCAL_PREFECT_API_URL} (UI at http://127.0.0.1:{config.PREFECT_PORT})"


def server_down() -> str:
    if not PREFECT_PID.exists():
        return "no Prefect server started by this project"
    pid = int(PREFECT_PID.read_text())
    try:
        os.killpg(pid, 15)
    except ProcessLookupError:
        pass
    PREFECT_PID.unlink()
    return "Prefect server stopped"
