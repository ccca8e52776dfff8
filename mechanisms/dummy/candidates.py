"""Candidate alternative locations of the dummy mechanism, indexed by 0.001° lon/lat cell ([S-code] grid).

Candidates are public: points of a public road network (its vertices and points at a fixed spacing along its
edges) or, without a network, the centres of a fixed subdivision of each cell. Never other people's points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import shapely

from trajpub.roads import RoadNetwork

_LON_OFFSET, _LAT_OFFSET, _LAT_SPAN = 200_000_000, 100_000_000, 400_000_000


def cell_keys(lon: np.ndarray, lat: np.ndarray, cell_deg: float) -> np.ndarray:
    """One int64 key per (lon, lat) cell of side ``cell_deg`` degrees: floor(lon/c), floor(lat/c) packed."""
    ix = np.floor(np.asarray(lon, float) / cell_deg).astype(np.int64)
    iy = np.floor(np.asarray(lat, float) / cell_deg).astype(np.int64)
    return (ix + _LON_OFFSET) * _LAT_SPAN + (iy + _LAT_OFFSET)


def _unpack(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return keys // _LAT_SPAN - _LON_OFFSET, keys % _LAT_SPAN - _LAT_OFFSET


@dataclass(frozen=True, eq=False)
class Candidates:
    """Candidate points sorted by cell key: metric ``x, y`` (the release CRS), ``lon, lat``, the road
    ``component`` (connected component of the network, -1 when there is no network) and ``source``
    ("road_network" or "subcells")."""

    key: np.ndarray
    x: np.ndarray
    y: np.ndarray
    lon: np.ndarray
    lat: np.ndarray
    component: np.ndarray
    source: str

    @classmethod
    def build(cls, key, x, y, lon, lat, component, source: str) -> Candidates:
        order = np.lexsort((y, x, key))
        return cls(np.asarray(key)[order], np.asarray(x, float)[order], np.asarray(y, float)[order],
                   np.asarray(lon, float)[order], np.asarray(lat, float)[order],
                   np.asarray(component, np.int64)[order], source)

    def __len__(self) -> int:
        return len(self.key)

    def slices(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(start, end)`` of each key's candidates."""
        return np.searchsorted(self.key, keys, "left"), np.searchsorted(self.key, keys, "right")


def road_candidates(network: RoadNetwork, unproject: Callable, cell_deg: float, spacing_m: float) -> Candidates:
    """The network's vertices and points every ``spacing_m`` metres along its edges (each edge divided into
    ceil(length/spacing) equal parts), duplicates at shared vertices removed; ``unproject(x, y)`` gives lon/lat
    (the release grid's)."""
    n_parts = np.maximum(1, np.ceil(network.length_m / spacing_m).astype(np.int64))
    edge = np.repeat(np.arange(network.n_edges), n_parts + 1)
    start = np.cumsum(n_parts + 1) - (n_parts + 1)
    j = np.arange(len(edge)) - np.repeat(start, n_parts + 1)
    along = j / n_parts[edge] * network.length_m[edge]
    xy = shapely.get_coordinates(shapely.line_interpolate_point(network.geometry[edge], along))
    _, first = np.unique(np.round(xy, 2), axis=0, return_index=True)
    first = np.sort(first)
    x, y, edge = xy[first, 0], xy[first, 1], edge[first]
    lon, lat = unproject(x, y)
    comp = network.components[network.source_index[edge]]
    return Candidates.build(cell_keys(lon, lat, cell_deg), x, y, lon, lat, comp, "road_network")


def subcell_candidates(keys: np.ndarray, cell_deg: float, subcells: int, project: Callable) -> Candidates:
    """The centres of the ``subcells × subcells`` sub-cells of each listed cell; ``project(lon, lat)`` gives
    metric x, y (the release grid's)."""
    keys = np.unique(np.asarray(keys, np.int64))
    ix, iy = _unpack(keys)
    frac = (np.arange(subcells) + 0.5) / subcells
    fx, fy = np.meshgrid(frac, frac, indexing="ij")
    lon = ((ix[:, None] + fx.ravel()[None, :]) * cell_deg).ravel()
    lat = ((iy[:, None] + fy.ravel()[None, :]) * cell_deg).ravel()
    x, y = project(lon, lat)
    key = cell_keys(lon, lat, cell_deg)  # equals the listed cell: centres lie strictly inside it
    return Candidates.build(key, np.asarray(x), np.asarray(y), lon, lat, np.full(len(key), -1), "subcells")
