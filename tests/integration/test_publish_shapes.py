"""Every approved release is publishable: the ``<dataset>_latest`` views follow the newest
release whatever its shape, for every ordered pair of product shapes, at the SQL level of tasks/publish.py (tiny
candidates staged directly); and ``trajpub recover`` fails an approved release it cannot publish, saying why."""

from __future__ import annotations

import itertools

import pytest
import sqlalchemy as sa

from tasks import governance, publish
from tasks.db import database_url
from tests.integration.conftest import cli
from tests.integration.staged import SHAPES, approved_release, new_dataset

pytestmark = pytest.mark.integration


def columns(engine, relation: str) -> list[str]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(sa.text(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'published' AND "
            "table_name = :t ORDER BY ordinal_position"), {"t": relation})]


@pytest.mark.parametrize(("first", "second"), list(itertools.product(SHAPES, SHAPES)))
def test_the_latest_views_follow_a_change_of_shape(engine, first, second):
    dataset = new_dataset(engine)
    r1 = approved_release(engine, dataset, first)
    publish.publish(engine, r1, None)
    r2 = approved_release(engine, dataset, second)
    assert publish.publish(engine, r2, None) == f"published.{dataset}__r{r2}"
    with engine.connect() as conn:
        assert [governance.get_release(conn, r)["status"] for r in (r1, r2)] == ["published", "published"]
    newest = {}  # view suffix -> the release it must show: the newest of its product
    for rid, shape in ((r1, first), (r2, second)):
        suffixes = ["_fragments"] if shape == "fragments" else ["", "_traj"]
        newest.update({s: rid for s in suffixes})
    for suffix, rid in newest.items():
        table = f"{dataset}__r{rid}" + ("_traj" if suffix == "_traj" else "")
        assert columns(engine, f"{dataset}_latest{suffix}") == columns(engine, table)
        with sa.create_engine(database_url("trajpub_consumer")).connect() as conn:
            n_view = conn.execute(sa.text(f'SELECT count(*) FROM published."{dataset}_latest{suffix}"')).scalar()
            n_table = conn.execute(sa.text(f'SELECT count(*) FROM published."{table}"')).scalar()
        assert n_view == n_table > 0


def test_recover_fails_an_approved_release_it_cannot_publish_saying_why(engine, owner):
    dataset = new_dataset(engine)
    rid = approved_release(engine, dataset, "trajectories")
    with owner.begin() as conn:  # something already holds the release's table name: publication cannot succeed
        conn.execute(sa.text(f'CREATE TABLE published."{dataset}__r{rid}" (x int)'))
    out = cli("recover", "--dataset", dataset)
    assert out.returncode == 0, out.stderr
    assert f"release {rid} was approved but not published; now failed: publication failed:" in out.stdout
    assert "already exists" in out.stdout and "Traceback" not in out.stdout + out.stderr
    assert "1 could not be published and failed" in out.stdout
    with engine.connect() as conn:
        rel = governance.get_release(conn, rid)
        events = [r[0] for r in conn.execute(sa.text(
            "SELECT event_type FROM governance.lineage_events WHERE release_id = :r"), {"r": rid})]
    assert rel["status"] == "failed" and rel["failure_reason"].startswith("publication failed:")
    assert events == ["FAIL"]
    again = cli("recover", "--dataset", dataset)  # nothing is left approved
    assert again.returncode == 0 and "0 approved release(s) published" in again.stdout


def test_a_late_publication_that_fails_ends_its_flow_run_failed_not_completed(engine, owner):
    """``trajpub publish-approved`` of an approved release whose table name is taken: the release fails saying
    why, the command exits non-zero, and its Prefect flow run ends Failed (a green Completed would tell the
    Prefect UI that it was published)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    dataset = new_dataset(engine)
    rid = approved_release(engine, dataset, "trajectories")
    with owner.begin() as conn:
        conn.execute(sa.text(f'CREATE TABLE published."{dataset}__r{rid}" (x int)'))
    out = cli("publish-approved", str(rid))
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"release {rid} was not published: publication failed:" in out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["publish-approved"])),
                                     sort=FlowRunSort.START_TIME_DESC, limit=50)
    states = [r.state for r in runs if r.parameters.get("release_id") == rid]
    assert len(states) == 1 and states[0].type.value == "FAILED", states
    assert "was approved and not published" in states[0].message


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_shape_exports_as_its_shape_says(engine, shape, tmp_path):
    """The export reads the release's shape from the consumer's card (not from the columns it finds): every
    format holds the shape's layers, with a generalised sample's regions as its points' geometry."""
    import geopandas as gpd

    from tests.integration.exports import check_exports

    dataset = new_dataset(engine)
    rid = approved_release(engine, dataset, shape)
    table = publish.publish(engine, rid, None)
    layers = {"fragments": table} if shape == "fragments" else {"points": table, "trajectories": f"{table}_traj"}
    check_exports(rid, tmp_path, layers)
    first = gpd.read_parquet(tmp_path / f"r{rid}.parquet")
    kinds = {"trajectories": {"Point"}, "anonymity_sets": {"Point"}, "generalised": {"Polygon"},
             "fragments": {"Point", "LineString"}}[shape]
    assert set(first.geom_type) <= kinds and len(first) > 0
    assert ("set_id" in first) == (shape in ("anonymity_sets", "generalised"))
    assert ("t_end" in first) == (shape == "generalised")
