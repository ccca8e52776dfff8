"""Publish an approved release: one transaction writes the tables, the ``_latest`` views, lineage and status."""

from __future__ import annotations

import json

import pandas as pd
import psycopg
import psycopg.sql
import sqlalchemy as sa

from tasks import governance, lineage
from trajpub.errors import TrajpubError
from trajpub.spec import validate_dataset_name


def quote(conn: sa.Connection, name: str) -> str:
    return conn.dialect.identifier_preparer.quote(name)


def table_names(dataset: str, release_id: int) -> tuple[str, str]:
    """(points table, trajectories table) in ``published``."""
    validate_dataset_name(dataset)
    base = f"{dataset}__r{int(release_id)}"
    return base, f"{base}_traj"


def stage_candidate(conn: sa.Connection, release_id: int, points: pd.DataFrame) -> int:
    """Store the mechanism's output (``traj_id, seq, cell, t, lon, lat``) for review, with COPY."""
    raw = conn.connection.dbapi_connection
    assert isinstance(raw, psycopg.Connection)
    with raw.cursor() as cur, cur.copy("COPY staging.candidate_points (release_id, traj_id, seq, cell, t, geom) "
                                       "FROM STDIN") as cp:
        for traj, seq, cell, t, lon, lat in zip(points["traj_id"], points["seq"], points["cell"], points["t"],
                                                points["lon"], points["lat"], strict=True):
            cp.write_row((release_id, int(traj), int(seq), None if pd.isna(cell) else int(cell),
                          None if pd.isna(t) else t, f"SRID=4326;POINT({lon!r} {lat!r})"))
    return len(points)


def publish(engine: sa.Engine, release_id: int, run_id: str | None) -> str:
    """Publish an approved release; re-running it for a published release changes nothing.

    In one transaction: ``published.<dataset>__r<id>`` (points) and ``..._traj`` (LineStringM, M = position in
    the trajectory; NULL for one-point trajectories), the ``<dataset>_latest`` and ``<dataset>_latest_traj``
    views, read access for the consumer role, the lineage COMPLETE event and the status ``published``.
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
        points, traj = table_names(rel["dataset"], release_id)
        q = lambda n: f"published.{quote(conn, n)}"
        conn.execute(sa.text(
            f"CREATE TABLE {q(points)} AS SELECT traj_id, seq, t, geom::geometry(Point, 4326) AS geom"
            " FROM staging.candidate_points WHERE release_id = :r ORDER BY traj_id, seq"), {"r": release_id})
        conn.execute(sa.text(f"ALTER TABLE {q(points)} ADD PRIMARY KEY (traj_id, seq)"))
        conn.execute(sa.text(f"CREATE INDEX ON {q(points)} USING gist (geom)"))
        conn.execute(sa.text(
            f"CREATE TABLE {q(traj)} AS SELECT traj_id, count(*)::int AS n_points,"
            " CASE WHEN count(*) > 1 THEN ST_MakeLine(ST_MakePointM(ST_X(geom), ST_Y(geom), seq) ORDER BY seq)"
            f" END::geometry(LineStringM, 4326) AS geom FROM {q(points)} GROUP BY traj_id"))
        conn.execute(sa.text(f"ALTER TABLE {q(traj)} ADD PRIMARY KEY (traj_id)"))
        conn.execute(sa.text(f"CREATE INDEX ON {q(traj)} USING gist (geom)"))
        latest, latest_traj = f"{rel['dataset']}_latest", f"{rel['dataset']}_latest_traj"
        conn.execute(sa.text(f"CREATE OR REPLACE VIEW {q(latest)} AS SELECT * FROM {q(points)}"))
        conn.execute(sa.text(f"CREATE OR REPLACE VIEW {q(latest_traj)} AS SELECT * FROM {q(traj)}"))
        for name in (points, traj, latest, latest_traj):
            conn.execute(sa.text(f"GRANT SELECT ON {q(name)} TO trajpub_consumer"))
        guarantee_text = (rel["guarantee"] or {}).get("statement", "")
        comment = (f"trajpub release {release_id} of {rel['dataset']} ({rel['mechanism']}). {guarantee_text} "
                   f"Lineage: published.release_lineage where release_id = {release_id}.")
        conn.connection.dbapi_connection.cursor().execute(psycopg.sql.SQL("COMMENT ON TABLE {} IS {}").format(
            psycopg.sql.Identifier("published", points), psycopg.sql.Literal(comment)))
        n_points = conn.execute(sa.text(f"SELECT count(*) FROM {q(points)}")).scalar_one()
        n_traj = conn.execute(sa.text(f"SELECT count(*) FROM {q(traj)}")).scalar_one()
        governance.update_release(conn, release_id, published_table=f"published.{points}")
        governance.merge_summary(conn, release_id, {"published": {"points": n_points, "trajectories": n_traj}})
        governance.transition(conn, release_id, "published", f"published.{points}: {n_traj} trajectories")
        audits = [dict(r) for r in conn.execute(sa.text(
            "SELECT attack, success_rate, ci_low, ci_high, baseline, risk, threshold, passed "
            "FROM governance.audit_results WHERE release_id = :r"), {"r": release_id}).mappings()]
        validation = conn.execute(sa.text("SELECT suite, success, n_rows, n_quarantined FROM "
                                          "governance.validation_results WHERE release_id = :r"),
                                  {"r": release_id}).mappings().first()
        summary = rel["summary"] or {}
        lineage.emit(conn, release_id, "COMPLETE", run_id=run_id, dataset=rel["dataset"],
                     inputs=[{"name": "trajpub.raw.points", "facets": {"snapshot": summary.get("snapshot", {})}}],
                     outputs=[{"name": f"trajpub.published.{points}",
                               "facets": {"rows": {"points": n_points, "trajectories": n_traj},
                                          "companion": f"trajpub.published.{traj}"}}],
                     facets={"mechanism": {"name": rel["mechanism"], "parameters": rel["params"],
                                           "metadata": summary.get("mechanism", {})},
                             "guarantee": rel["guarantee"],
                             "validation": dict(validation) if validation else None,
                             "audit": json.loads(json.dumps(audits, default=str)),
                             "approval": json.loads(json.dumps(decision, default=str))})
    return f"published.{points}"
