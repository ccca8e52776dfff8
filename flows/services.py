"""Start and stop the real services a release needs: a project-local PostGIS cluster and a Prefect server.

Both are idempotent: ``up`` on a running service does nothing. With ``TRAJPUB_DATABASE_URL`` or
``PREFECT_API_URL`` set, the existing servers are used and nothing is started.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tasks import logins
from trajpub import config
from trajpub.errors import TrajpubError
from trajpub.identity import canonical_identity

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
# Where the running local server keeps its state (its database URL without the password): a server started with
# other storage (SQLite before) is restarted on the database.
PREFECT_STORE = config.STATE_DIR / "prefect-server.store"


def _is_root() -> bool:
    return os.geteuid() == 0


def _run_as_postgres(cmd: list[str], check: bool, **kwargs) -> subprocess.CompletedProcess:
    """Run ``cmd`` (initdb, pg_ctl, ...), as the postgres user when we are root (they refuse to run as root),
    from ``/``: the postgres user cannot enter a working folder under /root and said so on the console."""
    if not _is_root():
        return subprocess.run(cmd, check=check, **kwargs)
    return subprocess.run(["runuser", "-u", "postgres", "--", *cmd], check=check, cwd="/", **kwargs)


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
    rc = _run_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(PGDATA), "status"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode
    return rc == 0


def db_up() -> str:
    """Install (if needed), initialise and start the local cluster on 127.0.0.1; create the database, the logins
    with generated passwords (:data:`trajpub.config.CREDENTIALS_FILE`) and a password (scram-sha-256) rule for
    every connection. A cluster made before passwords (trusting local connections) is upgraded in place."""
    if not config.uses_local_database():
        if "TRAJPUB_DATABASE_URL" in os.environ:
            return f"using the existing database TRAJPUB_DATABASE_URL ({_redact(os.environ['TRAJPUB_DATABASE_URL'])})"
        return "using the existing database named by the Prefect Secret block TRAJPUB_DATABASE_SECRET"
    ensure_postgis_installed()
    credentials = _credentials()
    if not (PGDATA / "PG_VERSION").exists():
        print(f"initialising a PostgreSQL cluster in {PGDATA} ...", flush=True)
        PGDATA.mkdir(parents=True, exist_ok=True)
        PG_SOCKET_DIR.mkdir(parents=True, exist_ok=True)
        if _is_root():
            shutil.chown(PGDATA, "postgres", "postgres")
            shutil.chown(PG_SOCKET_DIR, "postgres", "postgres")
        PGDATA.chmod(0o700)
        pwfile = PG_HOME / ".initdb-password"  # read by initdb (the postgres user when root), then removed
        pwfile.write_text(credentials[config.OWNER])
        pwfile.chmod(0o600)
        if _is_root():
            shutil.chown(pwfile, "postgres", "postgres")
        try:
            _run_as_postgres([str(PG_BIN / "initdb"), "-D", str(PGDATA), "-U", config.OWNER,
                                         "--auth=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8",
                                         "--locale=C.UTF-8"], check=True, stdout=subprocess.DEVNULL)
        finally:
            pwfile.unlink(missing_ok=True)
    if not pg_running():
        opts = (f"-p {config.PG_PORT} -c listen_addresses=127.0.0.1 -k {PG_SOCKET_DIR} "
                "-c max_connections=200 -c shared_buffers=512MB")
        _run_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(PGDATA), "-l",
                                     str(PGDATA / "server.log"), "-w", "-t", "60", "-o", opts, "start"],
                       check=True, stdout=subprocess.DEVNULL)
    logins.create_database_and_logins(credentials, LOGINS)
    _require_passwords()
    return f"PostGIS running on 127.0.0.1:{config.PG_PORT} (data in {PGDATA}; passwords in {config.CREDENTIALS_FILE})"


# The logins `db up` makes; stewards are added one by one (`trajpub steward add`).
LOGINS = (config.OWNER, config.PIPELINE, config.AUDITOR, config.CONSUMER, config.PREFECT_LOGIN)
HBA = f"""# trajpub: every connection authenticates with a password (scram-sha-256); nothing is trusted.
# The Prefect server's login reaches only its own database, which no other login but the superuser reaches.
local   {config.PREFECT_DATABASE}   {config.PREFECT_LOGIN},{config.OWNER}                 scram-sha-256
host    {config.PREFECT_DATABASE}   {config.PREFECT_LOGIN},{config.OWNER}   127.0.0.1/32  scram-sha-256
host    {config.PREFECT_DATABASE}   {config.PREFECT_LOGIN},{config.OWNER}   ::1/128       scram-sha-256
local   all       {config.PREFECT_LOGIN}                          reject
host    all       {config.PREFECT_LOGIN}            all           reject
local   {config.PREFECT_DATABASE}   all                                      reject
host    {config.PREFECT_DATABASE}   all                       all           reject
local   all       all                                      scram-sha-256
host    all       all                       127.0.0.1/32  scram-sha-256
host    all       all                       ::1/128       scram-sha-256
"""


def _credentials() -> dict[str, str]:
    """The local logins' passwords, generated once and kept in a file only the local user can read."""
    path = config.CREDENTIALS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    known = json.loads(path.read_text()) if path.exists() else {}
    missing = {login: secrets.token_urlsafe(24) for login in LOGINS if login not in known}
    if missing:
        _write_credentials({**known, **missing})
    return {**known, **missing}


