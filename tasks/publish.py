"""Stage a candidate for review; publish an approved release and withdraw a published one through the database's
publisher functions (sql/026), in one transaction with their lineage."""

from __future__ import annotations

import json

import pandas as pd
import sqlalchemy as sa

from tasks import governance, lineage
from tasks.db import copy_rows
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import TrajpubError
from trajpub.spec import validate_dataset_name


def quote(conn: sa.Connection, name: str) -> str:
    return conn.dialect.identifier_preparer.quote(name)


def table_names(dataset: str, release_id: int) -> tuple[str, str]:
    """(main table, companion table) in ``published``: points and LineStringM trajectories, or fragments and
    (no companion) for an aggregate release."""
    validate_dataset_name(dataset)
    base = f"{dataset}__r{int(release_id)}"
    return base, f"{base}_traj"


def _value(x):
    return None if x is None or (not isinstance(x, list | tuple) and pd.isna(x)) else x


def _int(x):
    return None if _value(x) is None else int(x)


def _point(lon, lat) -> str:
    return f"SRID=4326;POINT({float(lon)!r} {float(lat)!r})"


def _line(lon, lat) -> str:
    """The fragment's cell centres: a point for one cell, else a LineString through them."""
    coords = [f"{float(x)!r} {float(y)!r}" for x, y in zip(lon, lat, strict=True)]
    return f"SRID=4326;{'POINT' if len(coords) == 1 else 'LINESTRING'}({', '.join(coords)})"


def _region(a, b, c, d) -> str:
    a, b, c, d = (float(v) for v in (a, b, c, d))
    return f"SRID=4326;POLYGON(({a!r} {b!r}, {c!r} {b!r}, {c!r} {d!r}, {a!r} {d!r}, {a!r} {b!r}))"


#: How each staged column is made from the candidate's frame: (the frame's columns it reads, the conversion).
STAGED_COLUMNS = {
    "traj_id": (("traj_id",), int), "seq": (("seq",), int), "cell": (("cell",), _int), "t": (("t",), _value),
    "set_id": (("set_id",), _int), "t_end": (("t_end",), _value),
    "region": (("lon_min", "lat_min", "lon_max", "lat_max"), _region),
    "fragment_id": (("fragment_id",), int), "cells": (("cells",), lambda cells: [int(c) for c in cells]),
    "estimated_count": (("estimated_count",), float), "round": (("round",), int),
}


def stage_rows(conn: sa.Connection, release_id: int, frame: pd.DataFrame, shape: Shape) -> int:
    """Store the candidate's ``frame`` (its points, or its fragments) for review with COPY: the staging columns
    of its ``shape`` (:class:`trajpub.candidate.Behaviour`), each made from the frame by :data:`STAGED_COLUMNS`;
    ``geom`` is the point at ``lon, lat`` (for fragments, the LineString through the cell centres)."""
    table, columns = shape.behaviour.staging
    geom = _line if shape.product == "fragments" else _point
    makers = [STAGED_COLUMNS.get(c, (("lon", "lat"), geom)) for c in columns]
    values = [[make(*args) for args in zip(*(frame[c] for c in reads), strict=True)] for reads, make in makers]
    copy_rows(conn, f"COPY staging.{table} (release_id, {', '.join(columns)}) FROM STDIN",
              ((release_id, *row) for row in zip(*values, strict=True)))
    return len(frame)


def stage_owners(conn: sa.Connection, release_id: int, owners: pd.DataFrame) -> int:
    """Store which released trajectory is whose (``traj_id, object_id, source_traj_id``) in the private
    ``staging.candidate_owners``: the auditor's key, never published."""
    copy_rows(conn, "COPY staging.candidate_owners (release_id, traj_id, object_id, source_traj_id) FROM STDIN",
          ((release_id, int(t), str(o), int(s)) for t, o, s in zip(owners["traj_id"], owners["object_id"],
                                                                   owners["source_traj_id"], strict=True)))
    return len(owners)


def stage(conn: sa.Connection, release_id: int, result: CandidateRelease) -> dict:
    """Store a candidate release for review: its product, its private owner key if it has one, and its shape in
    the release summary, which publication and withdrawal read; then seal it (``governance.seal_candidate``,
    sql/034: its row count and content digest, which publication checks again). Returns the seal ``{rows,
    hash}``."""
    governance.merge_summary(conn, release_id, {"shape": result.shape.value})
    stage_rows(conn, release_id, result.fragments if result.shape.product == "fragments" else result.points,
               result.shape)
    if result.owners is not None:
        stage_owners(conn, release_id, result.owners)
    with governance.refusals():
        return conn.execute(sa.text("SELECT governance.seal_candidate(:r)"), {"r": release_id}).scalar_one()


