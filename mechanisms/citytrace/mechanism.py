"""CityTrace end to end on in-memory points (for the bench and tests). The flow's adapter
(``mechanisms/citytrace/adapter.py``) runs :func:`~.counting.count_points` on the workers and the rest on the driver."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms.citytrace.counting import count_points
from mechanisms.citytrace.model import NoisyModel, fit
from mechanisms.citytrace.params import CityTraceParams
from mechanisms.citytrace.points import to_points
from mechanisms.citytrace.synthesis import Synthetic, synthesize_from_model
from mechanisms.objtrace.geometry import Geometry
from trajpub.grid import GridSpec
from trajpub.window import ReleaseWindow


@dataclass(frozen=True, eq=False)
class CityTraceResult:
    model: NoisyModel
    synthetic: Synthetic
    points: pd.DataFrame


def geometry_of(grid: GridSpec, params: CityTraceParams) -> Geometry:
    """The fine model grid and the start-time regions over the release grid's public bbox."""
    return Geometry(GridSpec(grid.bbox, params.cell_size_m), GridSpec(grid.bbox, params.region_size_m))


def release_from_counts(counts, geometry: Geometry, grid: GridSpec, params: CityTraceParams, window: ReleaseWindow,
                        rng: np.random.Generator) -> CityTraceResult:
    """Noise, synthesis and points (timestamps in ``window``) from the summed bounded counts (the driver's
    part)."""
    model = fit(counts, geometry, params, rng)
    synthetic = synthesize_from_model(model, window, rng)
    return CityTraceResult(model, synthetic, to_points(synthetic, model, grid, window, rng))


def synthesize(points: pd.DataFrame, grid: GridSpec, params: CityTraceParams, window: ReleaseWindow,
               rng: np.random.Generator) -> CityTraceResult:
    """CityTrace on one frame (``object_id, traj_id, seq, t, x, y`` on ``grid``'s projection), its timestamps in
    the public ``window``."""
    geometry = geometry_of(grid, params)
    return release_from_counts(count_points(points, geometry, params, window.timezone), geometry, grid, params,
                               window, rng)
