"""Snapshots: pinned, content-hashed, windowed, and read by object partitions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tasks import ingest
from tasks.load import load_source

pytestmark = pytest.mark.integration


def test_snapshot_hash_is_stable_and_changes_with_the_content(engine, loaded_tdrive, tmp_path):
    dataset = loaded_tdrive("snap")
    first, objects = ingest.take_snapshot(engine, dataset, None, None)
    again, _ = ingest.take_snapshot(engine, dataset, None, None)
    assert again == first and first.n_points == sum(c for _, c in objects) and first.n_objects == 40
    extra = tmp_path / "one_more_taxi.csv"
    extra.write_text("taxi_id,datetime,longitude,latitude\n9999,2008-02-03 10:00:00,116.4,39.9\n")
    load_source(engine, "tdrive", extra, dataset)
    grown, _ = ingest.take_snapshot(engine, dataset, None, None)
    assert grown.n_points == first.n_points + 1 and grown.content_hash != first.content_hash
    assert grown.max_point_id > first.max_point_id
    day = ingest.take_snapshot(engine, dataset, datetime(2008, 2, 3, tzinfo=UTC),
                               datetime(2008, 2, 4, tzinfo=UTC))[0]
    assert 0 < day.n_points < grown.n_points
    # the partitions hold exactly the pinned points, whole objects per partition
    parts = ingest.partition_objects(objects, 3)
    frames = [ingest.parse_partition(ingest.partition_csv(ingest.psycopg_dsn(engine), first.filter_params(), p))
              for p in parts]
    assert sum(len(f) for f in frames) == first.n_points
    assert all(set(f["object_id"]) == set(p) for f, p in zip(frames, parts, strict=True))
