"""Where things are: the project's folders, the database and the Prefect API.

``TRAJPUB_DATABASE_URL`` and ``PREFECT_API_URL`` point at existing servers; without them the project runs its
own PostGIS cluster and Prefect server on loopback, with their state under ``.trajpub/``.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
STATE_DIR = Path(os.environ.get("TRAJPUB_STATE_DIR", PROJECT_ROOT / ".trajpub"))
SQL_DIR = PROJECT_ROOT / "sql"
EXPECTATIONS_DIR = PROJECT_ROOT / "expectations"


def _shared_data_dir() -> Path:
    """The bundled real data: ``../shared/data`` next to the clone, else ``TRAJPUB_SHARED_DATA`` or the
    workplace's copy."""
    if os.environ.get("TRAJPUB_SHARED_DATA"):
        return Path(os.environ["TRAJPUB_SHARED_DATA"])
    candidates = (PROJECT_ROOT.parent / "shared" / "data", Path("/work/shared/data"))
    return next((c for c in candidates if c.is_dir()), candidates[0])


SHARED_DATA_DIR = _shared_data_dir()

PG_PORT = int(os.environ.get("TRAJPUB_PG_PORT", "5433"))
PG_DATABASE = "trajpub"
LOCAL_DATABASE_URL = f"postgresql+psycopg://postgres@127.0.0.1:{PG_PORT}/{PG_DATABASE}"

PREFECT_PORT = int(os.environ.get("TRAJPUB_PREFECT_PORT", "4200"))
LOCAL_PREFECT_API_URL = f"http://127.0.0.1:{PREFECT_PORT}/api"


def database_url() -> str:
    """The SQLAlchemy URL of the trajpub database."""
    return os.environ.get("TRAJPUB_DATABASE_URL", LOCAL_DATABASE_URL)


def uses_local_database() -> bool:
    return "TRAJPUB_DATABASE_URL" not in os.environ and "TRAJPUB_DATABASE_SECRET" not in os.environ


def prefect_api_url() -> str:
    return os.environ.get("PREFECT_API_URL", LOCAL_PREFECT_API_URL)


def apply_environment() -> None:
    """Point Prefect at our server and home before Prefect is imported; silence analytics."""
    os.environ.setdefault("PREFECT_API_URL", LOCAL_PREFECT_API_URL)
    os.environ.setdefault("PREFECT_HOME", str(STATE_DIR / "prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
