"""Where things are: the project's folders, the database and the Prefect API.

``TRAJPUB_DATABASE_URL`` and ``PREFECT_API_URL`` point at existing servers; without them the project runs its
own PostGIS cluster and Prefect server on loopback, with their state under ``.trajpub/``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
STATE_DIR = Path(os.environ.get("TRAJPUB_STATE_DIR", PROJECT_ROOT / ".trajpub"))
SQL_DIR = PROJECT_ROOT / "sql"
EXPECTATIONS_DIR = PROJECT_ROOT / "expectations"


def _shared_data_dir() -> Path:
    """The bundled real data (README, "Data"): ``TRAJPUB_SHARED_DATA`` when set, else the folder ``shared/data``
    beside the clone's folder, else the workplace's copy."""
    if os.environ.get("TRAJPUB_SHARED_DATA"):
        return Path(os.environ["TRAJPUB_SHARED_DATA"])
    candidates = (PROJECT_ROOT.parent / "shared" / "data", Path("/work/shared/data"))
    return next((c for c in candidates if c.is_dir()), candidates[0])


SHARED_DATA_DIR = _shared_data_dir()

PG_PORT = int(os.environ.get("TRAJPUB_PG_PORT", "5433"))
PG_DATABASE = "trajpub"
# The local cluster's logins and their generated passwords (``trajpub db up``, ``trajpub steward add``): a JSON
# object login -> password, readable by the local user only (0600).
CREDENTIALS_FILE = STATE_DIR / "credentials.json"
OWNER = "postgres"  # the superuser: migrations, `db up` and `steward add` only
PIPELINE = "trajpub_pipeline"  # the release flow, loading, road networks
CONSUMER = "trajpub_consumer"  # reads published.* only

PREFECT_PORT = int(os.environ.get("TRAJPUB_PREFECT_PORT", "4200"))
LOCAL_PREFECT_API_URL = f"http://127.0.0.1:{PREFECT_PORT}/api"


def local_database_url(login: str = PIPELINE) -> str:
    """The SQLAlchemy URL of the local cluster for ``login``, with its password from :data:`CREDENTIALS_FILE`."""
    from sqlalchemy.engine import URL

    from trajpub.errors import TrajpubError

    try:
        password = json.loads(CREDENTIALS_FILE.read_text())[login]
    except FileNotFoundError:
        raise TrajpubError("the local database's passwords are missing; run `trajpub db up`",
                           str(CREDENTIALS_FILE)) from None
    except KeyError:
        raise TrajpubError(f"no password for the login '{login}' (a steward is added with `trajpub steward add "
                           f"{login}`)", str(CREDENTIALS_FILE)) from None
    return URL.create("postgresql+psycopg", username=login, password=password, host="127.0.0.1", port=PG_PORT,
                      database=PG_DATABASE).render_as_string(hide_password=False)


def database_url(login: str = PIPELINE) -> str:
    """The SQLAlchemy URL of the trajpub database for ``login``: ``TRAJPUB_DATABASE_URL`` when set (an external
    server, whose roles its operator manages), else the local cluster."""
    return os.environ.get("TRAJPUB_DATABASE_URL") or local_database_url(login)


def uses_local_database() -> bool:
    return "TRAJPUB_DATABASE_URL" not in os.environ and "TRAJPUB_DATABASE_SECRET" not in os.environ


def prefect_api_url() -> str:
    return os.environ.get("PREFECT_API_URL", LOCAL_PREFECT_API_URL)


def apply_environment() -> None:
    """Point Prefect at our server and home before Prefect is imported; silence analytics."""
    os.environ.setdefault("PREFECT_API_URL", LOCAL_PREFECT_API_URL)
    os.environ.setdefault("PREFECT_HOME", str(STATE_DIR / "prefect"))
    try:  # Prefect makes only the last folder and warns on the console when the state folder is not there yet
        Path(os.environ["PREFECT_HOME"]).mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        pass  # a read-only home: Prefect says so itself when it needs to write
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
