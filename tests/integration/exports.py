"""The export of a published release, checked the way a consumer would use it: every format round-trips through
geopandas with the release card in the file's metadata."""

from __future__ import annotations

import json
import re
from pathlib import Path

import geopandas as gpd
import pyarrow.parquet as pq
import pyogrio
import sqlalchemy as sa

from tasks.db import database_url
from tasks.db import engine as db_engine
from tasks.export import FORMATS, export_release
from trajpub import config


def consumer_engine() -> sa.Engine:
    """The consumer's own login, as a data user connects."""
    return db_engine(database_url(config.CONSUMER))


def card_of(path: Path, layer: str) -> dict:
    """The ``trajpub`` metadata as a consumer reads it: Parquet schema metadata or GDAL layer metadata."""
    if path.suffix == ".parquet":
        return json.loads(pq.read_schema(path).metadata[b"trajpub"])
    return json.loads(pyogrio.read_info(path, layer=layer)["layer_metadata"]["trajpub"])


def check_exports(release_id: int, folder: Path, layers: dict[str, str]) -> None:
    """Export ``release_id`` in every format into ``folder`` and check each layer (name -> published table)
    against the database: same rows, same geometries, and the card of ``published.release_lineage``; all as the
    consumer's login."""
    engine = consumer_engine()
    with engine.connect() as conn:
        expected_card = dict(conn.execute(sa.text("SELECT release_id, mechanism, guarantee, lineage_run_id FROM "
                                                  "published.release_lineage WHERE release_id = :r"),
                                          {"r": release_id}).mappings().one())
        counts = {name: tuple(conn.execute(sa.text(f"SELECT count(*), count(geom) FROM {table}")).one())
                  for name, table in layers.items()}  # a one-point trajectory has no LineString
    assert expected_card["lineage_run_id"]
    for fmt, suffix in FORMATS.items():
        written = export_release(engine, release_id, fmt, folder / f"r{release_id}{suffix}")
        assert sorted(written) == sorted(layers)
        for name, path in written.items():
            frame = (gpd.read_parquet(path) if fmt == "geoparquet" else gpd.read_file(path, layer=name))
            assert (len(frame), frame.geometry.notna().sum()) == counts[name], (fmt, name)
            assert frame.crs.to_epsg() == 4326
            card = card_of(path, name)
            assert {k: card[k] for k in expected_card} == json.loads(json.dumps(expected_card, default=str))
            assert not re.search(r'"[a-z_]*seed": ', json.dumps(card))  # no seed under any key
