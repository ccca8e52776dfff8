"""Released points of synthetic records (post-processing): positions as ObjTrace's
(:func:`mechanisms.objtrace.points.positions`, within the model cell, near the previous point), or, with a
PrivTree density, drawn from its fine weights inside the model cell (:func:`fine_positions`); timestamps from
each record's start and its moves' times; with ``point_spacing_m``, each segment written as points that far apart
(:func:`densify`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.citytrace.model import NoisyModel
from mechanisms.citytrace.params import fine_grid
from mechanisms.citytrace.synthesis import Synthetic, model_cell_of_fine
from mechanisms.objtrace.geometry import centre_xy
from mechanisms.objtrace.points import as_frame, point_layout, positions
from trajpub.grid import GridSpec
from trajpub.window import ReleaseWindow


def fine_positions(model: NoisyModel, cells: np.ndarray, grid: GridSpec, rng: np.random.Generator, tries: int = 8
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``x, y, lon, lat`` of points in model ``cells``: a fine cell of the model cell ∝ the PrivTree density's
    fine weights (uniformly among its fine cells when they are all 0), then uniform within it: points lie where
    the noisy density is, at the fine cells' resolution, not on a lattice of model cells. A position outside the
    public bbox is drawn again up to ``tries`` times, then put at its model cell's centre (inside the bbox:
    walks use usable cells)."""
    fine = fine_grid(model.geometry, model.params)
    owner = model_cell_of_fine(model)
    order = np.argsort(owner, kind="stable")  # fine cells grouped by model cell
    weight = model.fine[order]
    n_model = model.geometry.model.n_cells
    first = np.searchsorted(owner[order], np.arange(n_model + 1))
    count = np.diff(first)
    cum = np.cumsum(weight)
    base = np.r_[0.0, cum][first]
    total, base = np.diff(base), base[:-1]
    x0, y0, _, _ = fine.extent
    x, y = np.empty(len(cells)), np.empty(len(cells))
    todo = np.arange(len(cells))
    for _ in range(tries):
        c = cells[todo]
        u = rng.random(len(todo))
        by_weight = total[c] > 0
        pos = np.where(by_weight, np.searchsorted(cum, base[c] + u * total[c], side="right"),
                       first[c] + np.minimum((u * count[c]).astype(np.int64), count[c] - 1))
        pos = np.clip(pos, first[c], first[c + 1] - 1)
        f = order[pos]
        x[todo] = x0 + (f % fine.n_cols + rng.random(len(todo))) * fine.cell_size_m
        y[todo] = y0 + (f // fine.n_cols + rng.random(len(todo))) * fine.cell_size_m
        todo = todo[~inside(grid, x[todo], y[todo])]
        if len(todo) == 0:
            break
    x[todo], y[todo] = centre_xy(model.geometry.model, cells[todo])
    lon, lat = grid.unproject(x, y)
    return x, y, np.asarray(lon), np.asarray(lat)


def inside(grid: GridSpec, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Do projected points lie in the public bbox?"""
    lon, lat = grid.unproject(x, y)
    min_lon, min_lat, max_lon, max_lat = grid.bbox
    return (lon >= min_lon) & (lon <= max_lon) & (lat >= min_lat) & (lat <= max_lat)


def to_points(synth: Synthetic, model: NoisyModel, grid: GridSpec, window: ReleaseWindow,
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
    if model.fine is None:
        x, y, lon, lat = positions(cells, point_offsets, model.geometry, grid, rng)
    else:
        x, y, lon, lat = fine_positions(model, cells, grid, rng)
    length = np.r_[0.0, np.hypot(np.diff(x), np.diff(y))]
    length[point_offsets[:-1]] = 0.0  # a record's first point has no segment
    step = np.maximum(step, length / (model.params.max_speed_kmh / 3.6))
    elapsed = np.cumsum(step) - np.repeat(np.cumsum(step)[point_offsets[:-1]] - step[point_offsets[:-1]],
                                          np.diff(point_offsets))
    last = elapsed[point_offsets[1:] - 1]
    length = (window.end - window.start).total_seconds() - 1.0
    squeeze = np.minimum(1.0, length / np.maximum(last, 1e-9))  # a record longer than the window is sped up
    elapsed, last = elapsed * squeeze[traj], last * squeeze
    start = np.maximum(np.minimum(synth.start_s, length - last), 0.0)
    seconds = start[traj] + elapsed
    if model.params.point_spacing_m is not None:
        traj, seq, seconds, x, y = densify(traj, seconds, x, y, model.params.point_spacing_m)
        lon, lat = clipped_lonlat(grid, x, y)
    t = pd.Timestamp(window.start) + pd.to_timedelta(seconds, unit="s")
    return as_frame(traj, seq, t, x, y, lon, lat, grid)


def densify(traj: np.ndarray, seconds: np.ndarray, x: np.ndarray, y: np.ndarray, spacing: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each segment of a record (points in order, ``traj`` non-decreasing) written as n = ⌈length / spacing⌉
    pieces (at least 1): points at fractions k/n, k = 0..n-1, of the way in position and in time, then the record's
    last point; ``(traj, seq, seconds, x, y)``. Post-processing with a public spacing: a record keeps its path,
    its duration and each segment's speed, and its consecutive points lie in the same or adjacent cells of any
    grid whose cells are at least ``spacing`` wide."""
    same = np.r_[traj[1:] == traj[:-1], False]
    length = np.r_[np.hypot(np.diff(x), np.diff(y)), 0.0]
    pieces = np.where(same, np.maximum(np.ceil(length / spacing), 1), 1).astype(np.int64)
    at = np.repeat(np.arange(len(traj)), pieces)
    frac = (np.arange(len(at)) - np.repeat(np.cumsum(pieces) - pieces, pieces)) / pieces[at]
    nxt = np.where(same, np.arange(len(traj)) + 1, np.arange(len(traj)))[at]
    out_traj = traj[at]
    first = np.r_[True, out_traj[1:] != out_traj[:-1]]
    seq = np.arange(len(at)) - np.maximum.accumulate(np.where(first, np.arange(len(at)), 0))
    return (out_traj, seq, seconds[at] + frac * (seconds[nxt] - seconds[at]), x[at] + frac * (x[nxt] - x[at]),
            y[at] + frac * (y[nxt] - y[at]))


def clipped_lonlat(grid: GridSpec, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``lon, lat`` of projected points, clipped to the public bbox (a straight segment between two points inside
    it may leave it by a rounding's width where the projection bends its edges)."""
    lon, lat = grid.unproject(x, y)
    min_lon, min_lat, max_lon, max_lat = grid.bbox
    return np.clip(np.asarray(lon), min_lon, max_lon), np.clip(np.asarray(lat), min_lat, max_lat)
