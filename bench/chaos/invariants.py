"""The invariants the chaos bench checks after every fault (after ``trajpub recover`` and ``trajpub verify``), in
SQL on the private cluster as its owner, each violation named with what and where:

``status``     every release is terminal, or resumable: awaiting approval (its flow alive or not: a steward's
               ``approve`` publishes it either way), or computing/approved with its flow process alive and a status
               that changed within ``hung_s``; a computing or approved release whose flow is gone after
               ``recover`` is one recover missed; one alive past ``hung_s`` is hung.
``ledger``     at most one charge and one give-back per release, and a give-back only for a failed release whose
               mechanism never started.
``published``  a published release has its table; no other release has one (nothing half-published).
``rows``       a published table holds the rows its seal counted (``trajpub verify`` checks the same through
               ``tasks.chains.release_breaks``).
``staging``    no staged rows left for a release that ended before the last ``recover`` longer ago than its
               dataset's staging retention.
``chains``     ``trajpub verify`` exits 0 (the hash chains and every published release's chain of evidence).
``slot``       no dataset's release slot (or load lock) is held by a session while no release of that dataset is
               computing with its flow alive.

Facts that race with the running releases (status, slot) count only when a second look ``recheck_s`` later still
finds them."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from tasks.db import alive_lock_key, dataset_lock_key, release_lock_key
from tasks.governance import COMPUTING, FINAL, STAGING_TABLES


@dataclass(frozen=True)
class Violation:
    invariant: str
    where: str
    what: str


def _alive(conn: sa.Connection, flow_run_id) -> bool:
    """Whether a session holds the flow run's alive lock (tried and given back at once, as ``trajpub recover``)."""
    if flow_run_id is None:
        return False
    key = alive_lock_key(str(flow_run_id))
    if conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
        conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
        return False
    return True


def releases(conn: sa.Connection) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT r.release_id, r.dataset, r.status, r.flow_run_id, r.published_table, r.mechanism_started_at,"
        " r.staging_purged_at, extract(epoch FROM now() - coalesce((SELECT max(t.at) FROM"
        " governance.release_transitions t WHERE t.release_id = r.release_id), r.created_at)) AS still_s,"
        " (SELECT max(t.at) FROM governance.release_transitions t WHERE t.release_id = r.release_id) AS ended_at"
        " FROM governance.releases r ORDER BY r.release_id")).mappings()]


def status_problems(conn: sa.Connection, hung_s: float, deciding: set[int]) -> dict[tuple, Violation]:
    """``deciding``: releases a steward's ``approve``/``reject`` command is carrying out now (an approved release
    whose flow is gone is published by that command)."""
    found = {}
    for r in releases(conn):
        if r["status"] in FINAL or r["status"] == "awaiting_approval":
            continue
        where = f"release {r['release_id']} ({r['dataset']}, '{r['status']}')"
        if not _alive(conn, r["flow_run_id"]) and r["release_id"] not in deciding:
            found[("status", r["release_id"], r["status"])] = Violation(
                "status", where, "its flow process is gone and `trajpub recover` left it "
                f"'{r['status']}' (neither terminal nor resumable)")
        elif r["still_s"] > hung_s:
            found[("hung", r["release_id"], r["status"])] = Violation(
                "hung", where, f"its flow is alive but it has been '{r['status']}' for {r['still_s']:.0f} s "
                f"(bound {hung_s:.0f} s)")
    return found


def ledger_problems(conn: sa.Connection) -> list[Violation]:
    out = []
    for rid, kind, n in conn.execute(sa.text(
            "SELECT release_id, entry_kind, count(*) FROM governance.budget_ledger GROUP BY 1, 2 HAVING count(*) > 1")):
        out.append(Violation("ledger", f"release {rid}", f"{n} ledger rows of kind '{kind}' (at most one)"))
    for rid, status, started in conn.execute(sa.text(
            "SELECT r.release_id, r.status, r.mechanism_started_at FROM governance.budget_ledger l JOIN"
            " governance.releases r USING (release_id) WHERE l.entry_kind = 'release'"
            " AND (r.status <> 'failed' OR r.mechanism_started_at IS NOT NULL)")):
        out.append(Violation("ledger", f"release {rid}", f"a give-back for a release '{status}' whose mechanism "
                                                         f"started at {started}"))
    return out


