"""Points of interest for KLT: a clearly-labelled synthetic generator for experiments, and the POI grid with
per-category summed-area tables (OpenStreetMap POIs are read by :mod:`trajpub.osm`).

A POI frame has columns ``lon, lat, category`` (category one of the strings in
:data:`trajpub.osm.CATEGORIES` or any other label: the grid takes the categories it is given).
``frame.attrs["poi_source"]`` says where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from trajpub.errors import ParameterError
from trajpub.osm import poi_frame


def synthetic_pois(bbox: tuple[float, float, float, float], n: int, categories: int | tuple[str, ...],
                   rng: np.random.Generator) -> pd.DataFrame:
    """SYNTHETIC POIs, for experiments only (there is no offline POI data for T-Drive's Beijing): ``n`` points
    uniform in ``bbox`` (lon/lat), categories uniform among ``categories`` (a count, labelled ``synthetic_0``..,
    or names). Uniform POIs make every region's category distribution close to the city-wide one once it holds
    enough POIs, so l-diversity and t-closeness only force regions to a size of about that many POIs: the result
    says nothing about real semantic protection. ``attrs["poi_source"]`` starts with ``"synthetic"``."""
    names = tuple(f"synthetic_{i}" for i in range(categories)) if isinstance(categories, int) else tuple(categories)
    if n < 1 or not names:
        raise ParameterError("synthetic POIs need n >= 1 and at least one category", "klt.pois")
    lon = rng.uniform(bbox[0], bbox[2], n)
    lat = rng.uniform(bbox[1], bbox[3], n)
    cat = np.asarray(names, dtype=object)[rng.integers(0, len(names), n)]
    return poi_frame(lon, lat, cat, f"synthetic (uniform, n={n}, {len(names)} categories)")


@dataclass(frozen=True)
class PoiGrid:
    """POI counts per category on a grid of ``cell_deg`` degrees over ``bbox`` (the "city"), as summed-area
    tables so that the counts in any rectangle of cells cost O(categories).

    ``prefix[c, r, q]`` = number of POIs of category c in rows < r and columns < q. ``city`` is the city-wide
    category distribution (all POIs in ``bbox``)."""

    bbox: tuple[float, float, float, float]
    cell_deg: float
    n_rows: int
    n_cols: int
    categories: tuple[str, ...]
    prefix: np.ndarray
    city: np.ndarray

    @classmethod
    def build(cls, pois: pd.DataFrame, bbox: tuple[float, float, float, float], cell_deg: float) -> PoiGrid:
        """The grid of the POIs inside ``bbox``; a :class:`ParameterError` when there are none."""
        min_lon, min_lat, max_lon, max_lat = bbox
        inside = pois["lon"].between(min_lon, max_lon) & pois["lat"].between(min_lat, max_lat)
        pois = pois[inside & pois["category"].notna()]
        if len(pois) == 0:
            raise ParameterError(f"no POI falls inside {tuple(bbox)}: KLT needs POIs covering the data's area",
                                 "klt.pois")
        n_cols = max(1, int(np.ceil((max_lon - min_lon) / cell_deg)))
        n_rows = max(1, int(np.ceil((max_lat - min_lat) / cell_deg)))
        if n_cols * n_rows > 20_000_000:
            raise ParameterError(f"the POI grid would have {n_cols * n_rows} cells; use a larger poi_cell_deg",
                                 "klt.poi_cell_deg")
        codes, categories = pd.factorize(pois["category"], sort=True)
        col = np.minimum(((pois["lon"].to_numpy() - min_lon) / cell_deg).astype(np.int64), n_cols - 1)
        row = np.minimum(((pois["lat"].to_numpy() - min_lat) / cell_deg).astype(np.int64), n_rows - 1)
        prefix = np.zeros((len(categories), n_rows + 1, n_cols + 1), dtype=np.int32)
        np.add.at(prefix, (codes, row + 1, col + 1), 1)
        np.cumsum(prefix, axis=1, out=prefix)
        np.cumsum(prefix, axis=2, out=prefix)
        totals = np.bincount(codes, minlength=len(categories)).astype(float)
        return cls(tuple(bbox), float(cell_deg), n_rows, n_cols, tuple(map(str, categories)), prefix,
                   totals / totals.sum())

    def cells_of(self, lon_min, lat_min, lon_max, lat_max) -> tuple[np.ndarray, ...]:
        """The cell rectangles (col0, row0, col1, row1, inclusive) covering boxes in degrees, clipped to the grid."""
        x0, y0 = self.bbox[0], self.bbox[1]

        def idx(v, origin, n):
            return np.clip(np.floor((np.asarray(v, dtype=float) - origin) / self.cell_deg), 0, n - 1).astype(np.int64)

        return (idx(lon_min, x0, self.n_cols), idx(lat_min, y0, self.n_rows), idx(lon_max, x0, self.n_cols),
                idx(lat_max, y0, self.n_rows))

    def counts(self, c0: np.ndarray, r0: np.ndarray, c1: np.ndarray, r1: np.ndarray) -> np.ndarray:
        """POI counts per category (shape ``n x categories``) in the inclusive cell rectangles."""
        p = self.prefix
        out = p[:, r1 + 1, c1 + 1] - p[:, r0, c1 + 1] - p[:, r1 + 1, c0] + p[:, r0, c0]
        return out.T.astype(np.int64)

    def box_of(self, c0, r0, c1, r1) -> tuple[np.ndarray, ...]:
        """The degree box (lon_min, lat_min, lon_max, lat_max) of cell rectangles."""
        x0, y0, d = self.bbox[0], self.bbox[1], self.cell_deg
        return x0 + c0 * d, y0 + r0 * d, x0 + (c1 + 1) * d, y0 + (r1 + 1) * d
