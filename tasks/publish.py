"""Publish an approved release: one transaction writes the tables, the ``_latest`` views, lineage and status."""

from __future__ import annotations

import json

import pandas as pd
import psycopg
import psycopg.sql
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


def stage_candidate(conn: sa.Connection, release_id: int, points: pd.DataFrame, shape: Shape) -> int:
    """Store the mechanism's output (the published columns of its ``shape``: ``traj_id, seq, cell, t, lon,
    lat``; ``set_id`` for sets; for generalised samples the rectangle ``lon_min, lat_min, lon_max, lat_max`` and
    the span's end ``t_end``) for review, with COPY."""
    n = len(points)
    set_ids = points["set_id"] if shape.has_sets else [None] * n
    if shape is Shape.GENERALISED:
        regions = [f"SRID=4326;POLYGON(({a!r} {b!r}, {c!r} {b!r}, {c!r} {d!r}, {a!r} {d!r}, {a!r} {b!r}))"
                   for a, b, c, d in zip(points["lon_min"].astype(float), points["lat_min"].astype(float),
                                         points["lon_max"].astype(float), points["lat_max"].astype(float),
                                         strict=True)]
        t_end = points["t_end"]
    else:
        regions, t_end = [None] * n, [None] * n

    def value(x):
        return None if x is None or pd.isna(x) else x

    copy_rows(conn, "COPY staging.candidate_points (release_id, traj_id, seq, cell, t, set_id, t_end, region, geom)"
                    " FROM STDIN",
          ((release_id, int(traj), int(seq), None if pd.isna(cell) else int(cell), value(t),
            None if s is None or pd.isna(s) else int(s), value(te), region, f"SRID=4326;POINT({lon!r} {lat!r})")
           for traj, seq, cell, t, s, te, region, lon, lat in zip(
               points["traj_id"], points["seq"], points["cell"], points["t"], set_ids, t_end, regions,
               points["lon"], points["lat"], strict=True)))
    return n


def stage_owners(conn: sa.Connection, release_id: int, owners: pd.DataFrame) -> int:
    """Store which released trajectory is whose (``traj_id, object_id, source_traj_id``) in the private
    ``staging.candidate_owners``: the auditor's key, never published."""
    copy_rows(conn, "COPY staging.candidate_owners (release_id, traj_id, object_id, source_traj_id) FROM STDIN",
          ((release_id, int(t), str(o), int(s)) for t, o, s in zip(owners["traj_id"], owners["object_id"],
                                                                   owners["source_traj_id"], strict=True)))
    return len(owners)


def stage_fragments(conn: sa.Connection, release_id: int, fragments: pd.DataFrame) -> int:
    """Store an aggregate candidate: ``fragment_id, cells`` (sequence of cell ids), ``estimated_count``,
    ``round`` and ``lon``/``lat`` (the cell centres, same length as ``cells``)."""
    def geometry(lon, lat) -> str:
        coords = [f"{float(x)!r} {float(y)!r}" for x, y in zip(lon, lat, strict=True)]
        kind = "POINT" if len(coords) == 1 else "LINESTRING"
        return f"SRID=4326;{kind}({', '.join(coords)})"

    copy_rows(conn, "COPY staging.candidate_fragments (release_id, fragment_id, cells, estimated_count, round, geom)"
                " FROM STDIN",
          ((release_id, int(f), [int(c) for c in cells], float(n), int(r), geometry(lon, lat))
           for f, cells, n, r, lon, lat in zip(fragments["fragment_id"], fragments["cells"],
                                               fragments["estimated_count"], fragments["round"],
                                               fragments["lon"], fragments["lat"], strict=True)))
    return len(fragments)


def stage(conn: sa.Connection, release_id: int, result: CandidateRelease) -> None:
    """Store a candidate release for review: its product, its private owner key if it has one, and its shape in
    the release summary, which publication and withdrawal read."""
    governance.merge_summary(conn, release_id, {"shape": result.shape.value})
    if result.shape is Shape.FRAGMENTS:
        stage_fragments(conn, release_id, result.fragments)
    else:
        stage_candidate(conn, release_id, result.points, result.shape)
    if result.owners is not None:
        stage_owners(conn, release_id, result.owners)


