"""The public geometry of an ObjTrace release: the model grid and the start-time regions over the spec's bbox."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from mechanisms.objtrace.params import ObjTraceParams
from trajpub.grid import GridSpec


def cell_distance(a: np.ndarray, b: np.ndarray, n_cols: int) -> np.ndarray:
    """The Chebyshev distance between row-major cells ``a`` and ``b`` of a grid of ``n_cols`` columns: the fewest
    moves between neighbouring cells from one to the other."""
    return np.maximum(np.abs(a % n_cols - b % n_cols), np.abs(a // n_cols - b // n_cols))


@dataclass(frozen=True, eq=False)
class Geometry:
    """``model``: square cells of ``cell_size_m`` (the reference system of the moves); ``region``: square cells
    of ``region_size_m`` (start-hour regions). Both over the release grid's bbox, with its projection, so a
    point's ``x, y`` on the release grid are its coordinates on both."""

    model: GridSpec
    region: GridSpec

    @cached_property
    def usable(self) -> np.ndarray:
        """Per model cell: is its centre inside the bbox? Walks stay on these cells (the projected grid's border
        cells may lie outside the bbox, where no point may be released)."""
        lon, lat = self.model.cell_centre(np.arange(self.model.n_cells))
        min_lon, min_lat, max_lon, max_lat = self.model.bbox
        return (lon >= min_lon) & (lon <= max_lon) & (lat >= min_lat) & (lat <= max_lat)


def geometry_of(grid: GridSpec, params: ObjTraceParams) -> Geometry:
    """The model geometry of a release over ``grid`` (public inputs only)."""
    return Geometry(GridSpec(grid.bbox, params.cell_size_m), GridSpec(grid.bbox, params.region_size_m))


def centre_xy(grid: GridSpec, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Projected centres (metres) of ``grid``'s cells (:meth:`GridSpec.cell_centre` gives lon/lat)."""
    cells = np.asarray(cells, dtype=np.int64)
    x0, y0, _, _ = grid.extent
    return x0 + (cells % grid.n_cols + 0.5) * grid.cell_size_m, y0 + (cells // grid.n_cols + 0.5) * grid.cell_size_m
