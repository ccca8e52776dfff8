"""Synthesis from the noisy model (post-processing: reads released statistics and the rng only).

For each synthetic trajectory: a system (∝ N̂_k among kept systems), a length n (∝ the clipped noisy length
histogram), a start cell (∝ the noisy start histogram, thresholded: :func:`start_weights`), then n−1 moves. A move is drawn from the
highest-order context, up to the system's order h_k − 1, whose noisy child total is at least ``snr`` standard
deviations (4·b, the std of a sum of 8 Laplace(b)) of its noise; order 1 is the last resort (and uniform when all
its children are ≤ 0). The Markov probabilities (clipped at 0) are multiplied by ``direction_decay ** turn``
where ``turn`` ∈ 0..4 is the change of direction from the previous move in steps of 45° (direction-weighted
sampling; by default only for moves drawn from an order-1 context, whose model does not know the previous move),
and by 0 for moves leaving the grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.dpt.model import NoisyModel
from mechanisms.dpt.params import N_DIRECTIONS
from mechanisms.dpt.reference import turn


@dataclass(frozen=True)
class Synthetic:
    """Synthetic trajectories in their systems, CSR like :class:`~mechanisms.dpt.reference.Discretised`."""

    level: np.ndarray
    offsets: np.ndarray
    cells: np.ndarray


def _categorical(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of a non-negative (n, K) weight matrix (rows with zero total must not occur)."""
    cum = np.cumsum(weights, axis=1)
    u = rng.random(len(weights)) * cum[:, -1]
    return np.minimum((cum <= u[:, None]).sum(axis=1), weights.shape[1] - 1)


