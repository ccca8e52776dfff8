"""Spatial histograms as noisy quadtrees: a private spatial decomposition (Cormode et al., "Differentially
Private Spatial Decompositions", ICDE 2012) in the density-adaptive spirit of AdaTrace (Gursoy et al., CCS 2018,
Sec. 4.1: finer cells only where the data is dense).

Level k holds the sums of the model-cell histogram over blocks of 2**k x 2**k cells (k = 0..K). One object's
normalised histogram has L1 norm <= 1 at every level, so each level has sensitivity 1 and, with the part's ε
split evenly over the K + 1 levels, gets Laplace((K + 1) / ε_part) noise. The estimate is top-down
post-processing: the top level keeps the blocks that clear the :func:`~.model.sparse_weights` threshold; a
block's mass goes to its (up to 4) children in proportion to their clipped noisy counts when those are worth
reading (the block's mass >= ``snr`` times the standard deviation of the noise on its children's total), and
evenly otherwise. Empty areas are thus cut at the top, where noise is cheapest relative to mass.
"""

from __future__ import annotations

import numpy as np


def sparse_weights(noisy: np.ndarray, scale: float) -> np.ndarray:
    """Noisy counts below ``scale · ln(n)`` set to 0 (n = number of bins); the clipped counts if none is left.

    Pr[Laplace(b) >= b ln n] = 1/(2n), so on average at most half an empty bin survives, while the clipped
    noise of n empty bins (about n b / 2) would otherwise swamp a sparse histogram (DPT's start-cell rule,
    :func:`mechanisms.dpt.synthesis.start_weights`). Post-processing with a public threshold.
    """
    kept = np.where(noisy >= scale * np.log(max(len(noisy), 2)), noisy, 0.0)
    return kept if kept.sum() > 0 else np.clip(noisy, 0, None)


def blocks_per_row(n_cols: int, level: int) -> int:
    """The number of blocks of 2**level x 2**level cells in a row of ``n_cols`` cells (the last may be cut)."""
    return -(-n_cols // (1 << level))


def block_index(n_cols: int, n_rows: int, level: int) -> tuple[np.ndarray, int]:
    """The block of each model cell at ``level`` (row-major over blocks) and the number of blocks."""
    rows, cols = np.indices((n_rows, n_cols))
    per_row = blocks_per_row(n_cols, level)
    block = (rows >> level) * per_row + (cols >> level)
    return block.ravel(), per_row * blocks_per_row(n_rows, level)


def level_sums(hist: np.ndarray, n_cols: int, n_rows: int, levels: int) -> np.ndarray:
    """The block sums of levels 0..``levels``, concatenated (level 0 = ``hist`` itself)."""
    parts = []
    for k in range(levels + 1):
        block, n_blocks = block_index(n_cols, n_rows, k)
        parts.append(np.bincount(block, weights=hist, minlength=n_blocks))
    return np.concatenate(parts)


def estimate(noisy: np.ndarray, n_cols: int, n_rows: int, levels: int, scale: float | np.ndarray,
             snr: float) -> np.ndarray:
    """Per model cell weights from the noisy level sums (:func:`level_sums` layout), top-down as in the module
    docstring; ``scale`` is each level's Laplace scale (one number, or one per level 0..``levels``)."""
    scales = np.broadcast_to(np.asarray(scale, dtype=float), (levels + 1,))
    sizes = [block_index(n_cols, n_rows, k)[1] for k in range(levels + 1)]
    bounds = np.r_[0, np.cumsum(sizes)]
    top = noisy[bounds[levels]:bounds[levels + 1]]
    mass = sparse_weights(top, scales[levels])
    for k in range(levels - 1, -1, -1):
        child_block, _ = block_index(n_cols, n_rows, k)
        parent_of_cell, _ = block_index(n_cols, n_rows, k + 1)
        # the parent of each level-k block: take it from any cell of the block
        parent = np.zeros(sizes[k], dtype=np.int64)
        parent[child_block] = parent_of_cell
        children = np.clip(noisy[bounds[k]:bounds[k + 1]], 0, None)
        n_children = np.bincount(parent, minlength=sizes[k + 1])
        total = np.bincount(parent, weights=children, minlength=sizes[k + 1])
        readable = (mass >= snr * np.sqrt(2.0 * n_children) * scales[k]) & (total > 0)
        share = np.where(readable[parent], children / np.where(total > 0, total, 1.0)[parent],
                         1.0 / n_children[parent])
        mass = mass[parent] * share
    return mass