def _create_trajectories(conn: sa.Connection, q, release_id: int, shape: Shape, points: str,
                         traj: str) -> tuple[dict, list]:
    set_col = "set_id, " if shape.has_sets else ""
    region_cols = "t_end, region::geometry(Polygon, 4326) AS region, " if shape is Shape.GENERALISED else ""
    conn.execute(sa.text(
        f"CREATE TABLE {q(points)} AS SELECT {set_col}traj_id, seq, t, {region_cols}geom::geometry(Point, 4326)"
        " AS geom FROM staging.candidate_points WHERE release_id = :r ORDER BY traj_id, seq"), {"r": release_id})
    conn.execute(sa.text(f"ALTER TABLE {q(points)} ADD PRIMARY KEY (traj_id, seq)"))
    conn.execute(sa.text(f"CREATE INDEX ON {q(points)} USING gist (geom)"))
    conn.execute(sa.text(
        f"CREATE TABLE {q(traj)} AS SELECT {set_col}traj_id, count(*)::int AS n_points,"
        " CASE WHEN count(*) > 1 THEN ST_MakeLine(ST_MakePointM(ST_X(geom), ST_Y(geom), seq) ORDER BY seq)"
        f" END::geometry(LineStringM, 4326) AS geom FROM {q(points)} GROUP BY {set_col}traj_id"))
    conn.execute(sa.text(f"ALTER TABLE {q(traj)} ADD PRIMARY KEY (traj_id)"))
    conn.execute(sa.text(f"CREATE INDEX ON {q(traj)} USING gist (geom)"))
    n_points = conn.execute(sa.text(f"SELECT count(*) FROM {q(points)}")).scalar_one()
    n_traj = conn.execute(sa.text(f"SELECT count(*) FROM {q(traj)}")).scalar_one()
    return {"points": n_points, "trajectories": n_traj}, [(points, ""), (traj, "_traj")]


def _create_fragments(conn: sa.Connection, q, release_id: int, fragments: str) -> tuple[dict, list]:
    conn.execute(sa.text(
        f"CREATE TABLE {q(fragments)} AS SELECT fragment_id, cells, cardinality(cells) AS length,"
        " estimated_count, round, geom FROM staging.candidate_fragments WHERE release_id = :r"
        " ORDER BY fragment_id"), {"r": release_id})
    conn.execute(sa.text(f"ALTER TABLE {q(fragments)} ADD PRIMARY KEY (fragment_id)"))
    conn.execute(sa.text(f"CREATE INDEX ON {q(fragments)} USING gist (geom)"))
    n = conn.execute(sa.text(f"SELECT count(*) FROM {q(fragments)}")).scalar_one()
    return {"fragments": n}, [(fragments, "_fragments")]


def point_latest_view(conn: sa.Connection, q, view: str, table: str) -> None:
    """(Re)create the ``_latest`` view on ``table`` in the caller's transaction, readable by the consumer. It is
    dropped first: the newest release may have another shape than the last (``set_id``, ``t_end``/``region``),
    and ``CREATE OR REPLACE VIEW`` cannot rename or drop columns (issue 16, finding 2)."""
    conn.execute(sa.text(f"DROP VIEW IF EXISTS {q(view)}"))
    conn.execute(sa.text(f"CREATE VIEW {q(view)} AS SELECT * FROM {q(table)}"))
    hand_over(conn, "VIEW", q(view))


