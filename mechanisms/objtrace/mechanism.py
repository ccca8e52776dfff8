"""ObjTrace end to end on in-memory points (for the bench and tests).

A distributed pipeline runs :func:`~.counting.count_points` on each partition (whole objects), sums with
:meth:`~.counting.ObjTraceCounts.add`, and calls :func:`~.model.fit`, :func:`~.synthesis.synthesize_from_model`
and :func:`~.points.to_points` on the driver (``mechanisms/objtrace/adapter.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms.objtrace.counting import count_points
from mechanisms.objtrace.geometry import geometry_of
from mechanisms.objtrace.model import NoisyModel, fit
from mechanisms.objtrace.params import ObjTraceParams
from mechanisms.objtrace.points import to_points
from mechanisms.objtrace.synthesis import Synthetic, synthesize_from_model
from trajpub.grid import GridSpec
from trajpub.window import ReleaseWindow


@dataclass(frozen=True, eq=False)
class ObjTraceResult:
    model: NoisyModel
    synthetic: Synthetic
    points: pd.DataFrame


def synthesize(points: pd.DataFrame, grid: GridSpec, params: ObjTraceParams, window: ReleaseWindow,
               rng: np.random.Generator) -> ObjTraceResult:
    """ObjTrace on one frame (``object_id, traj_id, seq, t, x, y`` on ``grid``'s projection), its timestamps in
    the public ``window``."""
    geometry = geometry_of(grid, params)
    model = fit(count_points(points, geometry, params, window.timezone), geometry, params, rng)
    synthetic = synthesize_from_model(model, window, rng)
    return ObjTraceResult(model, synthetic, to_points(synthetic, geometry, grid, window, rng))
