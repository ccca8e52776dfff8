"""The public-inputs step: read the road network and the POIs a release's spec names, before the mechanism runs
(and before the plan charges its budget, so that a missing network refuses the release with nothing spent).

A mechanism names what it reads (:meth:`trajpub.mechanism.Mechanism.public_inputs`): ``road_network`` (a network
of ``roads.networks``, in the release grid's metric CRS) and ``pois`` (``("pbf", path or bundled name)`` read by
:mod:`trajpub.osm`, or ``("postgis", name)``, a POI set of ``roads.pois`` within the grid's bbox). Its parameters
are then completed with what was found (:meth:`~trajpub.mechanism.Mechanism.resolved`: the sources the guarantee
names).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tasks import roads, windows
from trajpub.grid import GridSpec
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.osm import pois_from_pbf
from trajpub.spec import ReleaseSpec
from trajpub.window import ReleaseWindow


def resolve(engine: sa.Engine, mechanism: Mechanism, params: Any, grid: GridSpec,
            spec: ReleaseSpec | None = None) -> tuple[Any, PublicInputs]:
    """(the parameters completed, the public inputs) of a release of ``mechanism`` over ``grid``; with the release's
    ``spec``, its window (both ends set) and the dataset's time zone, in which synthetic timestamps are placed."""
    wanted = mechanism.public_inputs(params)
    found: dict[str, Any] = {}
    if spec is not None and spec.window_start and spec.window_end:
        with engine.connect() as conn:
            found["window"] = ReleaseWindow(spec.window_start, spec.window_end,
                                            windows.dataset_timezone(conn, spec.dataset) or "UTC")
    if wanted.get("road_network"):
        info, found["road_network"] = roads.road_network(engine, wanted["road_network"], grid.crs)
        found["road_network_source"] = roads.SOURCE_FOR_GUARANTEE[info["source"]]
    if wanted.get("pois"):
        kind, value = wanted["pois"]
        if kind == "pbf":
            found["pois"], found["pois_source"] = pois_from_pbf(value), f"OpenStreetMap extract {value} (pyrosm)"
        else:
            with engine.connect() as conn:
                info = roads.poi_set_info(conn, value)
            found["pois"] = roads.read_pois(engine, value, grid.bbox)
            found["pois_source"] = f"POI set {value} in PostGIS ({info['description']})"
    inputs = PublicInputs(grid, **found)
    return mechanism.resolved(params, inputs), inputs