def _write_credentials(credentials: dict[str, str]) -> None:
    path = config.CREDENTIALS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.touch(mode=0o600)
    tmp.chmod(0o600)
    tmp.write_text(json.dumps(credentials, indent=1))
    tmp.replace(path)


def _require_passwords() -> None:
    """Write the password-only pg_hba.conf (when it differs) and reload the server."""
    hba = PGDATA / "pg_hba.conf"
    if _is_root():
        current = _run_as_postgres(["cat", str(hba)], capture_output=True, text=True,
                                 check=True).stdout
    else:
        current = hba.read_text()
    if current == HBA:
        return
    if _is_root():
        _run_as_postgres(["tee", str(hba)], input=HBA, text=True, check=True, stdout=subprocess.DEVNULL)
    else:
        hba.write_text(HBA)
    _run_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(PGDATA), "reload"], check=True,
                   stdout=subprocess.DEVNULL)


STEWARD_LOGIN = re.compile(r"[a-z][a-z0-9_]{0,40}")


def add_steward(login: str) -> str:
    """Create the steward login ``login`` (a member of the trajpub_steward group) with a generated password,
    kept in the local credentials file; on an existing login, nothing changes."""
    if not STEWARD_LOGIN.fullmatch(login) or login.startswith(("trajpub", "pg_")) or login == config.OWNER:
        raise TrajpubError(f"a steward's login is lower-case letters, digits and underscores, starting with a "
                           f"letter (an identity: trajpub/identity.py), not a trajpub or system role; got "
                           f"{login!a}", "steward add NAME")
    if not config.uses_local_database():
        raise TrajpubError("TRAJPUB_DATABASE_URL is set: the external server's operator adds logins (CREATE ROLE "
                           f"{login} LOGIN PASSWORD ... IN ROLE trajpub_steward)", "steward add")
    credentials = _credentials()
    if login in credentials:
        return f"steward {login} already exists (password in {config.CREDENTIALS_FILE})"
    with logins.owner_connection(credentials) as conn:
        if logins.role_exists(conn, login):
            raise TrajpubError(f"a role named {login} exists already and is not a local steward", "steward add")
        credentials[login] = secrets.token_urlsafe(24)
        _write_credentials(credentials)  # first: a login whose password is lost would be locked out
        logins.set_login(conn, login, credentials[login], group="trajpub_steward")
    return f"steward {login} added (login in the trajpub_steward group; password in {config.CREDENTIALS_FILE})"


def add_requester(name: str) -> str:
    """Register ``name`` (an identity, :mod:`trajpub.identity`; kept canonical) as a person who may ask for
    releases, as the superuser (``governance.requesters`` records who registered them); idempotent."""
    name = canonical_identity(name, "the requester's name")
    return f"requester {name} {'registered' if logins.register_requester(name) else 'was registered already'}"


def db_down() -> str:
    if not config.uses_local_database():
        return "TRAJPUB_DATABASE_URL is set: not stopping a server this project did not start"
    if pg_running():
        _run_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(PGDATA), "-m", "fast", "-w", "stop"],
                       check=True, stdout=subprocess.DEVNULL)
        return f"PostGIS stopped; {_where_the_cluster_lives()}"
    return f"PostGIS was not running; {_where_the_cluster_lives()}" if PGDATA.exists() else "PostGIS was not running"


def _where_the_cluster_lives() -> str:
    """Where the stopped cluster's files are, their size and how to remove them (the next ``db up`` then makes
    a new, empty cluster with new passwords)."""
    folder = PGDATA if PG_HOME == config.STATE_DIR else PG_HOME
    outside = "" if PG_HOME == config.STATE_DIR else " (outside the clone: the postgres user cannot reach the clone)"
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())
    return f"its data ({size / 2**20:,.0f} MB) stays in {folder}{outside}; to remove it for good: rm -rf {folder}"


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


def prefect_requires_auth(api_url: str) -> bool:
    """Whether the Prefect API at ``api_url`` refuses a request without credentials (401)."""
    try:
        with urllib.request.urlopen(f"{api_url}/admin/version", timeout=5):
            return False
    except urllib.error.HTTPError as exc:
        return exc.code == 401


