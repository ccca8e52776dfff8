"""Synthesis from the noisy model (post-processing: reads the released statistics and the rng only).

Per synthetic record, as ObjTrace (:mod:`mechanisms.objtrace.synthesis`): a number of fine moves, a start cell
from the density, an end cell at a distance from the noisy start-to-end distance histogram, by the density (a
gravity model, :func:`end_cells`), and a walk bridged to that end. A fine move from
cell i in direction d, to j, has weight

    ρ̂(j) / Σ_{j' ∈ N(i)} ρ̂(j') · (clip(Ĉ[B(i), d], 0) + κ b) / Σ_d' (clip(Ĉ[B(i), d'], 0) + κ b) · γ**turn

with ρ̂ the quadtree estimate of the fine density (geometric level budget), Ĉ the noisy direction counts of the
moves between blocks of 2**L cells, B(i) the block of cell i, b their Laplace scale: the density says where a
vehicle can be, the block's directions which way traffic flows there (where they are noise, κ b flattens them).

Times: a day from the noisy day histogram of the public window, an hour per start region and a pace (seconds
per fine move) as ObjTrace, lowered so that the record lasts at most ``max_duration_s``; each move gets its own time, pace × m / mean(m) with m drawn from the noisy
histogram of moves' times relative to their record's pace (uniform within its bin), so a record lasts exactly
its pace times its moves while its segments differ as the data's do (stops, fast roads).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.citytrace.model import NoisyModel
from mechanisms.citytrace.params import fine_grid
from mechanisms.dpt import Hierarchy
from mechanisms.dpt.params import N_DIRECTIONS
from mechanisms.objtrace.quadtree import block_index, estimate, sparse_weights
from mechanisms.objtrace.synthesis import draw, paces, pick, start_times, walks
from trajpub.window import ReleaseWindow


@dataclass(frozen=True)
class Synthetic:
    """Synthetic records: fine model cells in CSR form; per record its start (seconds after the window's start)
    and pace; per cell the time (seconds) of the move into it (0 for a record's first cell)."""

    offsets: np.ndarray
    cells: np.ndarray
    start_s: np.ndarray
    pace_s: np.ndarray
    step_s: np.ndarray


def density_weights(model: NoisyModel) -> np.ndarray:
    """Per model cell weights of the density, estimated top-down from its noisy quadtree, or the sums of the
    PrivTree density's fine weights over each model cell."""
    grid, params = model.geometry.model, model.params
    if model.fine is not None:
        return np.bincount(model_cell_of_fine(model), weights=model.fine, minlength=grid.n_cells)
    return estimate(model.noisy["density"], grid.n_cols, grid.n_rows, params.quadtree_levels,
                    np.asarray(params.level_scales()), params.snr)


def model_cell_of_fine(model: NoisyModel) -> np.ndarray:
    """Per fine cell of the PrivTree density, the model cell that holds it (row-major, 2**F x 2**F per cell)."""
    block, n_blocks = block_index(*fine_shape(model), model.params.fine_levels)
    if n_blocks != model.geometry.model.n_cells:  # both grids start at the bbox's projected corner
        raise ValueError(f"the fine grid's {n_blocks} blocks are not the model grid's "
                         f"{model.geometry.model.n_cells} cells")
    return block


def fine_shape(model: NoisyModel) -> tuple[int, int]:
    """(columns, rows) of the PrivTree density's fine grid."""
    fine = fine_grid(model.geometry, model.params)
    return fine.n_cols, fine.n_rows


def direction_shares(model: NoisyModel) -> np.ndarray:
    """(n_blocks, 8): each block's noisy direction counts, clipped at 0, plus κ b, normalised."""
    params = model.params
    counts = np.clip(model.noisy["moves"].reshape(-1, N_DIRECTIONS), 0, None)
    smoothed = counts + params.prior_weight * params.scale("moves")
    return smoothed / smoothed.sum(axis=1, keepdims=True)


def move_weights(model: NoisyModel) -> np.ndarray:
    """(n_cells, 8) weights of the module docstring (without the turn factor); 0 off the usable grid."""
    grid = model.geometry.model
    n = grid.n_cells
    density = density_weights(model)
    neighbour, inside = Hierarchy(grid.n_cols, grid.n_rows, 1).move(
        0, np.repeat(np.arange(n), N_DIRECTIONS), np.tile(np.arange(N_DIRECTIONS), n))
    rho = np.where(inside, density[np.maximum(neighbour, 0)], 0.0).reshape(n, N_DIRECTIONS)
    total = rho.sum(axis=1, keepdims=True)
    block, _ = block_index(grid.n_cols, grid.n_rows, model.params.moves_level)
    usable = model.geometry.usable[np.maximum(neighbour, 0)].reshape(n, N_DIRECTIONS)
    return rho / np.where(total > 0, total, 1.0) * direction_shares(model)[block] * usable


def ring_offsets(low: int, high: int) -> np.ndarray:
    """(m, 2) column and row offsets at Chebyshev distance in [low, high)."""
    d = np.arange(-high + 1, high)
    cols, rows = np.meshgrid(d, d)
    dist = np.maximum(np.abs(cols), np.abs(rows))
    on_ring = (dist >= low) & (dist < high)
    return np.column_stack([cols[on_ring], rows[on_ring]])


def end_cells(model: NoisyModel, starts: np.ndarray, rng: np.random.Generator, chunk: int = 2**22) -> np.ndarray:
    """Each record's end, a gravity model: a distance bin [lo, hi) from the noisy histogram of start-to-end
    Chebyshev distances (thresholded as :func:`mechanisms.objtrace.quadtree.sparse_weights`; the open last bin
    as wide as the one before it), then a usable fine cell at that distance from the start ∝ the density
    estimate ρ̂ (uniformly among them where ρ̂ is 0 on all),

        P(end = e | start = s) = P̂(bin) · ρ̂(e) / Σ_{e': |e' - s|_∞ in the bin} ρ̂(e')

    (trip distribution as a destination's attraction times a function of distance: Erlander & Stewart, "The
    Gravity Model in Transportation Analysis", 1990, Ch. 1). The start itself when no usable cell lies at that
    distance (off the grid). ``chunk`` bounds the candidates held at once (records x cells of a bin)."""
    grid, params = model.geometry.model, model.params
    edges = np.asarray(params.end_edges)
    upper = np.r_[edges[1:], 2 * edges[-1] - edges[-2]]
    usable = model.geometry.usable
    density = density_weights(model) * usable
    bins = draw(sparse_weights(model.noisy["end"], params.scale("end")), len(starts), rng)
    out = starts.copy()
    for b in np.unique(bins):
        offsets = ring_offsets(int(edges[b]), int(upper[b]))
        todo = np.flatnonzero(bins == b)
        for rows in np.array_split(todo, -(-len(todo) * len(offsets) // chunk)):
            col = starts[rows, None] % grid.n_cols + offsets[:, 0]
            row = starts[rows, None] // grid.n_cols + offsets[:, 1]
            inside = (col >= 0) & (col < grid.n_cols) & (row >= 0) & (row < grid.n_rows)
            cand = np.where(inside, row * grid.n_cols + col, 0)
            open_ = inside & usable[cand]
            w = np.where(open_, density[cand], 0.0)
            w = np.where(w.sum(axis=1, keepdims=True) > 0, w, open_)
            some = w.sum(axis=1) > 0
            out[rows[some]] = cand[some, pick(w[some], rng)]
    return out


def step_times(model: NoisyModel, n_moves: np.ndarray, pace_s: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per cell of CSR records of ``n_moves`` moves: the time of the move into it (0 for a first cell); a
    record's moves last ``pace × m / mean(m)`` with m from the noisy step histogram, uniform within its bin (the
    open last bin as wide as the one before it)."""
    edges = np.asarray(model.params.step_edges)
    upper = np.r_[edges[1:], 2 * edges[-1] - edges[-2]]
    total = int(n_moves.sum())
    b = draw(model.noisy["step"], total, rng)
    m = rng.uniform(edges[b], upper[b])
    record = np.repeat(np.arange(len(n_moves)), n_moves)
    mean = np.bincount(record, weights=m, minlength=len(n_moves)) / np.maximum(n_moves, 1)
    move_s = pace_s[record] * m / np.where(mean[record] > 0, mean[record], 1.0)
    out = np.zeros(total + len(n_moves))
    is_move = np.ones(len(out), dtype=bool)
    is_move[np.r_[0, np.cumsum(n_moves + 1)][:-1]] = False
    out[is_move] = move_s
    return out


def synthesize_from_model(model: NoisyModel, window: ReleaseWindow, rng: np.random.Generator) -> Synthetic:
    """The records of ObjTrace's :func:`~mechanisms.objtrace.synthesis.walks` on CityTrace's fine density and
    moves, starting in ``window``, each lasting at most ``max_duration_s``."""
    params = model.params
    n_moves, starts, kept = walks(model, density_weights(model), move_weights(model), rng, end_cells)
    pace_s = np.minimum(paces(model, len(starts), rng), params.max_duration_s / np.maximum(n_moves, 1))
    start_s = start_times(model, starts, window, rng)
    return Synthetic(np.r_[0, np.cumsum(n_moves + 1)].astype(np.int64), kept, start_s, pace_s,
                     step_times(model, n_moves, pace_s, rng))