def publish(engine: sa.Engine, release_id: int, run_id: str | None) -> str:
    """Publish an approved release; re-running it for a published release changes nothing.

    In one transaction: ``governance.publish_release`` (sql/026; a function of the publisher role, which no login
    can act as) copies the staged candidate to ``published.<dataset>__r<id>`` (points; ``set_id`` for anonymity
    sets and groups; ``t_end`` and the ``region`` polygon for generalised samples, whose ``t`` starts the span and
    ``geom`` is the region's centre) and ``..._traj`` (LineStringM, M = position in the trajectory; NULL for
    one-point trajectories) with the ``<dataset>_latest`` and ``<dataset>_latest_traj`` views; for fragments,
    ``published.<dataset>__r<id>`` (cell sequences, estimated counts, LineString through the cell centres) with
    ``<dataset>_latest_fragments``; grants read access to the consumer role and sets the status ``published``.
    Then the lineage COMPLETE event. The private ``staging.candidate_owners`` is never copied.
    """
    with engine.begin() as conn:
        rel = conn.execute(sa.text("SELECT * FROM governance.releases WHERE release_id = :r FOR UPDATE"),
                           {"r": release_id}).mappings().first()
        if rel is None:
            raise TrajpubError(f"release {release_id} does not exist", "governance.releases")
        if rel["status"] == "published":
            return rel["published_table"]
        decision = governance.approval(conn, release_id)
        if rel["status"] != "approved" or not decision or decision["decision"] != "approved":
            raise TrajpubError(f"release {release_id} is '{rel['status']}': only an approved release is published",
                               "governance.approvals")
        summary = rel["summary"] or {}
        product = Shape(summary["shape"]).product
        with governance.refusals():  # the tables, views, grants and status: the database's publisher (sql/026)
            made = conn.execute(sa.text("SELECT governance.publish_release(:r)"), {"r": release_id}).scalar_one()
        governance.ended(conn, release_id)
        table, tables, counts = made["table"], made["tables"], made["counts"]
        # verdicts, not figures: success rates, raw counts and sizes stay in governance; each attack
        # once per cell size it ran at (NULL: an attack that reads no grid)
        audits = [dict(r) for r in conn.execute(sa.text(
            "SELECT attack, NULLIF(resolution_m, 0) AS resolution_m, threshold, outcome, passed "
            "FROM governance.audit_results WHERE release_id = :r ORDER BY attack, resolution_m"),
            {"r": release_id}).mappings()]
        validation = conn.execute(sa.text("SELECT suite, success FROM governance.validation_results "
                                          "WHERE release_id = :r"), {"r": release_id}).mappings().first()
        snapshot = {k: v for k, v in summary.get("snapshot", {}).items()
                    if k in ("dataset", "window_start", "window_end", "content_hash")}
        lineage.emit(conn, release_id, "COMPLETE", run_id=run_id, dataset=rel["dataset"],
                     inputs=[{"name": "trajpub.raw.points", "facets": {"snapshot": snapshot}}],
                     outputs=[{"name": f"trajpub.{table}",
                               "facets": {"published_release": {"rows": counts, "product": product,
                                          "tables": [f"trajpub.published.{t}" for t in tables]}}}],
                     facets={"mechanism": {"name": rel["mechanism"], "parameters": rel["params"],
                                           "metadata": lineage.public_metadata(summary.get("mechanism", {}))},
                             "guarantee": rel["guarantee"], "gate_policy": summary.get("gate_policy"),
                             "validation": dict(validation) if validation else None,
                             "audit": {"attacks": json.loads(json.dumps(audits, default=str)),
                                       **lineage.controls_facet(summary)},
                             "approval": json.loads(json.dumps(decision, default=str)),
                             "comparison": summary.get("comparison")})  # the comparison it was picked from
    return table


def withdraw(engine: sa.Engine, release_id: int, reason: str) -> list[str]:
    """Withdraw a published release in one transaction; returns the tables dropped.

    The release's published tables go (with the ``_latest`` views that pointed at them, which are re-created on
    the newest remaining published release of the same dataset and product, if any). Its lineage events,
    approval and ledger entries stay: the ε it spent is not given back. ``engine`` is a steward's login, which the
    database records with the withdrawal (append-only) as it moves the status to ``withdrawn``; a lineage OTHER
    event names it too.
    """
    if not reason.strip():
        raise TrajpubError("a withdrawal needs a reason", "withdraw --reason")
    with engine.begin() as conn:  # governance.withdraw_release locks the release row and checks it again
        rel = conn.execute(sa.text("SELECT * FROM governance.releases WHERE release_id = :r"),
                           {"r": release_id}).mappings().first()
        if rel is None:
            raise TrajpubError(f"release {release_id} does not exist", "governance.releases")
        if rel["status"] != "published":
            raise TrajpubError(f"release {release_id} is '{rel['status']}': only a published release can be "
                               "withdrawn", "governance.releases")
        with governance.refusals():  # the tables, the views and the withdrawal: the database's publisher (sql/026)
            dropped = conn.execute(sa.text("SELECT governance.withdraw_release(:r, :w)"),
                                   {"r": release_id, "w": reason}).scalar_one()
        steward = conn.execute(sa.text("SELECT session_user")).scalar_one()
        lineage.emit(conn, release_id, "OTHER", run_id=None, dataset=rel["dataset"],
                     outputs=[{"name": f"trajpub.{t}", "facets": {"withdrawn_release": {"withdrawn": True}}} for t in dropped],
                     facets={"withdrawal": {"steward": steward, "reason": reason}})
    return dropped
