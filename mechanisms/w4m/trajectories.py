"""The trajectories W4M works on, as flat arrays (CSR layout): one row per point, ``offsets`` per trajectory.

Times are float seconds since the Unix epoch, positions metres in the grid's local projected CRS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Trajectories:
    """``n`` trajectories: points ``offsets[i]:offsets[i+1]`` of ``t, x, y`` belong to trajectory ``i``, whose
    input id is ``traj_id[i]`` and owner ``object_id[i]``. Times strictly increase within a trajectory."""

    offsets: np.ndarray
    t: np.ndarray
    x: np.ndarray
    y: np.ndarray
    traj_id: np.ndarray
    object_id: np.ndarray

    @property
    def n(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def points(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(t, x, y)`` of trajectory ``i``."""
        a, b = self.offsets[i], self.offsets[i + 1]
        return self.t[a:b], self.x[a:b], self.y[a:b]

    def take(self, order: np.ndarray) -> Trajectories:
        """The trajectories ``order`` (indices), in that order."""
        order = np.asarray(order, dtype=np.int64)
        lengths = self.lengths[order]
        starts = self.offsets[order]
        src = np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(lengths.sum())
        return Trajectories(offsets=np.r_[0, np.cumsum(lengths)].astype(np.int64), t=self.t[src], x=self.x[src],
                            y=self.y[src], traj_id=self.traj_id[order], object_id=self.object_id[order])

    def owner_codes(self) -> np.ndarray:
        """An integer code per trajectory, equal for trajectories of the same object."""
        return pd.factorize(pd.Series(self.object_id))[0].astype(np.int64)

    def spans(self) -> tuple[np.ndarray, np.ndarray]:
        """First and last time of every trajectory."""
        return self.t[self.offsets[:-1]], self.t[self.offsets[1:] - 1]

    def centroids(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean position of every trajectory's points."""
        n = self.lengths
        return np.add.reduceat(self.x, self.offsets[:-1]) / n, np.add.reduceat(self.y, self.offsets[:-1]) / n


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


def concat(parts: list[Trajectories]) -> Trajectories:
    """Several trajectory sets as one, in ``traj_id`` order (as :func:`from_frame` orders one frame)."""
    parts = [p for p in parts if p.n > 0]
    if not parts:
        return Trajectories(np.zeros(1, np.int64), *(np.zeros(0) for _ in range(3)), np.zeros(0, np.int64),
                            np.zeros(0, dtype=object))
    shift = np.cumsum([0] + [len(p.t) for p in parts[:-1]])
    offsets = np.concatenate([parts[0].offsets[:1]] + [p.offsets[1:] + s for p, s in zip(parts, shift, strict=True)])
    joined = Trajectories(offsets=offsets.astype(np.int64), t=np.concatenate([p.t for p in parts]),
                          x=np.concatenate([p.x for p in parts]), y=np.concatenate([p.y for p in parts]),
                          traj_id=np.concatenate([p.traj_id for p in parts]),
                          object_id=np.concatenate([p.object_id for p in parts]))
    return joined.take(np.argsort(joined.traj_id, kind="stable"))


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
