"""Released points of synthetic records: positions uniform within their model cell, timestamps from each
record's start and pace (post-processing)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.objtrace.geometry import Geometry, centre_xy
from mechanisms.objtrace.synthesis import Synthetic
from trajpub.grid import GridSpec


def to_points(synth: Synthetic, geometry: Geometry, grid: GridSpec, reference_date: str,
              rng: np.random.Generator) -> pd.DataFrame:
    """``traj_id, seq, cell, t, lon, lat, x, y``; a record of one cell is written as two points in that cell."""
    lengths = np.diff(synth.offsets)
    single = lengths == 1
    reps = np.where(np.repeat(single, lengths), 2, 1)
    cells = np.repeat(synth.cells, reps)
    n_points = np.where(single, 2, lengths)
    traj = np.repeat(np.arange(len(lengths)), n_points)
    seq = np.arange(len(cells)) - np.repeat(np.r_[0, np.cumsum(n_points)[:-1]], n_points)
    cx, cy = centre_xy(geometry.model, cells)
    half = geometry.model.cell_size_m / 2
    x = cx + rng.uniform(-half, half, len(cells))
    y = cy + rng.uniform(-half, half, len(cells))
    lon, lat = grid.unproject(x, y) if len(cells) else (np.empty(0), np.empty(0))
    day = pd.Timestamp(reference_date, tz="UTC")
    seconds = synth.start_s[traj] + seq * synth.pace_s[traj]
    return pd.DataFrame({
        "traj_id": (traj + 1).astype(np.int64), "seq": seq.astype(np.int64),
        "cell": np.asarray(grid.cell_of(x, y), dtype=np.int64),
        "t": day + pd.to_timedelta(seconds, unit="s"), "lon": lon, "lat": lat, "x": x, "y": y})
