"""The release record in ``governance``: the status machine, results, approvals and the budget ledger."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from tasks import lineage
from tasks.db import alive_lock_key, lock_is_held
from trajpub.errors import PolicyError, TrajpubError

# planned → validated → protected → audited → blocked | awaiting_approval → approved | rejected → published
# → withdrawn; any non-final status → failed (with the reason). The moves are the table
# governance.release_status_moves, which a trigger enforces for every role (sql/014).
FINAL = {"blocked", "rejected", "published", "failed", "withdrawn"}
REFUSED = "TP001"  # the SQLSTATE of a governance rule the database enforces


@contextmanager
def refusals() -> Iterator[None]:
    """Turn a governance rule the database enforced (SQLSTATE TP001) into a one-sentence PolicyError."""
    try:
        yield
    except sa.exc.DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) != REFUSED:
            raise
        raise PolicyError(exc.orig.diag.message_primary, "governance") from None


def create_release(conn: sa.Connection, spec_record: dict, params: dict, guarantee: dict) -> int:
    row = conn.execute(sa.text(
        "INSERT INTO governance.releases (dataset, mechanism, params, spec, requested_by, window_start,"
        " window_end, guarantee) VALUES (:dataset, :mechanism, CAST(:params AS jsonb), CAST(:spec AS jsonb),"
        " :requested_by, :ws, :we, CAST(:guarantee AS jsonb)) RETURNING release_id"),
        {"dataset": spec_record["dataset"], "mechanism": spec_record["mechanism"], "params": json.dumps(params),
         "spec": json.dumps(spec_record), "requested_by": spec_record["requested_by"],
         "ws": spec_record["window_start"], "we": spec_record["window_end"],
         "guarantee": json.dumps(guarantee)}).scalar_one()
    conn.execute(sa.text("INSERT INTO governance.release_transitions (release_id, to_status, detail) "
                         "VALUES (:r, 'planned', 'release planned')"), {"r": row})
    return row


def transition(conn: sa.Connection, release_id: int, to: str, detail: str | None = None) -> None:
    """Move a release to ``to``; refuses moves the status machine does not allow (a steward's decision and a
    withdrawal are not moves of this kind: :func:`decide`, :func:`tasks.publish.withdraw`)."""
    current = conn.execute(sa.text("SELECT status FROM governance.releases WHERE release_id = :r FOR UPDATE"),
                           {"r": release_id}).scalar()
    if current is None:
        raise TrajpubError(f"release {release_id} does not exist", "governance.releases")
    allowed = conn.execute(sa.text("SELECT 1 FROM governance.release_status_moves WHERE from_status = :f AND "
                                   "to_status = :t"), {"f": current, "t": to}).scalar()
    if not allowed:
        raise TrajpubError(f"release {release_id} is '{current}' and cannot become '{to}'", "governance.releases")
    with refusals():
        conn.execute(sa.text(
            "UPDATE governance.releases SET status = :to, updated_at = now(),"
            " failure_reason = CASE WHEN :to = 'failed' THEN :detail ELSE failure_reason END"
            " WHERE release_id = :r"), {"to": to, "detail": detail, "r": release_id})
    conn.execute(sa.text("INSERT INTO governance.release_transitions (release_id, from_status, to_status, detail)"
                         " VALUES (:r, :f, :t, :d)"), {"r": release_id, "f": current, "t": to, "d": detail})


def update_release(conn: sa.Connection, release_id: int, **values: Any) -> None:
    """Set descriptive columns (flow_run_id, snapshot_hash, snapshot_points, published_table); the summary
    grows through :func:`merge_summary`."""
    allowed = {"flow_run_id", "snapshot_hash", "snapshot_points", "published_table"}
    if set(values) - allowed:
        raise ValueError(f"cannot update {sorted(set(values) - allowed)}")
    sets = ", ".join(f"{k} = :{k}" for k in values)
    conn.execute(sa.text(f"UPDATE governance.releases SET {sets}, updated_at = now() WHERE release_id = :r"),
                 {**values, "r": release_id})


def merge_summary(conn: sa.Connection, release_id: int, part: dict) -> None:
    """Merge ``part`` into the release's summary; non-finite numbers (which JSON cannot hold) become null."""
    conn.execute(sa.text("UPDATE governance.releases SET summary = summary || CAST(:p AS jsonb) "
                         "WHERE release_id = :r"), {"p": json.dumps(json_finite(part), default=str), "r": release_id})