def published_problems(conn: sa.Connection, rels: list[dict]) -> list[Violation]:
    out = []
    by_id = {r["release_id"]: r for r in rels}
    tables = {t for (t,) in conn.execute(sa.text(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'published'"
        " AND table_type = 'BASE TABLE'"))}
    for table in sorted(tables):
        found = re.search(r"__r(\d+)(_traj)?$", table)
        if not found:
            continue
        rel = by_id.get(int(found.group(1)))
        if rel is None or rel["status"] != "published":
            out.append(Violation("published", f"published.{table}",
                                 f"a table of release {found.group(1)}, which is "
                                 f"'{rel['status'] if rel else 'unknown'}' (half-published)"))
    for r in rels:
        if r["status"] != "published":
            continue
        name = (r["published_table"] or "").split(".", 1)[-1]
        if name not in tables:
            out.append(Violation("published", f"release {r['release_id']}",
                                 f"published, but its table {r['published_table']!r} does not exist"))
            continue
        sealed = conn.execute(sa.text("SELECT n_rows FROM governance.candidate_seals WHERE release_id = :r"),
                              {"r": r["release_id"]}).scalar()
        quoted = conn.dialect.identifier_preparer.quote(name)
        rows = conn.execute(sa.text(f"SELECT count(*) FROM published.{quoted}")).scalar()
        if rows != sealed:
            out.append(Violation("rows", f"release {r['release_id']}",
                                 f"published.{name} holds {rows} rows, its seal {sealed}"))
    return out


def staging_problems(conn: sa.Connection, rels: list[dict], recovered_at) -> list[Violation]:
    out = []
    retention = dict(conn.execute(sa.text("SELECT dataset, staging_retention_days FROM governance.datasets")).all())
    for r in rels:
        if r["status"] not in FINAL or retention.get(r["dataset"], 0) > 0 or r["ended_at"] is None \
                or r["ended_at"] >= recovered_at:
            continue
        left = sum(conn.execute(sa.text(f"SELECT count(*) FROM {t} WHERE release_id = :r"),
                                {"r": r["release_id"]}).scalar() for t in STAGING_TABLES)
        if left:
            out.append(Violation("staging", f"release {r['release_id']} ('{r['status']}')",
                                 f"{left} staged rows left after it ended and `recover` ran (retention 0 days)"))
    return out


def slot_problems(conn: sa.Connection, datasets: list[str]) -> dict[tuple, Violation]:
    held = {(int(c), int(o)) for c, o in conn.execute(sa.text(
        "SELECT classid, objid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"))}
    rels = releases(conn)
    found = {}
    for dataset in datasets:
        running = [r for r in rels if r["dataset"] == dataset and r["status"] in COMPUTING
                   and _alive(conn, r["flow_run_id"])]
        for what, key in (("release slot", release_lock_key(dataset)), ("load lock", dataset_lock_key(dataset))):
            unsigned = key & 0xFFFFFFFFFFFFFFFF
            if (unsigned >> 32, unsigned & 0xFFFFFFFF) in held and not running:
                found[("slot", dataset, what)] = Violation("slot", f"dataset {dataset}",
                                                           f"its {what} is held with no release computing")
    return found


def check(engine: sa.Engine, datasets: list[str], recovered_at, verify: Callable[[], list[str]],
          deciding: Callable[[], set[int]], hung_s: float, recheck_s: float = 5.0) -> list[Violation]:
    """Every invariant once (``verify()``: the problems ``trajpub verify`` printed, empty when it exited 0;
    ``deciding()``: the releases a steward's command is deciding now); the racy ones confirmed by a second look."""
    with engine.connect() as conn:
        conn.execute(sa.text("SET statement_timeout = '60s'"))
        rels = releases(conn)
        out = [*ledger_problems(conn), *published_problems(conn, rels),
               *staging_problems(conn, rels, recovered_at)]
        racy = status_problems(conn, hung_s, deciding()) | slot_problems(conn, datasets)
        conn.commit()
    out += [Violation("chains", "trajpub verify", p) for p in verify()]
    if racy:
        time.sleep(recheck_s)
        with engine.connect() as conn:
            again = status_problems(conn, hung_s, deciding()) | slot_problems(conn, datasets)
            conn.commit()
        out += [v for k, v in racy.items() if k in again]
    return out