def publish(engine: sa.Engine, release_id: int, run_id: str | None) -> str:
    """Publish an approved release; re-running it for a published release changes nothing.

    In one transaction: for trajectories, ``published.<dataset>__r<id>`` (points; ``set_id`` for anonymity
    sets and groups; ``t_end`` and the ``region`` polygon for generalised samples, whose ``t`` starts the span and
    ``geom`` is the region's centre) and ``..._traj`` (LineStringM, M = position in the trajectory; NULL for one-point trajectories) with
    the ``<dataset>_latest`` and ``<dataset>_latest_traj`` views; for fragments, ``published.<dataset>__r<id>``
    (cell sequences, estimated counts, LineString through the cell centres) with ``<dataset>_latest_fragments``;
    read access for the consumer role, the lineage COMPLETE event and the status ``published``. The private
    ``staging.candidate_owners`` is never copied.
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
        main, companion = table_names(rel["dataset"], release_id)
        q = lambda n: f"published.{quote(conn, n)}"
        summary = rel["summary"] or {}
        shape = Shape(summary["shape"])
        product = shape.product
        if shape is Shape.FRAGMENTS:
            counts, tables = _create_fragments(conn, q, release_id, main)
        else:
            counts, tables = _create_trajectories(conn, q, release_id, shape, main, companion)
        for table, suffix in tables:
            hand_over(conn, "TABLE", q(table))
            point_latest_view(conn, q, f"{rel['dataset']}_latest{suffix}", table)
        guarantee_text = (rel["guarantee"] or {}).get("statement", "")
        comment = (f"trajpub release {release_id} of {rel['dataset']} ({rel['mechanism']}, {product}). "
                   f"{guarantee_text} Lineage: published.release_lineage where release_id = {release_id}.")
        conn.connection.dbapi_connection.cursor().execute(psycopg.sql.SQL("COMMENT ON TABLE {} IS {}").format(
            psycopg.sql.Identifier("published", main), psycopg.sql.Literal(comment)))
        governance.update_release(conn, release_id, published_table=f"published.{main}")
        governance.merge_summary(conn, release_id, {"published": counts})
        governance.transition(conn, release_id, "published",
                              f"published.{main}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
        # verdicts, not figures: success rates, raw counts and sizes stay in governance (issue 14); each attack
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
                     outputs=[{"name": f"trajpub.published.{main}",
                               "facets": {"published_release": {"rows": counts, "product": product,
                                          "tables": [f"trajpub.published.{t}" for t, _ in tables]}}}],
                     facets={"mechanism": {"name": rel["mechanism"], "parameters": rel["params"],
                                           "metadata": lineage.public_metadata(summary.get("mechanism", {}))},
                             "guarantee": rel["guarantee"], "gate_policy": summary.get("gate_policy"),
                             "validation": dict(validation) if validation else None,
                             "audit": {"attacks": json.loads(json.dumps(audits, default=str)),
                                       **lineage.controls_facet(summary)},
                             "approval": json.loads(json.dumps(decision, default=str)),
                             "comparison": summary.get("comparison")})  # the comparison it was picked from
    return f"published.{main}"


def hand_over(conn: sa.Connection, kind: str, name: str) -> None:
    """Give a published table or view to the publisher group (the pipeline publishes, a steward withdraws) and
    let the consumer read it."""
    conn.execute(sa.text(f"ALTER {kind} {name} OWNER TO trajpub_publisher"))
    conn.execute(sa.text(f"GRANT SELECT ON {name} TO trajpub_consumer"))


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
    with engine.begin() as conn:  # governance.record_withdrawal locks the release row and checks it again
        rel = conn.execute(sa.text("SELECT * FROM governance.releases WHERE release_id = :r"),
                           {"r": release_id}).mappings().first()
        if rel is None:
            raise TrajpubError(f"release {release_id} does not exist", "governance.releases")
        if rel["status"] != "published":
            raise TrajpubError(f"release {release_id} is '{rel['status']}': only a published release can be "
                               "withdrawn", "governance.releases")
        q = lambda n: f"published.{quote(conn, n)}"
        product = Shape(rel["summary"]["shape"]).product
        main, companion = table_names(rel["dataset"], release_id)
        suffixes = {main: "_fragments"} if product == "fragments" else {main: "", companion: "_traj"}
        for table in suffixes:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {q(table)} CASCADE"))  # and the views on it
        newest = conn.execute(sa.text(
            "SELECT release_id FROM governance.releases WHERE dataset = :d AND status = 'published' AND"
            " release_id <> :r AND (summary->>'shape' = :f) = :fragments ORDER BY release_id DESC LIMIT 1"),
            {"d": rel["dataset"], "r": release_id, "f": Shape.FRAGMENTS.value,
             "fragments": product == "fragments"}).scalar()
        for table, suffix in suffixes.items():
            view = f"{rel['dataset']}_latest{suffix}"
            exists = conn.execute(sa.text("SELECT to_regclass(:v)"), {"v": q(view)}).scalar()
            if newest is not None and exists is None:
                point_latest_view(conn, q, view, table.replace(f"__r{int(release_id)}", f"__r{int(newest)}", 1))
        dropped = [f"published.{t}" for t in suffixes]
        with governance.refusals():
            conn.execute(sa.text("SELECT governance.record_withdrawal(:r, :w, :t)"),
                         {"r": release_id, "w": reason, "t": dropped})
        steward = conn.execute(sa.text("SELECT session_user")).scalar_one()
        lineage.emit(conn, release_id, "OTHER", run_id=None, dataset=rel["dataset"],
                     outputs=[{"name": f"trajpub.{t}", "facets": {"withdrawn_release": {"withdrawn": True}}} for t in dropped],
                     facets={"withdrawal": {"steward": steward, "reason": reason}})
    return dropped