def json_finite(value):
    """``value`` with every NaN or infinite float (at any depth of dicts, lists, tuples) replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_finite(v) for v in value]
    return value


def get_release(conn: sa.Connection, release_id: int) -> dict:
    row = conn.execute(sa.text("SELECT * FROM governance.releases WHERE release_id = :r"),
                       {"r": release_id}).mappings().first()
    if row is None:
        raise TrajpubError(f"release {release_id} does not exist", "governance.releases")
    return dict(row)


def list_releases(conn: sa.Connection, dataset: str | None = None, limit: int = 50) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT release_id, dataset, mechanism, status, requested_by, created_at, updated_at, published_table"
        " FROM governance.releases WHERE (CAST(:d AS text) IS NULL OR dataset = :d)"
        " ORDER BY release_id DESC LIMIT :n"), {"d": dataset, "n": limit}).mappings()]


def budget(conn: sa.Connection, dataset: str) -> tuple[float, float]:
    """(cap, spent) of a dataset's ε budget."""
    (cap, spent), _ = budgets(conn, dataset)
    return cap, spent


def budgets(conn: sa.Connection, dataset: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """((ε cap, ε spent), (δ cap, δ spent)) of a dataset."""
    caps = conn.execute(sa.text("SELECT epsilon_cap, delta_cap FROM governance.datasets WHERE dataset = :d"),
                        {"d": dataset}).first()
    if caps is None:
        raise TrajpubError(f"dataset '{dataset}' has not been loaded", "governance.datasets")
    eps, delta = conn.execute(sa.text("SELECT coalesce(sum(epsilon), 0), coalesce(sum(delta), 0) FROM "
                                      "governance.budget_ledger WHERE dataset = :d"), {"d": dataset}).one()
    return (float(caps[0]), float(eps)), (float(caps[1]), float(delta))


def charge_budget(conn: sa.Connection, release_id: int, dataset: str, mechanism: str, epsilon: float,
                  delta: float, privacy_unit: str, max_records_per_object: int | None = None) -> None:
    """Charge the ledger once per release (sequential composition: spent = Σ ε (and Σ δ) of every DP run on the
    raw data, published or not). The flow charges at plan, before any data is read: a reservation, given back by
    :func:`release_reservation` if the release fails before its mechanism runs. The database checks the caps
    under a lock on the dataset's row, so two releases cannot overspend together."""
    if conn.execute(sa.text("SELECT 1 FROM governance.budget_ledger WHERE release_id = :r AND entry_kind = 'charge'"),
                    {"r": release_id}).scalar():
        return
    try:
        with refusals():
            conn.execute(sa.text(
                "INSERT INTO governance.budget_ledger (dataset, release_id, mechanism, epsilon, delta, privacy_unit,"
                " max_records_per_object) VALUES (:d, :r, :m, :e, :dl, :u, :k)"),
                {"d": dataset, "r": release_id, "m": mechanism, "e": epsilon, "dl": delta, "u": privacy_unit,
                 "k": max_records_per_object})
    except PolicyError as exc:
        raise PolicyError(exc.message, "governance.budget_ledger") from None


def mark_mechanism_started(conn: sa.Connection, release_id: int) -> None:
    """Record that the mechanism is about to be given the data: from now on the reserved budget is spent."""
    conn.execute(sa.text("UPDATE governance.releases SET mechanism_started_at = clock_timestamp() "
                         "WHERE release_id = :r AND mechanism_started_at IS NULL"), {"r": release_id})


def release_reservation(conn: sa.Connection, release_id: int, reason: str) -> bool:
    """Give back the budget a release reserved at plan when its mechanism never ran: a compensating ledger row
    (the ledger is append-only; the database refuses it once the mechanism started). Returns whether it did."""
    return conn.execute(sa.text(
        "INSERT INTO governance.budget_ledger (dataset, release_id, mechanism, epsilon, delta, privacy_unit,"
        " max_records_per_object, entry_kind, reason) SELECT l.dataset, l.release_id, l.mechanism, -l.epsilon,"
        " -l.delta, l.privacy_unit, l.max_records_per_object, 'release', :why FROM governance.budget_ledger l"
        " JOIN governance.releases r USING (release_id) WHERE l.release_id = :r AND l.entry_kind = 'charge'"
        " AND r.mechanism_started_at IS NULL ON CONFLICT (release_id, entry_kind) DO NOTHING"),
        {"r": release_id, "why": reason}).rowcount > 0


def ledger(conn: sa.Connection, dataset: str | None = None) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT l.entry_id, l.dataset, l.release_id, l.entry_kind, l.mechanism, l.epsilon, l.delta, l.privacy_unit,"
        " l.max_records_per_object, l.charged_at, r.status FROM governance.budget_ledger l JOIN governance.releases r USING (release_id)"
        " WHERE (CAST(:d AS text) IS NULL OR l.dataset = :d) ORDER BY l.entry_id"), {"d": dataset}).mappings()]


