"""Preparation: split an object's points into trajectories, project them and map them onto the grid."""

from __future__ import annotations

import numpy as np
import pandas as pd

from trajpub.frame import require_columns
from trajpub.grid import GridSpec

TRAJ_ID_STRIDE = 1 << 32  # traj_id = partition * stride + local index: unique across partitions


def segment(points: pd.DataFrame, time_gap_s: float, split_by_day: bool, partition: int = 0) -> pd.DataFrame:
    """Add ``traj_id`` and ``seq``: a new trajectory starts at a new object, after a gap longer than
    ``time_gap_s``, and (if ``split_by_day``) at a new UTC day."""
    require_columns(points, ("object_id", "t", "lon", "lat"), "prepare")
    df = points.sort_values(["object_id", "t"], kind="stable").reset_index(drop=True)
    new_object = df["object_id"].ne(df["object_id"].shift())
    gap = df["t"].diff().dt.total_seconds().gt(time_gap_s)
    start = new_object | gap
    if split_by_day:
        start |= df["t"].dt.floor("D").ne(df["t"].dt.floor("D").shift())
    local = start.cumsum().to_numpy() - 1
    df["traj_id"] = partition * TRAJ_ID_STRIDE + local
    df["seq"] = df.groupby("traj_id").cumcount()
    return df


def to_grid(df: pd.DataFrame, grid: GridSpec) -> pd.DataFrame:
    """Add ``x``, ``y`` (metres, the grid's local CRS) and ``cell``."""
    df = df.copy()
    df["x"], df["y"] = grid.project(df["lon"].to_numpy(), df["lat"].to_numpy())
    df["cell"] = grid.cell_of(df["x"].to_numpy(), df["y"].to_numpy())
    return df


def keep_trajectories(df: pd.DataFrame, min_points: int, max_per_object: int | None) -> pd.DataFrame:
    """Drop trajectories shorter than ``min_points``; keep each object's first ``max_per_object`` trajectories
    (a data-independent rule, so the per-object contribution cap does not itself leak)."""
    sizes = df.groupby("traj_id")["seq"].transform("size")
    df = df[sizes >= min_points]
    if max_per_object is not None:
        rank = df.groupby("object_id")["traj_id"].rank(method="dense")
        df = df[rank <= max_per_object]
    return df.reset_index(drop=True)


def cell_sequences(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Trajectories as sequences of visited cells in CSR form ``(traj_ids, offsets, cells)``.

    Consecutive repeats of a cell are collapsed: Chen et al. (2012, Def. 3.1) model a trajectory as the
    sequence of locations visited, and a vehicle waiting in one cell visits it once.
    """
    traj = df["traj_id"].to_numpy()
    cells = df["cell"].to_numpy().astype(np.int64)
    keep = np.r_[True, (traj[1:] != traj[:-1]) | (cells[1:] != cells[:-1])] if len(df) else np.zeros(0, bool)
    traj, cells = traj[keep], cells[keep]
    if len(traj) == 0:
        return np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64)
    starts = np.flatnonzero(np.r_[True, traj[1:] != traj[:-1]])
    return traj[starts], np.r_[starts, len(traj)].astype(np.int64), cells
