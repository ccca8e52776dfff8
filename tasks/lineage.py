"""OpenLineage run events of a release (START, COMPLETE, FAIL, ABORT, OTHER), built with ``openlineage-python``.

Every event is first stored in ``governance.lineage_events``, in the transaction of the governance change it
records (the default sink: an event exists exactly when its change committed). When an OpenLineage transport is
configured the usual way (``OPENLINEAGE_URL``, ``OPENLINEAGE_CONFIG`` or ``OPENLINEAGE__TRANSPORT__*``: file,
console, HTTP to a lineage backend such as Marquez), :func:`deliver` sends the stored events that have not been
sent yet, in order, through ``OpenLineageClient``, and records each delivery in ``governance.lineage_deliveries``
(a transactional outbox: a backend that is down delays lineage, it never loses it or blocks a release).

Events follow the OpenLineage 2-0-2 RunEvent: job ``trajpub/release.<dataset>``, the Prefect flow run id as the
run id, datasets named ``trajpub.<schema>.<table>`` in the ``postgres://host:port`` namespace with the standard
``schema`` and ``dataSource`` facets, ``errorMessage`` on FAIL. trajpub's own facets (mechanism, guarantee,
gate policy, validation, audit verdicts, approval, ...) are custom facets declared in
``docs/lineage/trajpub-facets.json``; their ``_schemaURL`` points there. Facets never carry the random seed.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import uuid
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import datasource_dataset, error_message_run, schema_dataset
from openlineage.client.serde import Serde

from trajpub import __version__ as trajpub_version
from trajpub import config

PRODUCER = f"https://trajpub.invalid/trajpub/{trajpub_version}"
#: Where docs/lineage/trajpub-facets.json is served; ``.invalid`` until the project hosts its documentation (the
#: file in the repository is the schema, and its ``$id`` is this address).
FACETS_SCHEMA = "https://trajpub.invalid/spec/facets/1-0-0/trajpub-facets.json"
JOB_NAMESPACE = "trajpub"
FORBIDDEN_KEYS = {"seed", "random_seed", "rng"}
log = logging.getLogger(__name__)

#: The run metadata a lineage event may carry: what the published table itself shows. Everything else a mechanism
#: reports (input counts, suppressions, data-dependent or empirical epsilons) is a statistic of the raw data and
#: stays in the release's governance summary, for the steward.
PUBLIC_METADATA = ("mechanism", "params", "released_records", "released_points", "released_fragments")


def public_metadata(metadata: dict) -> dict:
    """The part of a mechanism's run metadata that lineage may carry (:data:`PUBLIC_METADATA`)."""
    return {k: metadata[k] for k in PUBLIC_METADATA if k in metadata}


def controls_facet(summary: dict) -> dict:
    """The audit facet's ``controls`` of a release measured against held-out control objects: the protocol and
    the policy's share, never the number of objects held out (a raw count stays in governance)."""
    c = summary.get("controls")
    return {"controls": {"protocol": c["protocol"], "share": c["share"]}} if c else {}


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


def _run_id(run_id: object) -> str:
    """The run's id when it is a UUID (a Prefect flow run id), else a fresh one: a steward's action outside a flow
    run, or a release whose flow run is unknown, still gets a spec-valid run id."""
    try:
        return str(uuid.UUID(str(run_id)))
    except ValueError:
        return str(uuid.uuid4())


def custom_facet(name: str, content: dict) -> dict:
    """A trajpub facet: ``content`` with the OpenLineage base fields, its schema the ``$defs`` entry ``name``."""
    return {"_producer": PRODUCER, "_schemaURL": f"{FACETS_SCHEMA}#/$defs/{name}", **content}


def _facet_name(key: str) -> str:
    """``gate_policy`` -> ``GatePolicyFacet``: the ``$defs`` entry of a trajpub facet key."""
    return "".join(part.capitalize() for part in key.split("_")) + "Facet"


