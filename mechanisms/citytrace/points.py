"""Released points of synthetic records (post-processing): positions as ObjTrace's
(:func:`mechanisms.objtrace.points.positions`, within the fine model cell, near the previous point), timestamps
from each record's start and its moves' times."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.citytrace.synthesis import Synthetic
from mechanisms.objtrace.geometry import Geometry
from mechanisms.objtrace.points import as_frame, point_layout, positions
from trajpub.grid import GridSpec


def to_points(synth: Synthetic, geometry: Geometry, grid: GridSpec, first_date: str,
              rng: np.random.Generator) -> pd.DataFrame:
    """``traj_id, seq, cell, t, lon, lat, x, y``; a record of one cell is written as two points in that cell,
    one pace apart."""
    cells, traj, seq, point_offsets = point_layout(synth.offsets, synth.cells)
    single = np.diff(synth.offsets) == 1
    step = np.repeat(synth.step_s, np.where(np.repeat(single, np.diff(synth.offsets)), 2, 1))
    second_of_single = point_offsets[:-1][single] + 1
    step[second_of_single] = synth.pace_s[single]
    elapsed = np.cumsum(step) - np.repeat(np.cumsum(step)[point_offsets[:-1]] - step[point_offsets[:-1]],
                                          np.diff(point_offsets))
    x, y, lon, lat = positions(cells, point_offsets, geometry, grid, rng)
    t = pd.Timestamp(first_date, tz="UTC") + pd.to_timedelta(synth.start_s[traj] + elapsed, unit="s")
    return as_frame(traj, seq, t, x, y, lon, lat, grid)
