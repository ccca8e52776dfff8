"""A set of trajectories as flat arrays (CSR layout), the form the mechanisms' vectorised steps read.

The points of trajectory ``i`` are ``offsets[i]:offsets[i+1]`` of ``x, y`` (metres, the grid's local projected
CRS) and, when the mechanism needs them, ``t`` (float seconds since the Unix epoch); ``traj_id[i]`` is its input
id and ``object_id[i]`` (when kept) its owner. The in-memory frame of :mod:`trajpub.frame` is the other form.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Trajectories:
    """``n`` trajectories in CSR form (module docstring); ``t`` and ``object_id`` are None when not kept."""

    offsets: np.ndarray
    x: np.ndarray
    y: np.ndarray
    traj_id: np.ndarray
    t: np.ndarray | None = None
    object_id: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @classmethod
    def from_frame(cls, df: pd.DataFrame) -> Trajectories:
        """From a frame with ``traj_id, seq, x, y`` (any row order; ``object_id`` kept when present)."""
        d = df.sort_values(["traj_id", "seq"], kind="stable")
        traj = d["traj_id"].to_numpy(np.int64)
        start = np.r_[True, traj[1:] != traj[:-1]] if len(traj) else np.zeros(0, bool)
        offsets = np.r_[np.flatnonzero(start), len(traj)].astype(np.int64)
        owners = d["object_id"].astype(str).to_numpy()[start] if "object_id" in d else None
        return cls(offsets, d["x"].to_numpy(dtype=float), d["y"].to_numpy(dtype=float), traj[start],
                   object_id=owners)

    @classmethod
    def concat(cls, parts: list[Trajectories]) -> Trajectories:
        """Several sets as one, in ``traj_id`` order; every part keeps the same optional arrays."""
        parts = [p for p in parts if p.n > 0]
        if not parts:
            return cls(np.zeros(1, np.int64), np.zeros(0), np.zeros(0), np.zeros(0, np.int64), np.zeros(0),
                       np.zeros(0, dtype=object))
        shift = np.cumsum([0] + [len(p.x) for p in parts[:-1]])
        offsets = np.concatenate([parts[0].offsets[:1]] + [p.offsets[1:] + s for p, s in zip(parts, shift,
                                                                                              strict=True)])

        def joined(name: str) -> np.ndarray | None:
            arrays = [getattr(p, name) for p in parts]
            return None if arrays[0] is None else np.concatenate(arrays)

        whole = cls(offsets.astype(np.int64), joined("x"), joined("y"), joined("traj_id"), joined("t"),
                    joined("object_id"))
        return whole.take(np.argsort(whole.traj_id, kind="stable"))

    def take(self, order: np.ndarray) -> Trajectories:
        """The trajectories ``order`` (indices), in that order."""
        order = np.asarray(order, dtype=np.int64)
        lengths = self.lengths[order]
        starts = self.offsets[order]
        src = np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(lengths.sum())
        return Trajectories(np.r_[0, np.cumsum(lengths)].astype(np.int64), self.x[src], self.y[src],
                            self.traj_id[order], None if self.t is None else self.t[src],
                            None if self.object_id is None else self.object_id[order])

    def points(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(t, x, y)`` of trajectory ``i``."""
        a, b = self.offsets[i], self.offsets[i + 1]
        return self.t[a:b], self.x[a:b], self.y[a:b]

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
