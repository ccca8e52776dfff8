"""How a release ends, recorded in governance: awaiting its steward, nothing released, aborted (blocked or
rejected), failed, decided, published, interrupted. Each is one transaction of :func:`tasks.db.transaction` (retried
while nothing is committed) with its lineage event; the release flow (flows/release.py) only calls these."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from tasks import governance, lineage, publish
from tasks.db import alive_lock_key, engine, is_transient, lock_is_held, transaction
from tasks.review import Review, read_review
from trajpub.errors import TrajpubError, one_line


def release(release_id: int) -> dict:
    """The release's row (refuses an unknown release)."""
    return transaction(lambda conn: governance.get_release(conn, release_id), f"read release {release_id}")


def approval(release_id: int) -> dict | None:
    """The steward's recorded decision on the release, if any."""
    return transaction(lambda conn: governance.approval(conn, release_id), f"read the decision on {release_id}")


def flow_alive(flow_run_id: str) -> bool:
    """Whether the flow process of ``flow_run_id`` still runs (it holds its alive lock)."""
    return transaction(lambda conn: lock_is_held(conn, alive_lock_key(flow_run_id)), "check a flow's alive lock")


def nothing_released(release_id: int, reason: str, run_id: str | None) -> None:
    """The mechanism released nothing: audited then blocked with ``reason``, and lineage ABORT."""
    def record(conn) -> None:
        governance.transition(conn, release_id, "audited", reason)
        governance.transition(conn, release_id, "blocked", reason)
        _abort(conn, release_id, "nothing was released", run_id)

    transaction(record, "record that nothing was released", say=print)


def await_steward(release_id: int) -> Review:
    """The release awaits its steward (only now, when its flow is about to wait for the answer); returns the
    review the steward is shown."""
    def record(conn) -> Review:
        governance.transition(conn, release_id, "awaiting_approval", None)
        return read_review(conn, release_id)

    return transaction(record, "await the steward", say=print)


def abort(release_id: int, why: str, run_id: str | None) -> None:
    """Lineage ABORT: the run ended without an output, by decision (the gate or the steward), not by an
    error."""
    transaction(lambda conn: _abort(conn, release_id, why, run_id), "record the abort", say=print)


def _abort(conn: sa.Connection, release_id: int, why: str, run_id: str | None) -> None:
    lineage.emit(conn, release_id, "ABORT", run_id=run_id, dataset=governance.get_release(conn, release_id)["dataset"],
                 facets={"outcome": {"status": why}})


def fail(release_id: int, exc: BaseException, run_id: str | None) -> None:
    """Mark the release failed with the reason (unless it has ended already), give back a reservation whose
    mechanism never ran, and emit lineage FAIL."""
    def record(conn) -> None:
        rel = governance.get_release(conn, release_id)
        if rel["status"] not in governance.FINAL:
            governance.transition(conn, release_id, "failed", str(exc))
        governance.release_reservation(conn, release_id, f"the release failed before its mechanism ran: {exc}")
        lineage.emit(conn, release_id, "FAIL", run_id=run_id, dataset=rel["dataset"],
                     error=f"{type(exc).__name__}: {exc}")

    transaction(record, "record the failure", say=print)


def decide(release_id: int, decision: str, comment: str | None, code: str | None) -> tuple[str, str]:
    """The steward's answer to the review form: (status, login). A decision ``trajpub approve/reject`` recorded
    already holds; else the form's is recorded with its one-time ``code`` (spent by this presentation:
    :func:`tasks.governance.decide_by_code`; a refusal is a PolicyError, the release still awaits)."""
    recorded = approval(release_id)
    if recorded is not None:
        return recorded["decision"], recorded["steward"]
    status = "approved" if decision == "approve" else "rejected"
    return status, governance.decide_by_code(engine(), release_id, status, comment, code or "")


def publish_or_fail(release_id: int, run_id: str | None) -> dict:
    """Publish an approved release (:func:`tasks.publish.publish`, idempotent). A publication the database
    refuses (a candidate that changed since it was sealed, sql/034) or that fails for another permanent reason
    publishes nothing and marks the release failed saying why; a transient database error leaves it approved
    (refused, one sentence: run ``trajpub recover`` again)."""
    try:
        table = publish.publish(engine(), release_id, run_id)
    except (TrajpubError, sa.exc.DBAPIError) as exc:
        if is_transient(exc):
            raise TrajpubError(f"release {release_id} could not be published now (the database did not answer); "
                               "it stays approved: run `trajpub recover` again", "publish") from None
        reason = f"publication failed: {one_line(exc)}"
        fail(release_id, TrajpubError(reason), run_id)
        return {"release_id": release_id, "status": "failed", "reason": reason}
    return {"release_id": release_id, "status": "published", "table": table}


def mark_interrupted(dataset: str | None, running: int | None, describe: Callable[[dict], str]) -> list[dict]:
    """Mark the releases whose flow process died mid-computation as failed (``describe(release)`` adds what
    Prefect knows of its run), except ``running``, and purge ended releases' staging past retention; returns the
    releases marked."""
    def sweep(conn) -> list[dict]:
        found = [r for r in governance.interrupted_releases(conn, dataset) if r["release_id"] != running]
        for rel in found:
            governance.mark_interrupted(conn, rel, describe(rel))
            print(f"release {rel['release_id']} was interrupted while '{rel['status']}'; marked failed")
        purged = governance.purge_expired_staging(conn)
        if purged:
            print(f"staging purged for ended releases past their retention: {purged}")
        return found

    return transaction(sweep, "recover interrupted releases", say=print)
