"""Released points of synthetic records (post-processing): positions as ObjTrace's
(:func:`mechanisms.objtrace.points.positions`, within the fine model cell, near the previous point), timestamps
from each record's start and its moves' times."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.citytrace.params import CityTraceParams
from mechanisms.citytrace.synthesis import Synthetic
from mechanisms.objtrace.geometry import Geometry
from mechanisms.objtrace.points import as_frame, point_layout, positions
from trajpub.grid import GridSpec
from trajpub.window import ReleaseWindow


def to_points(synth: Synthetic, geometry: Geometry, grid: GridSpec, params: CityTraceParams, window: ReleaseWindow,
              rng: np.random.Generator) -> pd.DataFrame:
    """``traj_id, seq, cell, t, lon, lat, x, y``; a record of one cell is written as two points in that cell,
    one pace apart. A segment takes at least its length at ``max_speed_kmh`` (a public plausibility bound: a
    short drawn time on a long segment is stretched); a record that would end after the window is moved
    earlier so that it ends inside it, and one longer than the window is compressed into it (its speed may then
    pass the bound)."""
    cells, traj, seq, point_offsets = point_layout(synth.offsets, synth.cells)
    single = np.diff(synth.offsets) == 1
    step = np.repeat(synth.step_s, np.where(np.repeat(single, np.diff(synth.offsets)), 2, 1))
    step[point_offsets[:-1][single] + 1] = synth.pace_s[single]
    x, y, lon, lat = positions(cells, point_offsets, geometry, grid, rng)
    length = np.r_[0.0, np.hypot(np.diff(x), np.diff(y))]
    length[point_offsets[:-1]] = 0.0  # a record's first point has no segment
    step = np.maximum(step, length / (params.max_speed_kmh / 3.6))
    elapsed = np.cumsum(step) - np.repeat(np.cumsum(step)[point_offsets[:-1]] - step[point_offsets[:-1]],
                                          np.diff(point_offsets))
    last = elapsed[point_offsets[1:] - 1]
    length = (window.end - window.start).total_seconds() - 1.0
    squeeze = np.minimum(1.0, length / np.maximum(last, 1e-9))  # a record longer than the window is sped up
    elapsed, last = elapsed * squeeze[traj], last * squeeze
    start = np.maximum(np.minimum(synth.start_s, length - last), 0.0)
    t = pd.Timestamp(window.start) + pd.to_timedelta(start[traj] + elapsed, unit="s")
    return as_frame(traj, seq, t, x, y, lon, lat, grid)
