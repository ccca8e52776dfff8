"""Generalised samples and the GLOVE stretch effort (Gramaglia and Fiore 2015, Eq. 1-10; the survey's [S-code]
``models/glove/Formula.java`` and ``Merge.java``).

A generalised sample is one row of a float array with the columns of :data:`COLUMNS`: an axis-aligned rectangle in
the local metric CRS, the same rectangle's bounds in degrees (tracked separately so that the published degree box
covers the original fixes exactly, with no reprojection error), and a time span in seconds since the Unix epoch. A
raw fix is the degenerate sample of zero width and zero duration.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mechanisms.glove.nearest import column_minima, row_minima
from mechanisms.glove.params import GloveParams

#: Columns of a samples array.
COLUMNS = ("x_min", "x_max", "y_min", "y_max", "t_min", "t_max", "lon_min", "lon_max", "lat_min", "lat_max")
X0, X1, Y0, Y1, T0, T1, LON0, LON1, LAT0, LAT1 = range(10)
_THREADS = os.cpu_count() or 1
_POOL = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="glove-costs")
_LOWER = np.array([X0, Y0, T0, LON0, LAT0])
_UPPER = np.array([X1, Y1, T1, LON1, LAT1])


def point_samples(x: np.ndarray, y: np.ndarray, t_s: np.ndarray, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Degenerate samples (one per fix) from metres, seconds since the epoch and degrees."""
    cols = [x, x, y, y, t_s, t_s, lon, lon, lat, lat]
    return np.column_stack([np.asarray(c, dtype=float) for c in cols])


def stretch_matrix(a: np.ndarray, b: np.ndarray, n_a: int, n_b: int, params: GloveParams) -> np.ndarray:
    """Cost of merging every sample of ``a`` with every sample of ``b`` (shape ``len(a) x len(b)``).

    Eq. 1-9 of the paper as the [S-code] computes them: the spatial stretch of a sample is how far its rectangle
    must grow, summed over x and y (left plus right stretch), to become the union rectangle; the two samples'
    stretches are averaged with the weights ``n_a``, ``n_b`` (the number of fingerprints each already stands for).
    That is ``(W_u + H_u) - (n_a (W_a + H_a) + n_b (W_b + H_b)) / (n_a + n_b)``; the temporal stretch is the same
    with durations. Each is divided by its scale and capped at 1, then
    ``cost = w * space + (1 - w) * time``. Unlike the [S-code], which adds degrees and divides them by 20 "km",
    space is measured in metres.
    """
    wa, wb = n_a / (n_a + n_b), n_b / (n_a + n_b)
    space = (np.maximum(a[:, X1, None], b[None, :, X1]) - np.minimum(a[:, X0, None], b[None, :, X0])
             + np.maximum(a[:, Y1, None], b[None, :, Y1]) - np.minimum(a[:, Y0, None], b[None, :, Y0]))
    space -= (wa * (a[:, X1] - a[:, X0] + a[:, Y1] - a[:, Y0]))[:, None]
    space -= (wb * (b[:, X1] - b[:, X0] + b[:, Y1] - b[:, Y0]))[None, :]
    time = np.maximum(a[:, T1, None], b[None, :, T1]) - np.minimum(a[:, T0, None], b[None, :, T0])
    time -= (wa * (a[:, T1] - a[:, T0]))[:, None]
    time -= (wb * (b[:, T1] - b[:, T0]))[None, :]
    w = params.space_weight
    np.minimum(space / params.space_scale_m, 1.0, out=space)
    np.minimum(time / params.time_scale_s, 1.0, out=time)
    space *= w
    space += (1.0 - w) * time
    return space


def _oriented(a: np.ndarray, b: np.ndarray, n_a: int, n_b: int, params: GloveParams):
    """(longer, shorter, n_longer, n_shorter, least-cost sample of the shorter for each sample of the longer,
    merge cost). On equal lengths the orientation of least cost is taken (the first argument on a tie), so the
    cost is symmetric. The row/column minima of the stretch matrix come from :mod:`mechanisms.glove.nearest`
    (exact, without building the matrix)."""
    if len(a) > len(b):
        cost, best = row_minima(a, b, n_a, n_b, params)
        return a, b, n_a, n_b, best, float(cost.mean())
    cost, best = column_minima(a, b, n_a, n_b, params)
    backward = float(cost.mean())
    if len(a) == len(b):
        f_cost, f_best = row_minima(a, b, n_a, n_b, params)
        forward = float(f_cost.mean())
        if forward <= backward:
            return a, b, n_a, n_b, f_best, forward
    return b, a, n_b, n_a, best, backward


