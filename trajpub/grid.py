"""Local metric projection and the regular grid that turns points into discrete locations.

The grid is a *public* parameter (Chen et al. 2012, Sec. III: the location universe L must not depend on the
data), so it is defined by a bounding box the release spec gives, never by the extent of the data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cached_property

import numpy as np
from pyproj import CRS, Transformer

from trajpub.errors import ParameterError

BOUNDARY_SAMPLES = 1025  # points per bbox edge whose projections bound the grid


@dataclass(frozen=True)
class GridSpec:
    """A square grid of ``cell_size_m`` metres over ``bbox = (min_lon, min_lat, max_lon, max_lat)``.

    Coordinates are projected with an azimuthal equidistant projection centred on the bbox centre, which keeps
    distances within a city-sized box accurate to well under 1%.
    """

    bbox: tuple[float, float, float, float]
    cell_size_m: float

    def __post_init__(self) -> None:
        min_lon, min_lat, max_lon, max_lat = self.bbox
        if not (-180 <= min_lon < max_lon <= 180 and -90 <= min_lat < max_lat <= 90):
            raise ParameterError(f"bbox {self.bbox} is not (min_lon, min_lat, max_lon, max_lat) in degrees",
                                 "grid.bbox")
        if not self.cell_size_m > 0:
            raise ParameterError(f"cell_size_m must be positive, got {self.cell_size_m}", "grid.cell_size_m")
        if self.n_cells > 10_000_000:
            raise ParameterError(f"the grid would have {self.n_cells} cells; use a larger cell size",
                                 "grid.cell_size_m")

    @cached_property
    def proj4(self) -> str:
        """The projection as a PROJ string (PostGIS's ``ST_Transform(geom, text)`` takes it)."""
        min_lon, min_lat, max_lon, max_lat = self.bbox
        lon0, lat0 = (min_lon + max_lon) / 2, (min_lat + max_lat) / 2
        return f"+proj=aeqd +lat_0={lat0} +lon_0={lon0} +x_0=0 +y_0=0 +datum=WGS84 +units=m"

    @cached_property
    def crs(self) -> CRS:
        return CRS.from_proj4(self.proj4)

    @cached_property
    def _forward(self) -> Transformer:
        return Transformer.from_crs("EPSG:4326", self.crs, always_xy=True)

    @cached_property
    def _inverse(self) -> Transformer:
        return Transformer.from_crs(self.crs, "EPSG:4326", always_xy=True)

    @cached_property
    def extent(self) -> tuple[float, float, float, float]:
        """``(x0, y0, x1, y1)`` in metres: the projected extent of the whole bbox boundary, not only of its
        corners. In the azimuthal projection the bbox's parallels bulge away from the centre (the southern one
        ~580 m below its corners for Beijing): a grid spanning the corners would leave points of the bbox off it."""
        min_lon, min_lat, max_lon, max_lat = self.bbox
        lons, lats = np.linspace(min_lon, max_lon, BOUNDARY_SAMPLES), np.linspace(min_lat, max_lat, BOUNDARY_SAMPLES)
        edge_lon = np.concatenate([lons, lons, np.full_like(lats, min_lon), np.full_like(lats, max_lon)])
        edge_lat = np.concatenate([np.full_like(lons, min_lat), np.full_like(lons, max_lat), lats, lats])
        xs, ys = self._forward.transform(edge_lon, edge_lat)
        return float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max())

    @property
    def n_cols(self) -> int:
        x0, _, x1, _ = self.extent
        return max(1, int(np.ceil((x1 - x0) / self.cell_size_m)))

    @property
    def n_rows(self) -> int:
        _, y0, _, y1 = self.extent
        return max(1, int(np.ceil((y1 - y0) / self.cell_size_m)))

    @property
    def n_cells(self) -> int:
        return self.n_cols * self.n_rows

    def project(self, lon: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Degrees (EPSG:4326) to metres in the local CRS."""
        return self._forward.transform(np.asarray(lon, dtype=float), np.asarray(lat, dtype=float))

    def unproject(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Metres in the local CRS to degrees (EPSG:4326)."""
        return self._inverse.transform(np.asarray(x, dtype=float), np.asarray(y, dtype=float))

    def cell_of(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Cell index ``row * n_cols + col`` of projected points; -1 for points outside the grid."""
        x0, y0, _, _ = self.extent
        col = np.floor((np.asarray(x) - x0) / self.cell_size_m).astype(np.int64)
        row = np.floor((np.asarray(y) - y0) / self.cell_size_m).astype(np.int64)
        inside = (col >= 0) & (col < self.n_cols) & (row >= 0) & (row < self.n_rows)
        return np.where(inside, row * self.n_cols + col, -1)

    def cell_centre(self, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lon/lat of the centres of the given cells."""
        cell = np.asarray(cell, dtype=np.int64)
        x0, y0, _, _ = self.extent
        x = x0 + (cell % self.n_cols + 0.5) * self.cell_size_m
        y = y0 + (cell // self.n_cols + 0.5) * self.cell_size_m
        return self.unproject(x, y)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(bbox=list(self.bbox), crs=self.crs.srs, n_cols=self.n_cols, n_rows=self.n_rows)
        return d
