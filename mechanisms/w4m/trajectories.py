"""The trajectories W4M works on (:class:`trajpub.trajectories.Trajectories` with times and owners): built from
the frame with strictly increasing times, and indexed by position.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trajpub.trajectories import Trajectories


def from_frame(df: pd.DataFrame) -> tuple[Trajectories, int]:
    """Trajectories from a frame with ``object_id, traj_id, seq, t, x, y`` (``t`` tz-aware or naive UTC), in
    ``traj_id`` order. A fix whose timestamp repeats an earlier one of its trajectory is dropped (W4M aligns
    on timestamps, which must strictly increase); returns the trajectories and the number of fixes dropped."""
    d = df.sort_values(["traj_id", "seq"], kind="stable")
    seconds = _epoch_seconds(d["t"])
    d = d.assign(_ts=seconds).drop_duplicates(["traj_id", "_ts"])
    dropped = len(df) - len(d)
    d = d.sort_values(["traj_id", "_ts"], kind="stable")
    tid = d["traj_id"].to_numpy(np.int64)
    starts = np.flatnonzero(np.r_[True, tid[1:] != tid[:-1]]) if len(tid) else np.zeros(0, np.int64)
    offsets = np.r_[starts, len(tid)].astype(np.int64)
    traj = Trajectories(offsets=offsets, t=d["_ts"].to_numpy(np.float64), x=d["x"].to_numpy(np.float64),
                        y=d["y"].to_numpy(np.float64), traj_id=tid[starts],
                        object_id=d["object_id"].astype(str).to_numpy()[starts])
    return traj, int(dropped)


def _epoch_seconds(t: pd.Series) -> np.ndarray:
    t = pd.to_datetime(t)
    if t.dt.tz is not None:
        t = t.dt.tz_convert("UTC").dt.tz_localize(None)
    return (t - pd.Timestamp("1970-01-01")).dt.total_seconds().to_numpy(np.float64)


class PositionIndex:
    """Positions of any trajectories at any times, by binary search on one global sorted key (trajectory
    index × span + time) and linear interpolation; a time outside a trajectory's span gets its first or last
    fix (as ``numpy.interp``)."""

    def __init__(self, traj: Trajectories) -> None:
        self.traj = traj
        self.t0 = float(traj.t.min()) if len(traj.t) else 0.0
        self.span = (float(traj.t.max()) - self.t0 + 1.0) * 2.0 if len(traj.t) else 1.0
        owner = np.repeat(np.arange(traj.n, dtype=np.float64), traj.lengths)
        self.key = owner * self.span + (traj.t - self.t0)

    def at(self, idx: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` of trajectories ``idx`` (shape ``(c,)``) at ``times`` (shape ``(s,)``): arrays
        ``(c, s)``."""
        tr = self.traj
        idx = np.asarray(idx, dtype=np.int64)
        q = idx[:, None].astype(np.float64) * self.span + (np.asarray(times)[None, :] - self.t0)
        first, last = tr.offsets[idx][:, None], tr.offsets[idx + 1][:, None] - 1
        hi = np.clip(np.searchsorted(self.key, q, side="left"), first, last)
        lo = np.clip(hi - 1, first, last)
        t_lo, t_hi = tr.t[lo], tr.t[hi]
        qt = np.clip(np.asarray(times)[None, :], tr.t[first], tr.t[last])
        w = np.where(t_hi > t_lo, (qt - t_lo) / np.where(t_hi > t_lo, t_hi - t_lo, 1.0), 1.0)
        return tr.x[lo] + w * (tr.x[hi] - tr.x[lo]), tr.y[lo] + w * (tr.y[hi] - tr.y[lo])
