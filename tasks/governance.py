"""The release record in ``governance``: the status machine, results, approvals and the budget ledger."""

from __future__ import annotations

import json
import math
from typing import Any

import sqlalchemy as sa

from tasks import lineage
from tasks.db import alive_lock_key, lock_is_held
from trajpub.errors import PolicyError, TrajpubError

# planned → validated → protected → audited → blocked | awaiting_approval → approved | rejected → published
# → withdrawn; any non-final status → failed (with the reason).
TRANSITIONS: dict[str, set[str]] = {
    "planned": {"validated"},
    "validated": {"protected"},
    "protected": {"audited"},
    "audited": {"blocked", "awaiting_approval"},
    "awaiting_approval": {"approved", "rejected"},
    "approved": {"published"},
    "published": {"withdrawn"},
}
FINAL = {"blocked", "rejected", "published", "failed", "withdrawn"}


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
    """Move a release to ``to``; refuses transitions the status machine does not allow."""
    current = conn.execute(sa.text("SELECT status FROM governance.releases WHERE release_id = :r FOR UPDATE"),
                           {"r": release_id}).scalar()
    if current is None:
        raise TrajpubError(f"release {release_id} does not exist", "governance.releases")
    allowed = TRANSITIONS.get(current, set()) | ({"failed"} if current not in FINAL else set())
    if to not in allowed:
        raise TrajpubError(f"release {release_id} is '{current}' and cannot become '{to}'", "governance.releases")
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


def budget(conn: sa.Connection, dataset: str, lock: bool = False) -> tuple[float, float]:
    """(cap, spent) of a dataset's ε budget; ``lock`` holds the dataset row until commit."""
    (cap, spent), _ = budgets(conn, dataset, lock)
    return cap, spent


def budgets(conn: sa.Connection, dataset: str, lock: bool = False) -> tuple[tuple[float, float],
                                                                           tuple[float, float]]:
    """((ε cap, ε spent), (δ cap, δ spent)) of a dataset; ``lock`` holds the dataset row until commit."""
    caps = conn.execute(sa.text("SELECT epsilon_cap, delta_cap FROM governance.datasets WHERE dataset = :d"
                                + (" FOR UPDATE" if lock else "")), {"d": dataset}).first()
    if caps is None:
        raise TrajpubError(f"dataset '{dataset}' has not been loaded", "governance.datasets")
    eps, delta = conn.execute(sa.text("SELECT coalesce(sum(epsilon), 0), coalesce(sum(delta), 0) FROM "
                                      "governance.budget_ledger WHERE dataset = :d"), {"d": dataset}).one()
    return (float(caps[0]), float(eps)), (float(caps[1]), float(delta))


def check_budget(conn: sa.Connection, dataset: str, epsilon: float, delta: float = 0.0, lock: bool = False) -> None:
    """Refuse a release whose ε or δ would pass the dataset's cap (sequential composition of the ledger:
    the ε and the δ of every charged run add up)."""
    (cap, spent), (delta_cap, delta_spent) = budgets(conn, dataset, lock=lock)
    if spent + epsilon > cap + 1e-12:
        raise PolicyError(f"this release needs epsilon {epsilon:g} but dataset '{dataset}' has only "
                          f"{cap - spent:g} of its cap {cap:g} left", "governance.budget_ledger")
    if delta > 0 and delta_spent + delta > delta_cap * (1 + 1e-12):
        raise PolicyError(f"this release needs delta {delta:g} but dataset '{dataset}' has only "
                          f"{max(delta_cap - delta_spent, 0):g} of its delta cap {delta_cap:g} left",
                          "governance.budget_ledger")


def charge_budget(conn: sa.Connection, release_id: int, dataset: str, mechanism: str, epsilon: float,
                  delta: float, privacy_unit: str, max_records_per_object: int | None = None) -> None:
    """Charge the ledger under a row lock on the dataset, so that two releases cannot overspend together
    (sequential composition: spent = Σ ε (and Σ δ) of every DP run on the raw data, published or not). The
    flow charges at plan, before any data is read: a reservation, given back by :func:`release_reservation`
    if the release fails before its mechanism runs."""
    check_budget(conn, dataset, epsilon, delta, lock=True)
    conn.execute(sa.text(
        "INSERT INTO governance.budget_ledger (dataset, release_id, mechanism, epsilon, delta, privacy_unit,"
        " max_records_per_object) VALUES (:d, :r, :m, :e, :dl, :u, :k) ON CONFLICT (release_id, entry_kind) DO NOTHING"),
        {"d": dataset, "r": release_id, "m": mechanism, "e": epsilon, "dl": delta, "u": privacy_unit,
         "k": max_records_per_object})


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


def check_four_eyes(conn: sa.Connection, release_id: int, steward: str) -> None:
    """Refuse an approval by the release's own requester when its dataset has the four-eyes policy (the
    database enforces the same rule on ``governance.approvals``; this check gives the clear error first)."""
    row = conn.execute(sa.text(
        "SELECT r.requested_by, d.four_eyes FROM governance.releases r JOIN governance.datasets d USING (dataset)"
        " WHERE r.release_id = :r"), {"r": release_id}).first()
    if row and row.four_eyes and row.requested_by == steward:
        raise PolicyError(f"four-eyes policy: {steward} requested release {release_id} and cannot approve it; "
                          "another steward must", "approve --steward")


def record_decision(conn: sa.Connection, release_id: int, decision: str, steward: str, comment: str | None) -> None:
    """Record a steward's decision as the steward role (the database enforces who may write approvals, that
    they are append-only, and the four-eyes policy)."""
    if decision not in ("approved", "rejected"):
        raise TrajpubError(f"decision must be 'approved' or 'rejected', not {decision!r}", "approval")
    if not steward or not steward.strip():
        raise TrajpubError("a decision needs the steward's name", "approval --steward")
    if decision == "rejected" and not (comment and comment.strip()):
        raise TrajpubError("a rejection needs a comment saying why", "reject --comment")
    existing = conn.execute(sa.text("SELECT decision, steward FROM governance.approvals WHERE release_id = :r"),
                            {"r": release_id}).first()
    if existing:
        raise TrajpubError(f"release {release_id} was already {existing[0]} by {existing[1]}",
                           "governance.approvals")
    if decision == "approved":
        check_four_eyes(conn, release_id, steward)
    transition(conn, release_id, decision, f"{decision} by {steward}" + (f": {comment}" if comment else ""))
    conn.execute(sa.text("SET LOCAL ROLE trajpub_steward"))
    conn.execute(sa.text("INSERT INTO governance.approvals (release_id, decision, steward, comment) "
                         "VALUES (:r, :d, :s, :c)"), {"r": release_id, "d": decision, "s": steward, "c": comment})
    conn.execute(sa.text("RESET ROLE"))


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
