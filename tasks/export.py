"""Export a published release to a file a consumer can take away: GeoParquet, GeoPackage or FlatGeobuf.

Everything is read as the consumer role, from what a consumer may read (``published.*`` and the
``published.release_lineage`` view), so an export can carry nothing the database would not show the consumer.
Each file carries the release card (release id, dataset, mechanism and parameters, guarantee, utility verdict,
approval, lineage run id) as metadata under the key ``trajpub``: GeoParquet in the Parquet schema metadata,
GeoPackage and FlatGeobuf in the layer's metadata (GDAL's default domain).

Layers, by product: ``points`` (one row per released point: ``traj_id, seq, t`` and ``set_id`` for anonymity
sets and groups; for generalised samples the geometry is the published ``region`` with ``t``..``t_end``) and
``trajectories`` (one 2-D LineString per trajectory with its first and last time), or ``fragments`` (cell
sequences with their estimated counts). GeoPackage holds every layer in one file; GeoParquet and FlatGeobuf
hold one layer per file, the trajectories next to the points as ``<name>_trajectories<suffix>``.
"""

from __future__ import annotations

import json
from pathlib import Path

import geopandas as gpd
import pyarrow.parquet as pq
import pyogrio
import pyogrio.errors
import sqlalchemy as sa

from tasks.publish import quote, table_names
from trajpub.candidate import Shape
from trajpub.errors import TrajpubError

FORMATS = {"geoparquet": ".parquet", "gpkg": ".gpkg", "flatgeobuf": ".fgb"}
METADATA_KEY = "trajpub"


def release_card(conn: sa.Connection, release_id: int) -> dict:
    """What a consumer may know about a published release (the ``published.release_lineage`` row), as JSON-able
    values; refuses a release that is not published."""
    row = conn.execute(sa.text("SELECT * FROM published.release_lineage WHERE release_id = :r"),
                       {"r": release_id}).mappings().first()
    if row is None:
        raise TrajpubError(f"release {release_id} is not published (only a published release can be exported)",
                           "published.release_lineage")
    return json.loads(json.dumps(dict(row), default=str))


def _layers(conn: sa.Connection, card: dict) -> dict[str, gpd.GeoDataFrame]:
    """The release's layers, read as its shape's export reader says (:class:`trajpub.candidate.Behaviour`): the
    product's main layer, and for trajectories their LineStrings with their first and last time."""
    shape = Shape(card["shape"])
    main, companion = table_names(card["dataset"], card["release_id"])
    q = lambda n: f"published.{quote(conn, n)}"
    behaviour = shape.behaviour
    first = gpd.read_postgis(f"SELECT {behaviour.export_select} FROM {q(main)} ORDER BY {behaviour.export_order}",
                             conn, geom_col="geom")
    if shape.product == "fragments":
        return {"fragments": first}
    sets = "l.set_id, " if shape.has_sets else ""
    trajectories = gpd.read_postgis(
        f"SELECT {sets}l.traj_id, l.n_points, p.t_start, p.t_end, ST_Force2D(l.geom) AS geom FROM {q(companion)} l"
        f" JOIN (SELECT traj_id, min(t) AS t_start, max(t) AS t_end FROM {q(main)} GROUP BY traj_id) p"
        " USING (traj_id) ORDER BY l.traj_id", conn, geom_col="geom")
    return {"points": first, "trajectories": trajectories}


def _paths(out: Path, fmt: str, layers: list[str]) -> dict[str, Path]:
    if fmt == "gpkg":
        return {name: out for name in layers}
    first, *rest = layers
    return {first: out, **{name: out.with_name(f"{out.stem}_{name}{out.suffix or FORMATS[fmt]}") for name in rest}}


def _write(frame: gpd.GeoDataFrame, path: Path, fmt: str, layer: str, metadata: str) -> None:
    if fmt == "geoparquet":
        frame.to_parquet(path)
        table = pq.read_table(path)  # geopandas writes the "geo" key; the release card goes beside it
        pq.write_table(table.replace_schema_metadata({**table.schema.metadata, METADATA_KEY.encode(): metadata}),
                       path)
    elif fmt == "gpkg":
        pyogrio.write_dataframe(frame, path, driver="GPKG", layer=layer, layer_metadata={METADATA_KEY: metadata})
    else:  # FlatGeobuf's spatial index cannot hold a missing geometry (a one-point trajectory has no LineString)
        pyogrio.write_dataframe(frame, path, driver="FlatGeobuf", layer=layer,
                                layer_metadata={METADATA_KEY: metadata},
                                layer_options={"SPATIAL_INDEX": "YES" if frame.geometry.notna().all() else "NO"})


def _check_free(paths: dict[str, Path]) -> None:
    """Refuse a file that exists (never overwritten), a symbolic link (a dangling one too: writing would follow it
    out of the folder) and a folder that does not exist, before anything is written."""
    files = sorted(set(paths.values()))
    taken = [str(p) for p in files if p.is_symlink() or p.exists()]
    if taken:
        raise TrajpubError(f"{', '.join(taken)} already exists (a file, folder or symbolic link); choose another "
                           "--out", "export --out")
    for path in files:
        if not path.parent.is_dir():
            raise TrajpubError(f"the folder {path.parent} does not exist", f"export --out {path}")


def export_release(engine: sa.Engine, release_id: int, fmt: str, out: Path) -> dict[str, Path]:
    """Write a published release to ``out`` in ``fmt`` (a key of :data:`FORMATS`); returns each layer's file.

    ``engine`` is the consumer's login (the CLI's), so the export needs no more rights than a consumer has. An
    existing file or link is refused rather than overwritten or followed; a file that cannot be written is
    one sentence naming it, and what this export wrote is removed."""
    if fmt not in FORMATS:
        raise TrajpubError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}", "export --format")
    if not Path(out).name or Path(out).name in (".", ".."):
        raise TrajpubError(f"--out names the file to write, not a folder; got {str(out)!r}", "export --out")
    with engine.begin() as conn:
        card = release_card(conn, release_id)
        layers = _layers(conn, card)
    paths = _paths(Path(out), fmt, list(layers))
    _check_free(paths)
    metadata = json.dumps(card, sort_keys=True)
    for name, frame in layers.items():
        try:
            _write(frame, paths[name], fmt, name, metadata)
        except (OSError, pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError) as exc:
            for path in set(paths.values()):
                path.unlink(missing_ok=True)
            raise TrajpubError(f"the {name} layer cannot be written: {str(exc)[:200]}", f"file {paths[name]}") from None
    return paths