def _prefect_auth() -> str:
    """The local server's API authentication string (``trajpub:<random>``), generated once into
    :data:`trajpub.config.PREFECT_AUTH_FILE`, readable by the local user only."""
    auth = config.local_prefect_auth()
    if auth is None:
        auth = f"trajpub:{secrets.token_urlsafe(32)}"
        config.STATE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = config.PREFECT_AUTH_FILE.with_suffix(".tmp")
        tmp.touch(mode=0o600)
        tmp.chmod(0o600)
        tmp.write_text(auth)
        tmp.replace(config.PREFECT_AUTH_FILE)
    return auth


def prefect_store() -> tuple[dict[str, str], str]:
    """The environment that gives the local Prefect server its database, and how it is named (no password): the
    local cluster's ``prefect`` database as its own login (:func:`tasks.logins.create_prefect_database`) when the
    project runs its cluster; the operator's ``PREFECT_SERVER_DATABASE_CONNECTION_URL`` (or Prefect's own
    SQLite file in ``PREFECT_HOME``) otherwise."""
    for name in ("PREFECT_SERVER_DATABASE_CONNECTION_URL", "PREFECT_API_DATABASE_CONNECTION_URL"):
        if os.environ.get(name):
            return {}, _redact(os.environ[name])
    if not config.uses_local_database():
        return {}, "SQLite in PREFECT_HOME"
    if not pg_running():
        raise TrajpubError("the local database is not running, and the Prefect server keeps its state there; run "
                           "`trajpub db up` first", "trajpub server up")
    url = config.local_prefect_database_url()
    return {"PREFECT_SERVER_DATABASE_CONNECTION_URL": url}, _redact(url)


def server_up(timeout_s: float = 120) -> str:
    """Start ``prefect server start`` on loopback in the background, with API authentication (Prefect's basic
    auth: ``PREFECT_SERVER_API_AUTH_STRING``, the string of :func:`_prefect_auth`) and its state in the database
    of :func:`prefect_store`, and wait until it is healthy. A server this project started earlier without
    authentication, or on other storage, is restarted."""
    if "PREFECT_API_URL" in os.environ and os.environ["PREFECT_API_URL"] != config.LOCAL_PREFECT_API_URL:
        if not prefect_healthy():
            raise TrajpubError(f"the Prefect API at {config.prefect_api_url()} does not answer", "PREFECT_API_URL")
        return f"using the existing Prefect server at {config.prefect_api_url()}"
    ui = (f"UI at http://127.0.0.1:{config.PREFECT_PORT}, which asks for the API authentication string in "
          f"{config.PREFECT_AUTH_FILE}")
    store_env, store = prefect_store()
    if prefect_healthy(config.LOCAL_PREFECT_API_URL):
        authenticated = prefect_requires_auth(config.LOCAL_PREFECT_API_URL)
        if not PREFECT_PID.exists():
            if authenticated:
                return f"Prefect server already up at {config.LOCAL_PREFECT_API_URL} ({ui})"
            raise TrajpubError("a Prefect server without API authentication, not started by this project, answers "
                               "on the local port; stop it or set TRAJPUB_PREFECT_PORT", config.LOCAL_PREFECT_API_URL)
        started_on = PREFECT_STORE.read_text().strip() if PREFECT_STORE.exists() else "SQLite in PREFECT_HOME"
        if authenticated and started_on == store:
            return f"Prefect server already up at {config.LOCAL_PREFECT_API_URL} ({ui}; state in {store})"
        why = "without API authentication" if not authenticated else f"with its state in {started_on}"
        print(f"{server_down()}: it ran {why}; starting it again", flush=True)
        _wait_until_down(timeout_s)
    config.apply_environment()
    auth = _prefect_auth()
    env = {**os.environ, **store_env, "PREFECT_API_URL": config.LOCAL_PREFECT_API_URL,
           "PREFECT_SERVER_API_AUTH_STRING": auth, "PREFECT_API_AUTH_STRING": auth}
    log = PREFECT_LOG.open("ab")
    proc = subprocess.Popen([str(Path(sys.executable).with_name("prefect")), "server", "start", "--host",
                             "127.0.0.1", "--port", str(config.PREFECT_PORT)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    PREFECT_PID.write_text(str(proc.pid))
    PREFECT_STORE.write_text(store)
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
    return f"Prefect server up at {config.LOCAL_PREFECT_API_URL} ({ui}; state in {store})"


def _wait_until_down(timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while prefect_healthy(config.LOCAL_PREFECT_API_URL):
        if time.monotonic() > deadline:
            raise TrajpubError(f"the Prefect server still answers {timeout_s:.0f} s after it was stopped",
                               config.LOCAL_PREFECT_API_URL)
        time.sleep(0.5)


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