def _draw(weights: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` i.i.d. indices ∝ clip(weights, 0); uniform when every weight is ≤ 0."""
    p = np.clip(weights, 0, None)
    p = p / p.sum() if p.sum() > 0 else np.full(len(p), 1.0 / len(p))
    return rng.choice(len(p), size=n, p=p)


def direction_weights(previous: np.ndarray, decay: float) -> np.ndarray:
    """(n, 8) multipliers ``decay ** turn(previous, candidate)``; rows with previous = −1 (no move yet) are 1."""
    cand = np.arange(N_DIRECTIONS)
    w = decay ** turn(previous[:, None], cand[None, :]).astype(float)
    return np.where(previous[:, None] < 0, 1.0, w)


def start_weights(model: NoisyModel, level: int) -> np.ndarray:
    """Start-cell weights of system ``level``: noisy start counts below b·ln(n_cells) set to 0.

    With Laplace(b) noise on every one of n cells, about n/2 empty cells get a positive value and their clipped
    total (≈ n·b/2) would swamp the true starts; Pr[Laplace(b) ≥ b·ln n] = 1/(2n), so on average at most half an
    empty cell survives the threshold. Post-processing of released values (a public threshold), so free. When no
    cell survives, the clipped counts are used.
    """
    noisy = model.noisy_starts[level]
    threshold = model.params.start_scale() * np.log(max(len(noisy), 2))
    kept = np.where(noisy >= threshold, noisy, 0.0)
    return kept if kept.sum() > 0 else np.clip(noisy, 0, None)


def walk(model: NoisyModel, level: int, starts: np.ndarray, lengths: np.ndarray,
         rng: np.random.Generator) -> np.ndarray:
    """Cells (n_traj, max(lengths)) of random walks in system ``level``; entries past a trajectory's length −1.

    ``lengths`` is updated in place when a walk cannot move (a system of one cell): it ends where it is.
    """
    params, hier = model.params, model.hierarchy
    height = int(model.heights[level])
    n, n_max = len(starts), int(lengths.max()) if len(lengths) else 0
    cells = np.full((n, max(n_max, 1)), -1, dtype=np.int64)
    dirs = np.full((n, max(n_max, 1)), -1, dtype=np.int64)
    if n == 0:
        return cells
    cells[:, 0] = starts
    scale = model.node_scale(level)
    enough = params.snr * 4.0 * scale
    cand = np.arange(N_DIRECTIONS)
    for t in range(1, n_max):
        rows = np.flatnonzero(lengths > t)
        if len(rows) == 0:
            break
        chosen = np.full((len(rows), N_DIRECTIONS), np.nan)
        used = np.ones(len(rows), dtype=np.int64)
        for order in range(min(height - 1, t), 0, -1):
            key = cells[rows, t - order].copy()
            for j in range(order - 1):
                key = key * N_DIRECTIONS + dirs[rows, t - order + 1 + j]  # move into cell t-order+1+j
            children = model.nodes[(level, order + 1)][key[:, None] * N_DIRECTIONS + cand[None, :]]
            use = np.isnan(chosen[:, 0]) & ((children.sum(axis=1) >= enough) | (order == 1))
            chosen[use] = np.clip(children[use], 0, None)
            used[use] = order
        _, inside = hier.move(level, np.repeat(cells[rows, t - 1], N_DIRECTIONS),
                              np.tile(cand, len(rows)))
        inside = inside.reshape(len(rows), N_DIRECTIONS)
        # an order ≥ 2 context already holds the previous move: weight directions only at order 1
        previous = np.where(used == 1, dirs[rows, t - 1], -1) if params.weight_order1_only else dirs[rows, t - 1]
        steer = direction_weights(previous, params.direction_decay) * inside
        weights = chosen * steer
        empty = weights.sum(axis=1) <= 0
        weights[empty] = steer[empty]  # no usable count: uniform over the cells inside, direction-weighted
        stuck = weights.sum(axis=1) <= 0  # a 1x1 system: no move stays inside; the trajectory ends here
        lengths[rows[stuck]] = t
        rows, weights = rows[~stuck], weights[~stuck]
        d = _categorical(weights, rng)
        nxt, _ = hier.move(level, cells[rows, t - 1], d)
        cells[rows, t] = nxt
        dirs[rows, t] = d
    return cells


def synthesize_from_model(model: NoisyModel, rng: np.random.Generator) -> Synthetic:
    """Draw the synthetic trajectories: ``params.n_synthetic`` of them, or round(Σ_k N̂_k) over ALL systems
    (the noisy trajectory count); each is drawn in a kept system chosen ∝ N̂_k."""
    params = model.params
    kept = model.heights > 0
    sizes = np.where(kept, model.system_sizes(), 0.0)
    if params.n_synthetic is not None:
        n_total = params.n_synthetic
    else:  # the dropped systems' trajectories are drawn from the kept ones
        n_total = int(np.round(model.system_sizes().sum()))
    if n_total == 0 or not kept.any():
        e = np.empty(0, np.int64)
        return Synthetic(e, np.zeros(1, np.int64), e)
    weights = sizes if sizes.sum() > 0 else kept.astype(float)
    system = np.sort(rng.choice(len(weights), size=n_total, p=weights / weights.sum()))
    levels, cell_rows, lens = [], [], []
    for k in np.flatnonzero(kept):
        n_k = int(np.sum(system == k))
        if n_k == 0:
            continue
        hist = model.noisy_lengths[k].copy()
        hist[0] = 0.0
        if np.clip(hist, 0, None).sum() <= 0:
            hist[1:] = 1.0
        lengths = _draw(hist, n_k, rng)  # index = number of cells
        starts = _draw(start_weights(model, int(k)), n_k, rng)
        cells = walk(model, int(k), starts, lengths, rng)
        cell_rows.append(cells[np.arange(cells.shape[1])[None, :] < lengths[:, None]])
        levels.append(np.full(n_k, k))
        lens.append(lengths)
    lengths = np.concatenate(lens)
    return Synthetic(np.concatenate(levels).astype(np.int64), np.r_[0, np.cumsum(lengths)].astype(np.int64),
                     np.concatenate(cell_rows).astype(np.int64))
