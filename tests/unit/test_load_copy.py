"""tasks.load's COPY input: points as hex EWKB that PostGIS reads as the same geometry, blocks in load order."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow.csv as pacsv
import shapely

from tasks import load


def test_hex_ewkb_points_is_what_shapely_writes_for_the_same_points_with_srid_4326():
    lon = np.array([116.3, -0.0, 180.0, 116.123456789012345, -179.999999])
    lat = np.array([39.9, 0.0, -90.0, 1e-300, 89.5])
    expected = shapely.to_wkb(shapely.set_srid(shapely.points(lon, lat), 4326), hex=True, include_srid=True,
                              byte_order=1)
    assert [h.upper() for h in load.hex_ewkb_points(lon, lat).to_pylist()] == list(expected)


def test_the_points_csv_blocks_keep_load_order_and_every_value(monkeypatch):
    monkeypatch.setattr(load, "POINTS_PER_BLOCK", 2)  # 5 points: blocks of 2, 2 and 1
    points = pd.DataFrame({
        "source_line": [5, 1, 4, 2, 3],
        "object_id": ["b", "a", 'quo"te,', "a", "é"],
        "t": pd.to_datetime(["2008-02-03 01:02:03.000004", "2008-02-02", "2008-02-04 23:59:59", "2008-02-02 00:00:01",
                             "2008-02-05"], utc=True, format="ISO8601"),
        "lon": [116.1, 116.2, 116.3, 116.4, 116.5],
        "lat": [39.1, 39.2, 39.3, 39.4, 39.5],
    })
    blocks = list(load._points_csv_blocks(points, "ds", 7))
    assert len(blocks) == 3
    back = pacsv.read_csv(io.BytesIO(b"".join(blocks)), read_options=pacsv.ReadOptions(
        column_names=["dataset", "source_id", "source_line", "object_id", "t", "geom"]),
        convert_options=pacsv.ConvertOptions(column_types={"object_id": "string", "t": "string", "geom": "string"}),
    ).to_pandas()
    assert back["dataset"].tolist() == ["ds"] * 5 and back["source_id"].tolist() == [7] * 5
    assert back["source_line"].tolist() == [5, 1, 4, 2, 3]
    assert back["object_id"].tolist() == ["b", "a", 'quo"te,', "a", "é"]
    assert pd.to_datetime(back["t"], utc=True, format="ISO8601").tolist() == points["t"].tolist()
    xy = shapely.get_coordinates(shapely.from_wkb(back["geom"].tolist()))
    assert xy.tolist() == points[["lon", "lat"]].to_numpy().tolist()
