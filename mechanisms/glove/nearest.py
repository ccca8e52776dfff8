"""The least-cost partner of every generalised sample: the row (or column) minima of the stretch matrix of
:func:`mechanisms.glove.stretch.stretch_matrix` (Gramaglia and Fiore 2015, Eq. 1-9), without building it.

GLOVE's trajectory-wise cost (Eq. 10) and its merge need, for each sample of one fingerprint, only the minimum of
its row of the stretch matrix and where it is. The matrix is ``n x m`` per pair (about 1,100 x 1,100 for a
taxi-week), so building it dominated GLOVE's run time. This kernel gets the same minima exactly by a sweep in
time: the temporal stretch of two samples is at least the gap between their time spans (``union - w_a d_a -
w_b d_b >= gap``, because the union is ``d_a + d_b + gap`` when they are disjoint and at least
``max(d_a, d_b) >= w_a d_a + w_b d_b`` otherwise), and the spatial term is never negative. So the cost of every
sample further away in time than the best found so far is bounded below by ``(1 - w) min(gap / T, 1)``, and the
sweep, which visits the partner samples outwards from the query's start time (nearest gap first), stops when that
bound exceeds the best cost. The result is the same minimum and the same argmin (the lowest index among equal
costs, as ``numpy.argmin``), with the costs computed by the same floating-point operations in the same order as
:func:`~mechanisms.glove.stretch.stretch_matrix`.

Compiled with numba (``numba.njit``): the sweep is a data-dependent loop with early exit per query sample, which
numpy cannot vectorise without computing the whole matrix again; numba compiles it to machine code with no
per-element Python overhead (and caches the compiled code on disk).
"""

from __future__ import annotations

import numba
import numpy as np

from mechanisms.glove.params import GloveParams

_X0, _X1, _Y0, _Y1, _T0, _T1 = range(6)
_SLACK = 1e-12
"""Stop margin over the bound: the computed cost can fall below its bound by rounding only (~1e-16)."""


@numba.njit(cache=True, nogil=True)
def _cost(r, c, w_r, w_c, w, space_scale, time_scale):
    """Stretch cost of row sample ``r`` (weight ``w_r``) and column sample ``c``: the operations of
    ``stretch_matrix``, in its order."""
    space = (max(r[_X1], c[_X1]) - min(r[_X0], c[_X0]) + max(r[_Y1], c[_Y1])) - min(r[_Y0], c[_Y0])
    space -= w_r * ((r[_X1] - r[_X0] + r[_Y1]) - r[_Y0])
    space -= w_c * ((c[_X1] - c[_X0] + c[_Y1]) - c[_Y0])
    time = max(r[_T1], c[_T1]) - min(r[_T0], c[_T0])
    time -= w_r * (r[_T1] - r[_T0])
    time -= w_c * (c[_T1] - c[_T0])
    space = min(space / space_scale, 1.0) * w
    return space + (1.0 - w) * min(time / time_scale, 1.0)


@numba.njit(cache=True, nogil=True)
def _sweep(query, target, query_is_row, w_row, w_col, w, space_scale, time_scale):
    n, m = query.shape[0], target.shape[0]
    order = np.argsort(target[:, _T0], kind="mergesort")
    start = np.empty(m)
    reach = np.empty(m)  # running maximum of the end times, in start order
    top = -np.inf
    for p in range(m):
        start[p] = target[order[p], _T0]
        top = max(top, target[order[p], _T1])
        reach[p] = top
    best = np.empty(n)
    where = np.empty(n, dtype=np.int64)
    lag = 1.0 - w
    for i in range(n):
        q = query[i]
        right = np.searchsorted(start, q[_T0])
        left = right - 1
        b, bj = np.inf, -1
        while True:
            lb_right = lag * min(max(start[right] - q[_T1], 0.0) / time_scale, 1.0) if right < m else np.inf
            lb_left = lag * min(max(q[_T0] - reach[left], 0.0) / time_scale, 1.0) if left >= 0 else np.inf
            if min(lb_right, lb_left) > b + _SLACK:
                break
            if lb_right <= lb_left:
                j = order[right]
                right += 1
            else:
                j = order[left]
                left -= 1
            if query_is_row:
                c = _cost(q, target[j], w_row, w_col, w, space_scale, time_scale)
            else:
                c = _cost(target[j], q, w_row, w_col, w, space_scale, time_scale)
            if c < b or (c == b and j < bj):
                b, bj = c, j
        best[i] = b
        where[i] = bj
    return best, where


def row_minima(a: np.ndarray, b: np.ndarray, n_a: int, n_b: int, params: GloveParams
               ) -> tuple[np.ndarray, np.ndarray]:
    """``(m.min(axis=1), m.argmin(axis=1))`` of ``m = stretch_matrix(a, b, n_a, n_b, params)``."""
    wa, wb = n_a / (n_a + n_b), n_b / (n_a + n_b)
    return _sweep(a, b, True, wa, wb, params.space_weight, params.space_scale_m, params.time_scale_s)


def column_minima(a: np.ndarray, b: np.ndarray, n_a: int, n_b: int, params: GloveParams
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(m.min(axis=0), m.argmin(axis=0))`` of ``m = stretch_matrix(a, b, n_a, n_b, params)``."""
    wa, wb = n_a / (n_a + n_b), n_b / (n_a + n_b)
    return _sweep(b, a, False, wa, wb, params.space_weight, params.space_scale_m, params.time_scale_s)
