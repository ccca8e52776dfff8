"""True (un-noised) feature counts of AdaTrace, computed next to the data (one partition at a time).

Every function here reads raw trajectories and returns count vectors whose per-trajectory contribution is
bounded as :attr:`AdaTraceParams.sensitivity` states; the vectors of several partitions are simply summed.
Nothing here is released: :mod:`mechanisms.adatrace.synopsis` adds the noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.adatrace.grid import AdaptiveGrid
from trajpub.executor import Counts
from trajpub.trajectories import Trajectories


def point_weights(offsets: np.ndarray) -> np.ndarray:
    """1/|T| for every point of trajectory T: a trajectory's weights sum to 1 (AdaTrace's normalised density)."""
    lengths = np.diff(offsets)
    return np.repeat(1.0 / np.maximum(lengths, 1), lengths)


def top_density(trajs: Trajectories, grid: AdaptiveGrid) -> np.ndarray:
    """Σ_T |T ∩ C|/|T| for every top cell C (L1 sensitivity 1). ``grid`` may have any splits: only the top
    level is used."""
    top = grid.top_of(trajs.x, trajs.y)
    return np.bincount(top, weights=point_weights(trajs.offsets), minlength=grid.n_top)


def leaf_density(trajs: Trajectories, grid: AdaptiveGrid) -> np.ndarray:
    """Σ_T |T ∩ C|/|T| for every leaf C (L1 sensitivity 1)."""
    leaf = grid.leaf_of(trajs.x, trajs.y)
    return np.bincount(leaf, weights=point_weights(trajs.offsets), minlength=grid.n_leaves)


def leaf_sequences(trajs: Trajectories, grid: AdaptiveGrid) -> tuple[np.ndarray, np.ndarray]:
    """Each trajectory as its sequence of visited leaves, consecutive repeats collapsed, and interpolated: when
    two consecutive points fall in non-adjacent leaves, the leaves crossed by the straight segment between them
    are inserted (sampled every min-leaf-side/3 metres), as the Java code's ``interp = true`` does on its grid.
    Returns CSR ``(offsets, leaves)``."""
    n_pts = len(trajs.x)
    if n_pts == 0:
        return np.zeros(trajs.n + 1, np.int64), np.empty(0, np.int64)
    owner = np.repeat(np.arange(trajs.n), trajs.lengths)
    leaf = grid.leaf_of(trajs.x, trajs.y)
    same_traj = owner[1:] == owner[:-1]
    moved = same_traj & (leaf[1:] != leaf[:-1])
    jump = moved & (grid.edge_index(leaf[:-1], leaf[1:]) < 0)
    seg = np.flatnonzero(jump)
    xs, ys, keys, own = [trajs.x], [trajs.y], [np.arange(n_pts, dtype=float)], [owner]
    if len(seg):
        step = grid.min_leaf_side / 3.0
        dx, dy = trajs.x[seg + 1] - trajs.x[seg], trajs.y[seg + 1] - trajs.y[seg]
        n_extra = np.maximum(np.ceil(np.hypot(dx, dy) / step).astype(np.int64) - 1, 1)
        rep = np.repeat(np.arange(len(seg)), n_extra)
        k = np.arange(len(rep)) - np.repeat(np.r_[0, np.cumsum(n_extra)[:-1]], n_extra) + 1
        frac = k / (n_extra[rep] + 1.0)
        xs.append(trajs.x[seg][rep] + frac * dx[rep])
        ys.append(trajs.y[seg][rep] + frac * dy[rep])
        keys.append(seg[rep] + frac)
        own.append(owner[seg][rep])
    key = np.concatenate(keys)
    order = np.argsort(key, kind="stable")
    allx, ally = np.concatenate(xs)[order], np.concatenate(ys)[order]
    allown = np.concatenate(own)[order]
    allleaf = grid.leaf_of(allx, ally)
    keep = np.r_[True, (allown[1:] != allown[:-1]) | (allleaf[1:] != allleaf[:-1])]
    leaves, lown = allleaf[keep], allown[keep]
    counts = np.bincount(lown, minlength=trajs.n)
    return np.r_[0, np.cumsum(counts)].astype(np.int64), leaves


@dataclass(frozen=True)
class FeatureCounts(Counts):
    """The true counts of one partition (summed over partitions with :meth:`add`).

    leaf_density: (K,) normalised visits per leaf; transitions: (E,) weighted moves per adjacency edge
    (:attr:`AdaptiveGrid.edges`); trips: (L², L²) start-top → end-top counts; length_hist: (L²·L², max_length)
    route lengths (in leaves, clipped to [1, max_length]) per trip; detour_hist: (max_length,) detours, length −
    (hop distance between the first and last leaf + 1), clipped to [0, max_length − 1]; n_trajectories: the true count (never
    released, kept for diagnostics of the caller's own tests); dropped_moves: interpolated moves between
    leaves that only touch diagonally through a corner the sampling missed (not counted).
    """

    leaf_density: np.ndarray
    transitions: np.ndarray
    trips: np.ndarray
    length_hist: np.ndarray
    detour_hist: np.ndarray
    n_trajectories: int
    dropped_moves: int



def feature_counts(trajs: Trajectories, grid: AdaptiveGrid, transition_cap: float, max_length: int) -> FeatureCounts:
    """Leaf density, transition, trip and route-length counts of the trajectories (one partition)."""
    n_top = grid.n_top
    offs, leaves = leaf_sequences(trajs, grid)
    n_moves = np.maximum(np.diff(offs) - 1, 0)
    # transitions: move i → i+1 inside each trajectory, weight min(1, C/n_moves)
    if len(leaves) > 1:
        owner = np.repeat(np.arange(trajs.n), np.diff(offs))
        inside = owner[1:] == owner[:-1]
        a, b = leaves[:-1][inside], leaves[1:][inside]
        w = np.minimum(1.0, transition_cap / np.maximum(n_moves[owner[:-1][inside]], 1))
        e = grid.edge_index(a, b)
        ok = e >= 0
        transitions = np.bincount(e[ok], weights=w[ok], minlength=len(grid.edges))
        dropped = int((~ok).sum())
    else:
        transitions = np.zeros(len(grid.edges))
        dropped = 0
    trips = np.zeros((n_top, n_top))
    hist = np.zeros((n_top * n_top, max_length))
    detour = np.zeros(max_length)
    if trajs.n:
        first, last = trajs.offsets[:-1], trajs.offsets[1:] - 1
        start = grid.top_of(trajs.x[first], trajs.y[first])
        end = grid.top_of(trajs.x[last], trajs.y[last])
        np.add.at(trips, (start, end), 1.0)
        length = np.clip(np.diff(offs), 1, max_length)
        np.add.at(hist, (start * n_top + end, length - 1), 1.0)
        hop = grid.hops[leaves[offs[:-1]], leaves[offs[1:] - 1]]
        np.add.at(detour, np.clip(np.diff(offs) - 1 - hop, 0, max_length - 1), 1.0)
    return FeatureCounts(leaf_density(trajs, grid), transitions, trips, hist, detour, trajs.n, dropped)