def merge_cost(a: np.ndarray, b: np.ndarray, n_a: int, n_b: int, params: GloveParams) -> float:
    """The trajectory-wise stretch effort (Eq. 10): for each sample of the longer fingerprint, the least cost of
    merging it with a sample of the shorter one, averaged over the longer fingerprint's samples (equal lengths:
    the cheaper direction)."""
    return _oriented(a, b, n_a, n_b, params)[5]


def _threaded(cost: Callable[[int], float], n: int) -> np.ndarray:
    """``[cost(0), ..., cost(n - 1)]``, in contiguous blocks on one thread per core (the numba kernel releases
    the GIL); fewer than two items per thread run on the calling thread."""
    if n < 2 * _THREADS:
        return np.array([cost(r) for r in range(n)], dtype=float)
    bounds = np.linspace(0, n, _THREADS + 1).astype(int)
    blocks = _POOL.map(lambda b: [cost(r) for r in range(bounds[b], bounds[b + 1])], range(_THREADS))
    return np.array([c for block in blocks for c in block], dtype=float)


def pair_costs(samples: list[np.ndarray], weights: np.ndarray, pairs: np.ndarray, params: GloveParams) -> np.ndarray:
    """:func:`merge_cost` of each row ``(i, j)`` of ``pairs`` (a block of the candidate graph)."""
    return _threaded(lambda r: merge_cost(samples[pairs[r, 0]], samples[pairs[r, 1]], int(weights[pairs[r, 0]]),
                                          int(weights[pairs[r, 1]]), params), len(pairs))


def costs_to(a: np.ndarray, n_a: int, others: list[tuple[np.ndarray, int]], params: GloveParams) -> np.ndarray:
    """:func:`merge_cost` of ``a`` (standing for ``n_a`` fingerprints) with each ``(samples, n)`` of ``others``."""
    return _threaded(lambda r: merge_cost(a, others[r][0], n_a, others[r][1], params), len(others))


def _absorb(target: np.ndarray, index: np.ndarray, source: np.ndarray) -> None:
    """Grow ``target[index[r]]`` to the union with ``source[r]`` for every r (repeated indices accumulate)."""
    for c in _LOWER:
        np.minimum.at(target[:, c], index, source[:, c])
    for c in _UPPER:
        np.maximum.at(target[:, c], index, source[:, c])


def merge_samples(a: np.ndarray, b: np.ndarray, n_a: int, n_b: int, params: GloveParams) -> np.ndarray:
    """The generalised fingerprint of the merge of ``a`` and ``b`` ([S-code] ``Merge.mergeTrace``).

    Every sample of the longer fingerprint joins (union rectangle and time span) the sample of the shorter one at
    least cost; samples of the shorter one that nobody joined are then merged into their least-cost merged sample.
    Every sample of both fingerprints is thus inside some merged sample, and every merged sample contains at least
    one sample of each side. The result has one sample per matched sample of the shorter fingerprint, sorted by
    start time. The [S-code]'s ``reshaping`` (which trims overlapping time spans and inserts bridging samples) is
    not applied: trimming could leave an original fix outside every published span.
    """
    longer, shorter, n_l, n_s, best, _ = _oriented(a, b, n_a, n_b, params)
    merged = shorter.copy()
    _absorb(merged, best, longer)
    matched = np.bincount(best, minlength=len(shorter)) > 0
    out, rest = merged[matched], shorter[~matched]
    if len(rest):
        second = row_minima(rest, out, n_s, n_l + n_s, params)[1]
        _absorb(out, second, rest)
    return out[np.argsort(out[:, T0], kind="stable")]


def locality_key(samples: np.ndarray, params: GloveParams) -> np.ndarray:
    """The cheap locality key of a fingerprint: the mean sample centre (x, y, t), scaled like the cost's terms so
    that the L1 distance between two keys is comparable to a merge cost (w·(|Δx|+|Δy|)/S + (1−w)·|Δt|/T)."""
    w = params.space_weight
    cx = (samples[:, X0] + samples[:, X1]).mean() / 2
    cy = (samples[:, Y0] + samples[:, Y1]).mean() / 2
    ct = (samples[:, T0] + samples[:, T1]).mean() / 2
    return np.array([w * cx / params.space_scale_m, w * cy / params.space_scale_m,
                     (1.0 - w) * ct / params.time_scale_s])
