"""The in-memory trajectory frame of DESIGN.md: one row per point.

Columns: ``object_id`` (str), ``traj_id`` (int), ``seq`` (int, order within the trajectory),
``t`` (datetime64[UTC]), ``lon``, ``lat`` (EPSG:4326); after projection ``x``, ``y`` (metres, local CRS);
after gridding ``cell`` (int, from a :class:`trajpub.grid.GridSpec`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trajpub.errors import InputError

POINT_COLUMNS = ("object_id", "t", "lon", "lat")
TRAJECTORY_COLUMNS = ("object_id", "traj_id", "seq", "t", "lon", "lat")


def require_columns(df: pd.DataFrame, columns: tuple[str, ...], where: str) -> None:
    """Raise :class:`InputError` naming the missing columns."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", where)


def to_sequences(df: pd.DataFrame, column: str = "cell") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Trajectories as CSR arrays: ``(traj_keys, offsets, values)``.

    ``df`` must be sorted by ``traj_id`` then ``seq``. ``values[offsets[i]:offsets[i+1]]`` is the sequence
    of ``column`` for the i-th trajectory ``traj_keys[i]``.
    """
    require_columns(df, ("traj_id", column), "trajectory frame")
    traj = df["traj_id"].to_numpy()
    if len(traj) == 0:
        return np.empty(0, dtype=np.int64), np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, traj[1:] != traj[:-1]])
    offsets = np.r_[starts, len(traj)].astype(np.int64)
    return traj[starts], offsets, df[column].to_numpy().astype(np.int64)
