"""Synthesis from the noisy model (post-processing: reads the released statistics and the rng only).

Per synthetic record: a number of moves (noisy length histogram), a start cell drawn from the noisy point
density (its quadtree estimate, :func:`density_weights`: where objects are is where records start; a separate
start histogram costs more than it adds per object), an end cell = start + a displacement from the noisy
displacement histogram (PrivTrace's start/end calibration, Du et al. 2023), then a random walk between
neighbouring model cells bridged to reach that end in exactly that many moves (:func:`walk`). A move from cell i
in direction d has weight

    (clip(M̂[i, d], 0) + κ b 8 ρ̂(j) / Σ_{j' ∈ N(i)} ρ̂(j')) · [ρ̂(j) > 0] · γ**turn

with j the neighbour in direction d, M̂ the noisy first-order move counts, ρ̂ the estimated point density, b the
moves' Laplace scale and γ**turn DPT's direction weighting. Where the counts are strong they decide (the Markov
model); where they are drowned in noise the walk follows the density (AdaTrace's density-adaptive idea applied
to moves); it does not enter a cell of zero estimated density.

Times, in the release's window ``[S, E)`` and the dataset's time zone (both public,
:class:`trajpub.window.ReleaseWindow`): a local day of the window whose day of week w is drawn with probability

    P(w) = clip(Ŵ[w], 0) · [w occurs in the window] / Σ_w' clip(Ŵ[w'], 0) · [w' occurs in the window]

(Ŵ the noisy day-of-week histogram; uniform over the window's days of week when every weight is 0), uniform among
the window's days of that day of week; a local start hour from the noisy hour-of-day histogram of the start's
region (or of all regions when the region's noisy total is within ``snr`` noise standard deviations of 0), a
uniform second within that hour; then a pace (seconds per move) from the noisy pace histogram, uniform within its
bin, and point j at start + j · pace (:func:`mechanisms.objtrace.points.to_points` keeps the whole record in the
window). A record of 0 moves gets two points in its cell, one pace apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms.dpt import Hierarchy, direction_weights
from mechanisms.dpt.params import N_DIRECTIONS
from mechanisms.objtrace.geometry import cell_distance, centre_xy
from mechanisms.objtrace.model import NoisyModel
from mechanisms.objtrace.params import HOURS, WEEKDAYS
from mechanisms.objtrace.quadtree import estimate, sparse_weights
from trajpub.window import ReleaseWindow


@dataclass(frozen=True)
class Synthetic:
    """Synthetic records: model cells in CSR form, and per record its start (seconds after the window's start) and
    pace."""

    offsets: np.ndarray
    cells: np.ndarray
    start_s: np.ndarray
    pace_s: np.ndarray


def draw(weights: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` i.i.d. indices ∝ clip(weights, 0); uniform when every weight is <= 0."""
    p = np.clip(weights, 0, None)
    p = p / p.sum() if p.sum() > 0 else np.full(len(p), 1.0 / len(p))
    return rng.choice(len(p), size=n, p=p)


def pick(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per row of ``weights`` (>= 0, each row with a positive sum), a column drawn ∝ the row."""
    cum = np.cumsum(weights, axis=1)
    u = rng.random(len(weights)) * cum[:, -1]
    return np.minimum((cum <= u[:, None]).sum(axis=1), weights.shape[1] - 1)


def density_weights(model: NoisyModel) -> np.ndarray:
    """Per model cell weights of the point density, estimated from its noisy quadtree (:func:`.quadtree.estimate`)."""
    grid, params = model.geometry.model, model.params
    return estimate(model.noisy["density"], grid.n_cols, grid.n_rows, params.quadtree_levels,
                    params.scale("density"), params.snr)


def move_weights(model: NoisyModel) -> np.ndarray:
    """(n_cells, 8) weights of the moves of the module docstring (without the turn factor); 0 off the grid."""
    params, grid = model.params, model.geometry.model
    hier = Hierarchy(grid.n_cols, grid.n_rows, 1)
    n = grid.n_cells
    density = density_weights(model)
    cand = np.tile(np.arange(N_DIRECTIONS), n)
    neighbour, inside = hier.move(0, np.repeat(np.arange(n), N_DIRECTIONS), cand)
    rho = np.where(inside, density[np.maximum(neighbour, 0)], 0.0).reshape(n, N_DIRECTIONS)
    total = rho.sum(axis=1, keepdims=True)
    prior = params.prior_weight * params.scale("moves") * N_DIRECTIONS * rho / np.where(total > 0, total, 1.0)
    counts = np.clip(model.noisy["moves"].reshape(n, N_DIRECTIONS), 0, None)
    return (counts + prior) * (rho > 0) * model.geometry.usable[np.maximum(neighbour, 0)].reshape(n, N_DIRECTIONS)


def walk(model: NoisyModel, weights: np.ndarray, starts: np.ndarray, ends: np.ndarray, n_moves: np.ndarray,
         rng: np.random.Generator) -> np.ndarray:
    """Cells (n, max(n_moves) + 1) of walks from ``starts`` that reach ``ends`` in exactly ``n_moves`` moves
    (the caller makes ``n_moves`` feasible: :func:`feasible_moves`); entries past a record's end are -1.

    A move is allowed when its cell is at Chebyshev distance <= r from the end, r the moves left after it (and
    exactly 1 when r = 1: a walk cannot stay); among the allowed moves the (n_cells, 8) ``weights`` decide
    (:func:`move_weights`), or, when all of them are 0, every allowed move inside the grid is equally likely
    (direction-weighted).
    """
    grid = model.geometry.model
    hier = Hierarchy(grid.n_cols, grid.n_rows, 1)
    n, steps = len(starts), int(n_moves.max()) if len(n_moves) else 0
    cells = np.full((n, steps + 1), -1, dtype=np.int64)
    cells[:, 0] = starts
    previous = np.full(n, -1, dtype=np.int64)
    end_col, end_row = ends % grid.n_cols, ends // grid.n_cols
    for t in range(1, steps + 1):
        rows = np.flatnonzero(n_moves >= t)
        cur = np.repeat(cells[rows, t - 1], N_DIRECTIONS)
        nxt, inside = hier.move(0, cur, np.tile(np.arange(N_DIRECTIONS), len(rows)))
        nxt, inside = nxt.reshape(-1, N_DIRECTIONS), inside.reshape(-1, N_DIRECTIONS)
        left = (n_moves[rows] - t)[:, None]
        dist = np.maximum(np.abs(nxt % grid.n_cols - end_col[rows, None]),
                          np.abs(nxt // grid.n_cols - end_row[rows, None]))
        feasible = inside & (dist <= left) & ((left != 1) | (dist == 1))
        allowed = feasible & model.geometry.usable[np.maximum(nxt, 0)]
        blocked = ~allowed.any(axis=1)
        allowed[blocked] = feasible[blocked]  # the only way to the end crosses an unusable corner cell
        steer = direction_weights(previous[rows], model.params.direction_decay) * allowed
        w = weights[cells[rows, t - 1]] * steer
        empty = w.sum(axis=1) <= 0
        w[empty] = steer[empty]
        d = pick(w, rng)
        cells[rows, t] = nxt[np.arange(len(rows)), d]
        previous[rows] = d
    return cells


def feasible_moves(starts: np.ndarray, ends: np.ndarray, n_moves: np.ndarray, n_cols: int) -> np.ndarray:
    """The fewest moves >= ``n_moves`` that lead from start to end: at least their Chebyshev distance, and not
    exactly 1 for a record that ends where it starts (it would have to stay; it takes 2)."""
    dist = cell_distance(ends, starts, n_cols)
    out = np.maximum(n_moves, dist)
    return np.where((dist == 0) & (out == 1), 2, out)


def end_cells(model: NoisyModel, starts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each record's end: its start plus a displacement from the noisy displacement histogram (thresholded as
    :func:`~.model.sparse_weights`), clipped to the grid; the start itself when that cell is not usable."""
    grid, d_max = model.geometry.model, model.params.max_displacement
    key = draw(sparse_weights(model.noisy["end"], model.params.scale("end")), len(starts), rng)
    col = np.clip(starts % grid.n_cols + key % (2 * d_max + 1) - d_max, 0, grid.n_cols - 1)
    row = np.clip(starts // grid.n_cols + key // (2 * d_max + 1) - d_max, 0, grid.n_rows - 1)
    ends = row * grid.n_cols + col
    return np.where(model.geometry.usable[ends], ends, starts)


def start_seconds(model: NoisyModel, starts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Seconds after local midnight of each record's start: an hour from its region's noisy histogram (back-off
    to all regions' when the region's noisy total is below ``snr`` standard deviations of its noise), then a
    uniform offset within the hour."""
    params, geo = model.params, model.geometry
    hours = model.noisy["hour"].reshape(geo.region.n_cells, HOURS)
    overall = np.clip(hours, 0, None).sum(axis=0)
    enough = params.snr * np.sqrt(2 * HOURS) * params.scale("hour")
    x, y = centre_xy(geo.model, starts)
    region = np.maximum(geo.region.cell_of(x, y), 0)
    out = np.empty(len(starts))
    for r in np.unique(region):
        rows = np.flatnonzero(region == r)
        own = hours[r] if hours[r].sum() >= enough else overall
        out[rows] = draw(own, len(rows), rng) * 3600.0
    return out + rng.uniform(0, 3600.0, len(starts))


def window_days(model: NoisyModel, window: ReleaseWindow, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` local days of the window (datetime64[D]): a day of week from the noisy day-of-week histogram restricted
    to the days of week the window holds (P(w) of the module docstring), then one of the window's days of that day
    of week, uniformly."""
    days = np.array(window.local_days(), dtype="datetime64[D]")
    weekday = (days.astype(np.int64) + 3) % WEEKDAYS  # 1970-01-01 was a Thursday (3, Monday = 0)
    present = np.bincount(weekday, minlength=WEEKDAYS) > 0
    weights = np.clip(model.noisy["weekday"], 0, None) * present
    drawn = draw(weights if weights.sum() > 0 else present.astype(float), n, rng)
    out = np.empty(n, dtype="datetime64[D]")
    for w in np.flatnonzero(present):
        rows = np.flatnonzero(drawn == w)
        out[rows] = rng.choice(days[weekday == w], size=len(rows))
    return out


def start_times(model: NoisyModel, starts: np.ndarray, window: ReleaseWindow, rng: np.random.Generator,
                tries: int = 8) -> np.ndarray:
    """Seconds after the window's start of each record's start: a local day (:func:`window_days`) and time of day
    (:func:`start_seconds`) in the window's zone, as an instant (a local time a clock change skips moves forward,
    an ambiguous one is read as the first). A start outside the window (its first or last local day may be cut)
    is drawn again up to ``tries`` times, then moved to the window's nearest end."""
    length = (window.end - window.start).total_seconds()
    out = np.full(len(starts), -1.0)
    todo = np.arange(len(starts))
    for _ in range(tries):
        local = (window_days(model, window, len(todo), rng).astype("datetime64[s]")
                 + np.round(start_seconds(model, starts[todo], rng)).astype("timedelta64[s]"))
        instant = pd.DatetimeIndex(local).tz_localize(window.timezone, ambiguous=np.ones(len(todo), bool),
                                                      nonexistent="shift_forward")
        out[todo] = (instant - pd.Timestamp(window.start)).total_seconds().to_numpy()
        todo = todo[(out[todo] < 0) | (out[todo] >= length)]
        if len(todo) == 0:
            break
    return np.clip(out, 0.0, length - 1.0)


def paces(model: NoisyModel, n: int, rng: np.random.Generator) -> np.ndarray:
    """Seconds per move: a bin of the noisy pace histogram, uniform within it (the open last bin as wide as the
    one before it)."""
    edges = np.asarray(model.params.pace_edges_s)
    upper = np.r_[edges[1:], 2 * edges[-1] - edges[-2]]
    b = draw(model.noisy["pace"], n, rng)
    return rng.uniform(edges[b], upper[b])


def walks(model, density: np.ndarray, moves: np.ndarray, rng: np.random.Generator, ends_of=end_cells
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The records' cells, ObjTrace's and CityTrace's: ``n_synthetic`` records, or the noisy record count rounded
    (at least 0), each with a number of moves from the noisy length histogram, a start cell drawn from
    ``density`` (usable cells only), an end cell (``ends_of(model, starts, rng)``, :func:`end_cells` by default)
    and a walk of ``moves`` bridged to it. Returns (moves per record, start cells, the records' cells one after
    another)."""
    params = model.params
    n = params.n_synthetic if params.n_synthetic is not None else max(round(float(model.noisy["records"][0])), 0)
    edges = np.asarray(params.length_edges)
    b = draw(model.noisy["length"], n, rng)
    n_moves = rng.integers(edges[b], np.r_[edges[1:], edges[-1] + 1][b])
    starts = draw(density * model.geometry.usable, n, rng)
    ends = ends_of(model, starts, rng)
    n_moves = feasible_moves(starts, ends, np.minimum(n_moves, params.max_moves), model.geometry.model.n_cols)
    cells = walk(model, moves, starts, ends, n_moves, rng)
    return n_moves, starts, cells[np.arange(cells.shape[1])[None, :] <= n_moves[:, None]]


def synthesize_from_model(model: NoisyModel, window: ReleaseWindow, rng: np.random.Generator) -> Synthetic:
    """The records of :func:`walks` on ObjTrace's model, starting in ``window`` at a constant pace each."""
    n_moves, starts, kept = walks(model, density_weights(model), move_weights(model), rng)
    return Synthetic(np.r_[0, np.cumsum(n_moves + 1)].astype(np.int64), kept,
                     start_times(model, starts, window, rng), paces(model, len(starts), rng))
