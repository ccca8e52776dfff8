"""Constrained inference on the noisy prefix tree (Sec. IV-B, after Hay et al. [26]); post-processing only.

Phase A: on every root-to-leaf path, the least-squares fit that never decreases from the leaf up to level 1
(Thm 4.2), computed with the pool-adjacent-violators algorithm instead of the O(h²) minimax formula.
Phase B: a node's intermediate estimate c̃(v) is the unweighted mean of its estimates on the paths through
it (G8). Phase C: consistent estimates c̄ top-down, with the paper's formula or its projected correction (G6, G7).
"""

from __future__ import annotations

import numpy as np

from mechanisms.prefix_tree.tree import NoisyPrefixTree

_LEAVES_PER_CHUNK = 1 << 17


def isotonic_non_decreasing(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Least-squares non-decreasing fit of every segment ``values[bounds[s]:bounds[s+1]]`` (Thm 4.2).

    Equals ``L_m = min_{j≥m} max_{i≤j} mean[i, j]`` of Thm 4.2. Pool-adjacent-violators, run on all
    segments at once: each round pools every maximal run of adjacent blocks with strictly decreasing means
    (each such pooling is a valid PAVA step, and the PAVA solution does not depend on the order of the
    steps), until no segment has a violation. Weights are 1, as in the paper.
    """
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    segment_first = np.zeros(n, dtype=bool)
    segment_first[np.asarray(bounds[:-1])[np.diff(bounds) > 0]] = True
    block_of = np.arange(n)
    block_sum, block_size, block_first = values.copy(), np.ones(n), segment_first
    while True:
        mean = block_sum / block_size
        violates = (mean[:-1] > mean[1:]) & ~block_first[1:]
        if not violates.any():
            return mean[block_of]
        starts_block = np.concatenate(([True], ~violates))
        new_id = np.cumsum(starts_block) - 1
        block_sum = np.bincount(new_id, block_sum)
        block_size = np.bincount(new_id, block_size)
        block_first = block_first[starts_block]
        block_of = new_id[block_of]


def intermediate_estimates(tree: NoisyPrefixTree) -> np.ndarray:
    """c̃(v): the mean over the leaves below v of the Phase-A path estimate of v (Sec. IV-B, Phase B).

    Entry 0 (the root) is NaN. Every c̃(v) is an average of noisy counts ≥ θ, so c̃(v) ≥ θ.
    """
    n = len(tree.parent)
    total, paths = np.zeros(n), np.zeros(n)
    leaves = np.flatnonzero(tree.n_children() == 0)
    leaves = leaves[leaves > 0]
    for start in range(0, len(leaves), _LEAVES_PER_CHUNK):
        chunk = leaves[start : start + _LEAVES_PER_CHUNK]
        steps = int(tree.depth[chunk].max())
        path = np.empty((len(chunk), steps), dtype=np.int64)  # row: leaf, parent, ..., level 1, 0, 0, ...
        node = chunk
        for step in range(steps):
            path[:, step] = node
            node = np.maximum(tree.parent[node], 0)
        nodes = path[path > 0]
        bounds = np.concatenate(([0], np.cumsum(tree.depth[chunk])))
        fitted = isotonic_non_decreasing(tree.count[nodes], bounds)
        total += np.bincount(nodes, fitted, minlength=n)
        paths += np.bincount(nodes, minlength=n)
    estimate = np.full(n, np.nan)
    estimate[1:] = total[1:] / paths[1:]
    return estimate


def consistent_estimates(tree: NoisyPrefixTree, intermediate: np.ndarray, mode: str) -> np.ndarray:
    """c̄(v), top-down from level 1 (Sec. IV-B, Phase C); w is v's parent.

    Level 1: c̄ = c̃ (the root count is not measured, G20). Below, the children of w are adjusted so that
    Σ_u c̄(u) ≤ c̄(w) (Def. 4.1, constraint 2); they are never increased.
    ``"paper"``: c̄(v) = c̃(v) + min(0, (c̄(w) − Σ_{u∈children(w)} c̃(u)) / |children(w)|), which can go
    negative and let a sibling exceed its parent (G7).
    ``"projected"``: the Euclidean projection of the children's c̃ onto {x ≥ 0, Σx ≤ max(c̄(w), 0)},
    x = max(c̃ − τ, 0) with the smallest τ ≥ 0; equal to the paper's formula when no child would go negative.
    """
    if mode not in ("paper", "projected"):
        raise ValueError(f"unknown consistency mode {mode!r}")
    estimate = intermediate.copy()
    for d in range(2, len(tree.level_start) - 1):
        nodes = np.arange(tree.level_start[d], tree.level_start[d + 1])
        parents, group = np.unique(tree.parent[nodes], return_inverse=True)
        children_sum = np.bincount(group, intermediate[nodes])
        parent_value = estimate[parents]
        if mode == "paper":
            n_children = np.bincount(group)
            shift = np.minimum(0.0, (parent_value - children_sum) / n_children)
            estimate[nodes] = intermediate[nodes] + shift[group]
        else:
            tau = _projection_shift(intermediate[nodes], group, children_sum, np.maximum(parent_value, 0.0))
            estimate[nodes] = np.maximum(intermediate[nodes] - tau[group], 0.0)
    return estimate


def _projection_shift(x: np.ndarray, group: np.ndarray, group_sum: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Per group, the smallest τ ≥ 0 with Σ max(x − τ, 0) ≤ cap (x > 0, cap ≥ 0): sort-based simplex projection."""
    tau = np.zeros(len(cap))
    over = group_sum > cap
    tau[over & (cap <= 0)] = np.inf
    active_group = over & (cap > 0)
    member = active_group[group]
    if not member.any():
        return tau
    xs, gs = x[member], group[member]
    order = np.lexsort((-xs, gs))
    xs, gs = xs[order], gs[order]
    first = np.searchsorted(gs, gs, side="left")
    rank = np.arange(len(xs)) - first + 1
    running = np.cumsum(xs)
    within = running - (running[first] - xs[first])
    candidate = (within - cap[gs]) / rank
    n_active = np.bincount(gs, (xs - candidate > 0).astype(float), minlength=len(cap)).astype(np.int64)
    last = np.flatnonzero(np.concatenate((gs[1:] != gs[:-1], [True])))
    groups = gs[last]
    group_first = first[last]
    tau[groups] = candidate[group_first + n_active[groups] - 1]
    # One exact correction on the identified active set, against cumulative-sum rounding.
    positive = np.maximum(x - tau[group], 0.0)
    active_sum = np.bincount(group, positive, minlength=len(cap))
    fix = active_group & (n_active > 0)
    tau[fix] += (active_sum[fix] - cap[fix]) / np.maximum(n_active[fix], 1)
    return tau


def node_estimates(tree: NoisyPrefixTree, consistency: str) -> np.ndarray:
    """The per-node values the release reads: c (``"none"``, Basic) or c̄ (``"paper"``/``"projected"``, Full)."""
    if consistency == "none":
        return tree.count.copy()
    return consistent_estimates(tree, intermediate_estimates(tree), consistency)