def decide(conn: sa.Connection, release_id: int, decision: str, comment: str | None,
           code: str | None = None) -> str:
    """Record a steward's decision ('approved' or 'rejected') and move the release; returns the steward's login.

    Without ``code``, ``conn`` must be a steward's login (the CLI): the database records that login. With
    ``code`` (the Prefect UI form, answered in the flow as the pipeline role), the one-time code the steward
    issued with ``trajpub steward code`` names the login. Either way the database checks the status, four-eyes
    (the login against the requester) and that a rejection says why, and writes the append-only approval."""
    with refusals():
        if code is None:
            conn.execute(sa.text("SELECT governance.decide(:r, :d, :c)"),
                         {"r": release_id, "d": decision, "c": comment or ""})
            return conn.execute(sa.text("SELECT session_user")).scalar_one()
        return conn.execute(sa.text("SELECT governance.decide_with_code(:r, :d, :c, :k)"),
                            {"r": release_id, "d": decision, "c": comment or "", "k": code}).scalar_one()


def issue_decision_code(conn: sa.Connection, release_id: int) -> str:
    """A one-time code (valid one hour, for this release only) that carries the connected steward's login into
    the Prefect UI form."""
    with refusals():
        return conn.execute(sa.text("SELECT governance.issue_decision_code(:r)"), {"r": release_id}).scalar_one()


def approval(conn: sa.Connection, release_id: int) -> dict | None:
    row = conn.execute(sa.text("SELECT decision, steward, comment, decided_at FROM governance.approvals "
                               "WHERE release_id = :r"), {"r": release_id}).mappings().first()
    return dict(row) if row else None


COMPUTING = ("planned", "validated", "protected", "audited")


def interrupted_releases(conn: sa.Connection, dataset: str | None = None) -> list[dict]:
    """Releases left computing by a flow process that is gone: their status is one of :data:`COMPUTING` and
    nobody holds their flow run's alive lock (:func:`tasks.db.alive_lock_key`, held by the flow from before it
    records the release until it ends)."""
    rows = conn.execute(sa.text(
        "SELECT release_id, dataset, status, flow_run_id FROM governance.releases WHERE status = ANY(:s)"
        " AND flow_run_id IS NOT NULL AND (CAST(:d AS text) IS NULL OR dataset = :d) ORDER BY release_id"),
        {"s": list(COMPUTING), "d": dataset}).mappings().all()
    return [dict(r) for r in rows if not lock_is_held(conn, alive_lock_key(str(r["flow_run_id"])))]


def mark_interrupted(conn: sa.Connection, release: dict, detail: str = "") -> None:
    """Record that a release's flow process ended during ``release['status']``: status failed, lineage FAIL.
    Its reserved budget is given back only if its mechanism never started."""
    reason = (f"interrupted while '{release['status']}': the flow process (flow run {release['flow_run_id']}) "
              f"ended without recording an outcome{'; ' + detail if detail else ''}")
    transition(conn, release["release_id"], "failed", reason)
    release_reservation(conn, release["release_id"], reason)
    lineage.emit(conn, release["release_id"], "FAIL", run_id=str(release["flow_run_id"]),
                 dataset=release["dataset"], error=reason)