def _dataset_facets(conn: sa.Connection, name: str, facets: dict) -> dict:
    """The standard ``dataSource`` and (for a table of this database) ``schema`` facets, then trajpub's."""
    out: dict[str, Any] = {"dataSource": datasource_dataset.DatasourceDatasetFacet(
        name=_namespace(conn.engine), uri=_namespace(conn.engine))}
    _, schema, table = name.split(".", 2)
    columns = conn.execute(sa.text(
        "SELECT column_name, coalesce(nullif(udt_name, ''), data_type) FROM information_schema.columns "
        "WHERE table_schema = :s AND table_name = :t ORDER BY ordinal_position"), {"s": schema, "t": table}).all()
    if columns:
        out["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[schema_dataset.SchemaDatasetFacetFields(name=c, type=t) for c, t in columns])
    out.update({key: custom_facet(_facet_name(key), value) for key, value in facets.items() if value is not None})
    return out


def emit(conn: sa.Connection, release_id: int, event_type: str, *, run_id: str | None, dataset: str,
         inputs: list[dict] | None = None, outputs: list[dict] | None = None, facets: dict | None = None,
         error: str | None = None) -> dict:
    """Store one run event in the caller's transaction and return it (as JSON).

    ``inputs``/``outputs``: ``{"name": "trajpub.<schema>.<table>", "facets": {key: {...}}}``; ``facets``: trajpub's
    run facets, ``{key: {...}}`` (each key declared in docs/lineage/trajpub-facets.json; ``None`` values are left
    out); ``error``: the message of a FAIL event."""
    namespace = _namespace(conn.engine)
    run_facets: dict[str, Any] = {
        key: custom_facet(_facet_name(key), value) for key, value in
        {"trajpub_release": {"release_id": release_id}, "code_version": {"version": code_version()},
         **(facets or {})}.items() if value is not None}
    if error is not None:
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(message=error,
                                                                            programmingLanguage="python")
    event = RunEvent(
        eventType=RunState(event_type), eventTime=datetime.now(UTC).isoformat(), producer=PRODUCER,
        run=Run(runId=_run_id(run_id), facets=run_facets),
        job=Job(namespace=JOB_NAMESPACE, name=f"release.{dataset}"),
        inputs=[InputDataset(namespace=namespace, name=d["name"],
                             facets=_dataset_facets(conn, d["name"], d.get("facets", {}))) for d in inputs or []],
        outputs=[OutputDataset(namespace=namespace, name=d["name"],
                               facets=_dataset_facets(conn, d["name"], d.get("facets", {}))) for d in outputs or []])
    body = json.loads(json.dumps(Serde.to_dict(event), default=str))
    check_no_seed(body)
    conn.execute(sa.text("INSERT INTO governance.lineage_events (release_id, event_type, event) "
                         "VALUES (:r, :t, CAST(:e AS jsonb))"), {"r": release_id, "t": event_type, "e": json.dumps(body)})
    return body


def events(conn: sa.Connection, release_id: int) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT event_id, event_type, event_time, event FROM governance.lineage_events WHERE release_id = :r "
        "ORDER BY event_id"), {"r": release_id}).mappings()]


def configured_client() -> OpenLineageClient | None:
    """The OpenLineage client of the transport configured in the environment (``OPENLINEAGE_URL``,
    ``OPENLINEAGE_CONFIG`` or ``OPENLINEAGE__TRANSPORT__*``), or ``None``: the governance table is then the only
    sink (the client's own fallback would print every event on the console)."""
    if not any(k in ("OPENLINEAGE_URL", "OPENLINEAGE_CONFIG") or k.startswith("OPENLINEAGE__TRANSPORT")
               for k in os.environ):
        return None
    client = OpenLineageClient()
    return None if client.transport.kind == "noop" else client


def _as_event(body: dict) -> RunEvent:
    """A stored event as the client's RunEvent again (facets stay JSON objects, as stored)."""
    def datasets(kind, items):
        return [kind(namespace=d["namespace"], name=d["name"], facets=d.get("facets", {})) for d in items or []]

    return RunEvent(eventType=RunState(body["eventType"]), eventTime=body["eventTime"], producer=body["producer"],
                    run=Run(runId=body["run"]["runId"], facets=body["run"].get("facets", {})),
                    job=Job(namespace=body["job"]["namespace"], name=body["job"]["name"]),
                    inputs=datasets(InputDataset, body.get("inputs")),
                    outputs=datasets(OutputDataset, body.get("outputs")))


def deliver(engine: sa.Engine, client: OpenLineageClient | None = None) -> int:
    """Send every stored event not yet delivered to the configured transport, oldest first; returns how many.

    Stops at the first event the transport cannot take, saying so in the log (the rest wait for the next call, in
    order): a release never fails because its lineage backend is down."""
    client = client or configured_client()
    if client is None:
        return 0
    with engine.connect() as conn:
        pending = conn.execute(sa.text(
            "SELECT e.event_id, e.event FROM governance.lineage_events e WHERE NOT EXISTS (SELECT 1 FROM "
            "governance.lineage_deliveries d WHERE d.event_id = e.event_id) ORDER BY e.event_id")).all()
    sent = 0
    for event_id, body in pending:
        try:
            client.emit(_as_event(body))
        except Exception as exc:  # noqa: BLE001 - any transport's failure (HTTP, file, Kafka, ...): it stays pending
            log.warning("lineage event %s not delivered (%s: %s); %d wait for `trajpub lineage deliver`",
                        event_id, type(exc).__name__, exc, len(pending) - sent)
            break
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO governance.lineage_deliveries (event_id, transport) VALUES (:e, :t) "
                                 "ON CONFLICT DO NOTHING"), {"e": event_id, "t": client.transport.kind})
        sent += 1
    return sent
