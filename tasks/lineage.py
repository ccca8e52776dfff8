"""OpenLineage-style run events (START, COMPLETE, FAIL) stored in ``governance.lineage_events``.

Event shape follows the OpenLineage RunEvent (https://openlineage.io/spec/2-0-2/OpenLineage.json): a run, a job,
input and output datasets with facets. Facets never carry the random seed.
"""

from __future__ import annotations

import functools
import json
import subprocess
from datetime import UTC, datetime

import sqlalchemy as sa

from trajpub import __version__ as trajpub_version
from trajpub import config

SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent"
FORBIDDEN_KEYS = {"seed", "random_seed", "rng"}
#: The run metadata a lineage event may carry: what the published table itself shows. Everything else a mechanism
#: reports (input counts, suppressions, data-dependent or empirical epsilons) is a statistic of the raw data and
#: stays in the release's governance summary, for the steward (issue 14).
PUBLIC_METADATA = ("mechanism", "params", "released_records", "released_points", "released_fragments")


def public_metadata(metadata: dict) -> dict:
    """The part of a mechanism's run metadata that lineage may carry (:data:`PUBLIC_METADATA`)."""
    return {k: metadata[k] for k in PUBLIC_METADATA if k in metadata}


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """The git commit the code runs from (with '+dirty' if the tree has changes), or the package version."""
    try:
        sha = subprocess.run(["git", "-C", str(config.PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, check=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(config.PROJECT_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return f"trajpub {trajpub_version}"


def _namespace(engine: sa.Engine) -> str:
    url = engine.url
    return f"postgres://{url.host}:{url.port or 5432}"


def check_no_seed(obj, path: str = "event") -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in FORBIDDEN_KEYS:
                raise ValueError(f"lineage must not carry a random seed ({path}.{k})")
            check_no_seed(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            check_no_seed(v, f"{path}[{i}]")


def emit(conn: sa.Connection, release_id: int, event_type: str, *, run_id: str | None, dataset: str,
         inputs: list[dict] | None = None, outputs: list[dict] | None = None, facets: dict | None = None) -> dict:
    """Store one run event; ``inputs``/``outputs`` are ``{"name": ..., "facets": {...}}`` in the database's
    namespace."""
    namespace = _namespace(conn.engine)
    event = {
        "eventType": event_type,
        "eventTime": datetime.now(UTC).isoformat(),
        "producer": f"trajpub/{trajpub_version}",
        "schemaURL": SCHEMA_URL,
        "run": {"runId": run_id, "facets": {"trajpub_release": {"release_id": release_id},
                                            "code_version": {"version": code_version()}, **(facets or {})}},
        "job": {"namespace": "trajpub", "name": f"release.{dataset}"},
        "inputs": [{"namespace": namespace, **d} for d in inputs or []],
        "outputs": [{"namespace": namespace, **d} for d in outputs or []],
    }
    check_no_seed(event)
    conn.execute(sa.text("INSERT INTO governance.lineage_events (release_id, event_type, event) "
                         "VALUES (:r, :t, CAST(:e AS jsonb))"),
                 {"r": release_id, "t": event_type, "e": json.dumps(event, default=str)})
    return event


def events(conn: sa.Connection, release_id: int) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT event_id, event_type, event_time, event FROM governance.lineage_events WHERE release_id = :r "
        "ORDER BY event_id"), {"r": release_id}).mappings()]
