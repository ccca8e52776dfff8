"""PrivTree: a differentially private quadtree whose depth follows the data (Zhang, Xiao, Xie, "PrivTree:
A Differentially Private Algorithm for Hierarchical Decompositions", SIGMOD 2016, Algorithm 2).

The domain is the fine grid over the public bbox; a node at level k is a block of 2**k x 2**k fine cells
(:func:`mechanisms.objtrace.quadtree.block_index`), the root the one block of level R = ⌈log2 max(cols, rows)⌉.
Top-down, a node v at depth d = R - k with count c(v) gets the biased count (the paper's Eq. 3)

    b(v) = max(c(v) - d·δ, θ - δ)

and is split into its (up to β = 4) children when b(v) + Lap(λ) > θ; nodes of level 0 (the fine cells) are
never split. With λ and δ as in :func:`calibration` the decomposition is ε_tree-DP (Theorem 3.1 there, for a
count that one individual changes by at most 1 along one root-to-leaf path; the per-object form, where an
object's unit of mass is spread over many cells, is proved in :func:`calibration`). The threshold θ and the
bias δ depend on ε_tree and the fanout only: no parameter is fitted to a city. A node's count is the sum of
every object's bounded vector over the node's cells, so a dense city core is split down to the fine cells while
the countryside stays in a few large leaves.

The leaves partition the domain, so their counts are released with Laplace(1/ε_leaf) (sensitivity 1: each object's
vector has L1 norm <= 1); so are, below them, the nodes 1..J levels down (:func:`sub_nodes`, each depth again a
partition), and :func:`refine` reads the fine density top-down from them (post-processing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mechanisms.objtrace.quadtree import block_index
from trajpub import noise

FANOUT = 4


SNAP = 2.0 ** -10
"""What :func:`trajpub.noise.laplace_real` lets its snapping move a level's tested counts in all (n values on a grid
g with n·g <= 2**-10 for sensitivity 1), so each by at most g <= 2**-10."""


def calibration(epsilon: float, levels: int, fanout: int = FANOUT) -> tuple[float, float]:
    """(λ, δ) of an ε-DP decomposition with ``levels`` levels of split tests: λ = ((2β - 1)/(β - 1) + levels·s)/ε
    and δ = λ ln β + 1 + 2s, s = :data:`SNAP` (PrivTree's Theorem 3.1 has λ = (2β - 1)/((β - 1)ε) and
    δ = λ ln β for unit counts and exact noise; the + 1 covers fractional counts, the s terms the snapping).

    Proof sketch for fractional contributions. Let D' = D minus object o, whose mass in node v is m_v ∈ [0, 1],
    m_v = Σ of m_l over the leaves l below v, Σ_l m_l <= 1; a node with m_v = 0 has the same count under both
    (no loss). Write x_v = c_D(v) - d·δ. If x_v <= θ - δ, b(v) is θ - δ under D and D' (no loss). Otherwise the
    tested values differ by at most m_v + g (g <= s the snapping grid, scale λ' >= λ), so the log-ratio of the
    node's outcome is at most (m_v + g) times the steepest slope of a Laplace log-tail over [x_v - 1 - g, x_v]:
    for "split" (an internal node) at most (1/λ)·min(1, exp(-(x_v - 1 - g - θ)/λ)), for "leaf" at most 1/λ.
    Along one root-to-leaf path x decreases by at least δ per level (c is non-increasing), so at most one
    internal node has x in (θ - δ, θ]; above it (or above an unclamped leaf) the j-th internal node has
    x > θ + (j - 1)δ - j·g, hence a slope factor of at most β**-(j-1) for j >= 2 with δ = λ ln β + 1 + 2s. A
    path thus costs at most (1/λ)(1 + 1 + Σ_{j>=1} β**-j) = (2β - 1)/((β - 1)λ) per unit of mass; summing the
    m_v terms as Σ_v m_v(...) = Σ_l m_l Σ_{v on l's path}(...) and the g terms over each level's tested nodes
    (n·g <= s per level) gives at most ((2β - 1)/(β - 1) + levels·s)/λ = ε in total.
    """
    lam = ((2 * fanout - 1) / (fanout - 1) + levels * SNAP) / epsilon
    return lam, lam * math.log(fanout) + 1.0 + 2 * SNAP


def root_level(n_cols: int, n_rows: int) -> int:
    """R: the level whose one block covers the whole fine grid."""
    return max(0, math.ceil(math.log2(max(n_cols, n_rows, 1))))


@dataclass(frozen=True)
class Leaves:
    """The decomposition's leaves: their level and block index (row-major at that level), root first."""

    level: np.ndarray
    block: np.ndarray


def children(blocks: np.ndarray, level: int, n_cols: int, n_rows: int) -> np.ndarray:
    """The blocks of level ``level - 1`` inside each block of ``level`` (those that hold at least one fine cell)."""
    per_row, child_per_row = -(-n_cols // (1 << level)), -(-n_cols // (1 << (level - 1)))
    child_rows = -(-n_rows // (1 << (level - 1)))
    r, c = blocks // per_row, blocks % per_row
    out = []
    for dr in (0, 1):
        for dc in (0, 1):
            cr, cc = 2 * r + dr, 2 * c + dc
            ok = (cr < child_rows) & (cc < child_per_row)
            out.append(cr[ok] * child_per_row + cc[ok])
    return np.sort(np.concatenate(out)) if out else np.zeros(0, np.int64)


def level_counts(fine: np.ndarray, n_cols: int, n_rows: int, level: int) -> np.ndarray:
    """The sums of ``fine`` (one value per fine cell, row-major) over the blocks of ``level``."""
    block, n_blocks = block_index(n_cols, n_rows, level)
    return np.bincount(block, weights=fine, minlength=n_blocks)


def decompose(fine: np.ndarray, n_cols: int, n_rows: int, epsilon: float, rng: np.random.Generator,
              theta: float = 0.0) -> Leaves:
    """PrivTree's leaves over ``fine`` (the true per-fine-cell sums of the objects' bounded vectors), ε-DP
    (:func:`calibration`); the split tests' noise through :func:`trajpub.noise.laplace_real`, whose snapping is
    paid in its scale (so λ is at least :func:`calibration`'s)."""
    top = root_level(n_cols, n_rows)
    lam, delta = calibration(epsilon, top)
    active = np.zeros(1, dtype=np.int64)
    levels, blocks = [], []
    for level in range(top, 0, -1):
        depth = top - level
        biased = np.maximum(level_counts(fine, n_cols, n_rows, level)[active] - depth * delta, theta - delta)
        split = noise.laplace_real(biased, 1.0, 1.0 / lam, rng) > theta
        levels.append(np.full(int((~split).sum()), level))
        blocks.append(active[~split])
        active = children(active[split], level, n_cols, n_rows)
        if len(active) == 0:
            break
    levels.append(np.zeros(len(active), dtype=np.int64))
    blocks.append(active)
    return Leaves(np.concatenate(levels).astype(np.int64), np.concatenate(blocks).astype(np.int64))


def leaf_of_cell(leaves: Leaves, n_cols: int, n_rows: int) -> np.ndarray:
    """Per fine cell, the index of the leaf that holds it (the leaves partition the grid)."""
    out = np.full(n_cols * n_rows, -1, dtype=np.int64)
    for level in np.unique(leaves.level):
        block, _ = block_index(n_cols, n_rows, int(level))
        at = np.flatnonzero(leaves.level == level)
        lookup = np.full(int(block.max()) + 1, -1, dtype=np.int64)
        lookup[leaves.block[at]] = at
        hit = lookup[block]
        out[hit >= 0] = hit[hit >= 0]
    return out


def sub_nodes(leaves: Leaves, leaf: np.ndarray, n_cols: int, n_rows: int, depth: int) -> np.ndarray:
    """Per fine cell, its node ``depth`` levels below its leaf (at level max(leaf level - depth, 0)), numbered
    0..n-1 in order of (level, block): for each depth these nodes partition the grid."""
    level = np.maximum(leaves.level[leaf] - depth, 0)
    key = np.zeros(len(leaf), dtype=np.int64)
    for k in np.unique(level):
        block, _ = block_index(n_cols, n_rows, int(k))
        at = level == k
        key[at] = block[at]
    return np.unique((level.astype(np.int64) << 40) | key, return_inverse=True)[1].ravel()


def refine(noisy_top: np.ndarray, top_node: np.ndarray, noisy_subs: list[np.ndarray], sub_node: list[np.ndarray],
           scales: list[float], snr: float) -> np.ndarray:
    """Per fine cell weights, top-down: each top node's mass (clipped noisy count) goes to its children in the
    next partition ∝ their clipped noisy counts where it is >= ``snr`` standard deviations of the noise on the
    children's total, evenly otherwise (:func:`mechanisms.objtrace.quadtree.estimate`'s rule); the last
    partition's mass spread evenly over its fine cells."""
    mass, node = np.clip(noisy_top, 0, None), top_node
    for noisy, child, scale in zip(noisy_subs, sub_node, scales, strict=True):
        parent = np.zeros(len(noisy), dtype=np.int64)
        parent[child] = node
        n_children = np.bincount(parent, minlength=len(mass))
        kids = np.clip(noisy, 0, None)
        total = np.bincount(parent, weights=kids, minlength=len(mass))
        readable = (mass >= snr * np.sqrt(2.0 * n_children) * scale) & (total > 0)
        share = np.where(readable[parent], kids / np.where(total > 0, total, 1.0)[parent], 1.0 / n_children[parent])
        mass, node = mass[parent] * share, child
    size = np.bincount(node, minlength=len(mass))
    return (mass / np.maximum(size, 1))[node]
