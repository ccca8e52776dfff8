"""Released points of synthetic records: positions within their model cell and the public bbox, timestamps
from each record's start and pace in the release's window (post-processing)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.objtrace.geometry import Geometry, centre_xy
from mechanisms.objtrace.synthesis import Synthetic
from trajpub.grid import GridSpec
from trajpub.window import ReleaseWindow


def positions(cells: np.ndarray, offsets: np.ndarray, geometry: Geometry, grid: GridSpec,
              rng: np.random.Generator, tries: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``x, y, lon, lat`` of each point of CSR records (``cells``, ``offsets``): a record's first point uniform
    in its model cell; each next point the previous one plus a uniform step in [-s/2, s/2]² (s = cell size),
    clamped into its own cell. A vehicle crosses into the next cell near where it was, so a move is about as
    long as the data's moves (about s/2, not the ~s of two independent uniform points). A position outside the
    public bbox (border cells of the projected grid overhang it) is redrawn uniformly in its cell up to
    ``tries`` times, then put at the cell's centre (inside the bbox: walks use :attr:`Geometry.usable` cells)."""
    cx, cy = centre_xy(geometry.model, cells)
    half = geometry.model.cell_size_m / 2
    lengths = np.diff(offsets)
    x, y = cx + rng.uniform(-half, half, len(cells)), cy + rng.uniform(-half, half, len(cells))
    inner = half * (1 - 1e-9)  # clamped onto the cell's upper edge, a point would belong to the next cell
    for j in range(1, int(lengths.max()) if len(lengths) else 0):
        at = offsets[:-1][lengths > j] + j
        x[at] = np.clip(x[at - 1] + rng.uniform(-half, half, len(at)), cx[at] - inner, cx[at] + inner)
        y[at] = np.clip(y[at - 1] + rng.uniform(-half, half, len(at)), cy[at] - inner, cy[at] + inner)
    min_lon, min_lat, max_lon, max_lat = grid.bbox

    def outside(idx: np.ndarray) -> np.ndarray:
        lon, lat = grid.unproject(x[idx], y[idx])
        return idx[~((lon >= min_lon) & (lon <= max_lon) & (lat >= min_lat) & (lat <= max_lat))]

    todo = outside(np.arange(len(cells)))
    for _ in range(tries):
        if len(todo) == 0:
            break
        x[todo] = cx[todo] + rng.uniform(-half, half, len(todo))
        y[todo] = cy[todo] + rng.uniform(-half, half, len(todo))
        todo = outside(todo)
    x[todo], y[todo] = cx[todo], cy[todo]
    lon, lat = grid.unproject(x, y)
    return x, y, np.asarray(lon), np.asarray(lat)


def point_layout(offsets: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The points of CSR records of model cells: ``(cells, traj, seq, point offsets)``, a record of one cell
    written as two points in that cell."""
    lengths = np.diff(offsets)
    single = lengths == 1
    reps = np.where(np.repeat(single, lengths), 2, 1)
    n_points = np.where(single, 2, lengths)
    traj = np.repeat(np.arange(len(lengths)), n_points)
    point_offsets = np.r_[0, np.cumsum(n_points)]
    seq = np.arange(int(point_offsets[-1])) - np.repeat(point_offsets[:-1], n_points)
    return np.repeat(cells, reps), traj, seq, point_offsets


def as_frame(traj: np.ndarray, seq: np.ndarray, t: pd.Series | pd.DatetimeIndex, x: np.ndarray, y: np.ndarray,
             lon: np.ndarray, lat: np.ndarray, grid: GridSpec) -> pd.DataFrame:
    """``traj_id, seq, cell, t, lon, lat, x, y`` (traj_id from 1)."""
    return pd.DataFrame({
        "traj_id": (traj + 1).astype(np.int64), "seq": seq.astype(np.int64),
        "cell": np.asarray(grid.cell_of(x, y), dtype=np.int64), "t": t, "lon": lon, "lat": lat, "x": x, "y": y})


def to_points(synth: Synthetic, geometry: Geometry, grid: GridSpec, window: ReleaseWindow,
              rng: np.random.Generator) -> pd.DataFrame:
    """``traj_id, seq, cell, t, lon, lat, x, y``; a record of one cell is written as two points in that cell. Every
    timestamp lies in ``window``: a record's pace is lowered so that it fits in the window, and a record that
    would end after the window is moved earlier (post-processing of its drawn start and pace)."""
    cells, traj, seq, point_offsets = point_layout(synth.offsets, synth.cells)
    x, y, lon, lat = positions(cells, point_offsets, geometry, grid, rng)
    length = (window.end - window.start).total_seconds() - 1.0
    last = np.diff(point_offsets) - 1.0
    pace = np.minimum(synth.pace_s, length / np.maximum(last, 1.0))
    start = np.clip(synth.start_s, 0.0, length - last * pace)
    seconds = start[traj] + seq * pace[traj]
    return as_frame(traj, seq, pd.Timestamp(window.start) + pd.to_timedelta(seconds, unit="s"), x, y, lon, lat, grid)
