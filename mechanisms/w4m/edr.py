"""EDR, the Edit Distance on Real sequences (Chen, Özsu, Oria, SIGMOD 2005), with W4M's time tolerance.

Two points match when ``|Δx| ≤ match_m``, ``|Δy| ≤ match_m`` (Chen et al.'s per-axis threshold ε) and
``|Δt| ≤ time_tolerance_s`` (Abul, Bonchi, Nanni 2010 make the distance time-tolerant, not time-free: points
of a (k,δ)-anonymity set must be close at the same times). The recurrence (Chen et al. 2005, Def. 3)::

    EDR(R, S) = |R| if S empty, |S| if R empty,
              = min(EDR(R', S') + sub(r1, s1), EDR(R', S) + 1, EDR(R, S') + 1),  sub = 0 if match else 1.

Computation. Row ``i`` of the DP matrix follows from row ``i−1`` with whole-row numpy operations: with
``A[0] = i`` and ``A[j] = min(D[i−1, j−1] + sub, D[i−1, j] + 1)``, the within-row term ``D[i, j−1] + 1`` is a
prefix minimum, ``D[i, j] = min_{l ≤ j}(A[l] + j − l) = j + cummin(A − arange)[j]``. :func:`edr_batch` runs that
recurrence (on ``D − j``, which saves two passes) for a whole batch of pairs at once: pairs of similar lengths,
padded to the batch's longest; a pair's value is read at its own ``(n, m)`` cell, which padding never
influences. The matching cells, few on real data, are found beforehand by binary search on time and set
sparsely, so a row costs four passes over the batch whatever the coordinates.

Pruning (:func:`candidate_pairs`) is EXACT. A pair with no matchable point pair at all has ``EDR = max(n, m)``,
the largest value EDR can take for those lengths: every alignment then pays 1 per substituted pair and 1 per
inserted or deleted point, at least ``max(n, m)``, and substituting ``min(n, m)`` pairs and inserting the rest
costs exactly that. Matchable points lie in the same or adjacent cells of a grid of ``match_m`` × ``match_m``
× ``time_tolerance_s`` buckets (each coordinate differs by at most one cell side; the cells are made wider by a
relative 1e-9 so that rounding cannot break this), so a pair that shares no such neighbouring bucket has no
matchable point pair and is given ``max(n, m)`` without running the DP.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.w4m.trajectories import Trajectories

#: Elements per row operation in :func:`edr_batch` (batch size × padded width): keeps the rows in cache.
BATCH_CELLS = 1 << 15


def matches(ta, xa, ya, tb, xb, yb, match_m: float, time_tolerance_s: float) -> np.ndarray:
    """Whether points ``a`` and ``b`` match (broadcasting): per-axis distance ≤ ``match_m`` and time
    difference ≤ ``time_tolerance_s``."""
    return ((np.abs(xa - xb) <= match_m) & (np.abs(ya - yb) <= match_m) & (np.abs(ta - tb) <= time_tolerance_s))


def edr_matrix(a: tuple[np.ndarray, np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray, np.ndarray],
               match_m: float, time_tolerance_s: float) -> tuple[np.ndarray, np.ndarray]:
    """The full ``(n+1) × (m+1)`` EDR matrix of trajectories ``a = (t, x, y)`` and ``b`` (``[n, m]`` is EDR),
    and the ``n × m`` boolean matrix of matching point pairs."""
    ta, xa, ya = a
    tb, xb, yb = b
    n, m = len(ta), len(tb)
    ar = np.arange(m + 1, dtype=np.int64)
    d = np.empty((n + 1, m + 1), dtype=np.int64)
    d[0] = ar
    ok = matches(ta[:, None], xa[:, None], ya[:, None], tb[None, :], xb[None, :], yb[None, :], match_m,
                 time_tolerance_s)
    row = np.empty(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        row[0] = i
        np.minimum(d[i - 1, :-1] + ~ok[i - 1], d[i - 1, 1:] + 1, out=row[1:])
        d[i] = np.minimum.accumulate(row - ar) + ar
    return d, ok


def edr(a, b, match_m: float, time_tolerance_s: float) -> int:
    """EDR of two trajectories ``(t, x, y)``."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return max(len(a[0]), len(b[0]))
    return int(edr_matrix(a, b, match_m, time_tolerance_s)[0][-1, -1])


def alignment(a, b, match_m: float, time_tolerance_s: float,
              substitutions: bool = False) -> tuple[np.ndarray, ...]:
    """An optimal EDR alignment of ``a`` and ``b``: the index pairs ``(i, j)`` it matches (``sub = 0``), in
    increasing order; with ``substitutions`` also the pairs it substitutes (``sub = 1``), and a third array
    saying which pairs are matches. Backtracking prefers a match, then a substitution, then deleting from
    ``a``, then inserting from ``b``, so the same inputs always give the same alignment."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        z = np.zeros(0, np.int64)
        return (z, z, np.zeros(0, bool)) if substitutions else (z, z)
    dm, okm = edr_matrix(a, b, match_m, time_tolerance_s)
    d, ok = dm.tolist(), okm.tolist()
    i, j = len(a[0]), len(b[0])
    ia: list[int] = []
    jb: list[int] = []
    matched: list[bool] = []
    while i > 0 and j > 0:
        here, diag = d[i][j], d[i - 1][j - 1]
        if diag == here and ok[i - 1][j - 1]:
            ia.append(i - 1)
            jb.append(j - 1)
            matched.append(True)
            i, j = i - 1, j - 1
        elif diag + 1 == here:
            if substitutions:
                ia.append(i - 1)
                jb.append(j - 1)
                matched.append(False)
            i, j = i - 1, j - 1
        elif d[i - 1][j] + 1 == here:
            i -= 1
        else:
            j -= 1
    ia_arr, jb_arr = np.asarray(ia[::-1], dtype=np.int64), np.asarray(jb[::-1], dtype=np.int64)
    if substitutions:
        return ia_arr, jb_arr, np.asarray(matched[::-1], dtype=bool)
    return ia_arr, jb_arr


def edr_batch(traj: Trajectories, pairs: np.ndarray, match_m: float, time_tolerance_s: float) -> np.ndarray:
    """EDR of every pair ``(i, j)`` of trajectory indices in ``pairs`` (shape ``(P, 2)``), vectorised over
    pairs of similar lengths (module docstring). Returns int64, one value per pair, in the input order."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    out = np.empty(len(pairs), dtype=np.int64)
    if len(pairs) == 0:
        return out
    lengths = traj.lengths
    la, lb = lengths[pairs[:, 0]], lengths[pairs[:, 1]]
    swap = la > lb  # rows = the shorter trajectory (fewer Python-level steps), columns = the longer
    rows_ix = np.where(swap, pairs[:, 1], pairs[:, 0])
    cols_ix = np.where(swap, pairs[:, 0], pairs[:, 1])
    n_rows, n_cols = lengths[rows_ix], lengths[cols_ix]
    # pairs of similar widths (within ~12%) together, shorter rows first inside a width class
    width_class = np.floor(np.log(n_cols) / np.log(1.125)).astype(np.int64)
    order = np.lexsort((n_rows, width_class))
    start = 0
    while start < len(order):
        width = n_cols[order[start]]
        # grow the batch while the padded width keeps it under the budget
        stop = start + 1
        while stop < len(order) and width_class[order[stop]] == width_class[order[start]]:
            w = max(width, n_cols[order[stop]])
            if (stop + 1 - start) * (w + 1) > BATCH_CELLS:
                break
            width = w
            stop += 1
        sel = order[start:stop]
        out[sel] = _edr_padded(traj, rows_ix[sel], cols_ix[sel], match_m, time_tolerance_s)
        start = stop
    return out


def _match_events(traj: Trajectories, rows_ix: np.ndarray, cols_ix: np.ndarray, match_m: float,
                  time_tolerance_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every matching point pair of every pair ``b`` of the batch, as ``(b, i, j)`` (point ``i`` of trajectory
    ``rows_ix[b]``, point ``j`` of ``cols_ix[b]``), sorted by ``i``. Only points within the time tolerance are
    tested (binary search on times), with exactly the test of :func:`matches`."""
    t0 = traj.t.min() if len(traj.t) else 0.0
    span = float(traj.t.max() - t0) + 4.0 * time_tolerance_s + 1.0 if len(traj.t) else 1.0
    owner = np.repeat(np.arange(traj.n, dtype=np.float64), traj.lengths)
    key = owner * span + (traj.t - t0)  # increasing: trajectories in order, times increasing within each
    n_rows = traj.lengths[rows_ix]
    b = np.repeat(np.arange(len(rows_ix), dtype=np.int64), n_rows)
    i = np.arange(len(b), dtype=np.int64) - np.repeat(np.cumsum(n_rows) - n_rows, n_rows)
    src = traj.offsets[rows_ix][b] + i
    base = cols_ix[b].astype(np.float64) * span + (traj.t[src] - t0)
    lo = np.searchsorted(key, base - time_tolerance_s, side="left")
    hi = np.searchsorted(key, base + time_tolerance_s, side="right")
    count = hi - lo
    rep = np.repeat(np.arange(len(b)), count)
    dst = lo[rep] + np.arange(len(rep)) - np.repeat(np.cumsum(count) - count, count)
    src = src[rep]
    ok = matches(traj.t[src], traj.x[src], traj.y[src], traj.t[dst], traj.x[dst], traj.y[dst], match_m,
                 time_tolerance_s)
    eb, ei, ej = b[rep][ok], i[rep][ok], dst[ok] - traj.offsets[cols_ix[b[rep][ok]]]
    order = np.argsort(ei, kind="stable")
    return eb[order], ei[order], ej[order]


def _edr_padded(traj: Trajectories, rows_ix: np.ndarray, cols_ix: np.ndarray, match_m: float,
                time_tolerance_s: float) -> np.ndarray:
    """The batched row recurrence on shifted values ``D'[i, j] = D[i, j] − j``, for which it reads
    ``D'[i, j] = min(D'[i−1, j−1] − 1 + sub, D'[i−1, j] + 1, D'[i, j−1])``, i.e. a copy of the previous row,
    −1 at the (few) matching cells, a minimum and a running minimum: four passes per row."""
    n_rows, n_cols = traj.lengths[rows_ix], traj.lengths[cols_ix]
    h, w = int(n_rows.max()), int(n_cols.max())
    eb, ei, ej = _match_events(traj, rows_ix, cols_ix, match_m, time_tolerance_s)
    row_start = np.searchsorted(ei, np.arange(h + 1))
    b = len(rows_ix)
    dtype = np.int16 if max(h, w) < 30000 else np.int32  # D' lies in [−w, h]
    prev = np.zeros((b, w + 1), dtype=dtype)  # D'[0, j] = j − j
    cur = np.empty_like(prev)
    result = np.empty(b, dtype=np.int64)
    take = np.arange(b)
    finish = np.searchsorted(np.sort(n_rows), np.arange(h + 2))  # pairs finishing at each row: any?
    for i in range(1, h + 1):
        cur[:, 0] = i
        cur[:, 1:] = prev[:, :-1]
        a, z = row_start[i - 1], row_start[i]
        if z > a:
            cur[eb[a:z], ej[a:z] + 1] -= 1
        np.minimum(cur[:, 1:], prev[:, 1:] + 1, out=cur[:, 1:])
        np.minimum.accumulate(cur, axis=1, out=cur)
        if finish[i + 1] > finish[i]:
            done = n_rows == i
            result[done] = cur[take[done], n_cols[done]] + n_cols[done]
        prev, cur = cur, prev
    return result


def candidate_pairs(traj: Trajectories, match_m: float, time_tolerance_s: float) -> np.ndarray:
    """Every pair ``(i, j)``, ``i < j``, of trajectories that may hold a matchable point pair (a superset:
    pairs left out provably have none; module docstring). Sorted, shape ``(P, 2)``."""
    if traj.n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    # buckets a hair wider than the thresholds, so that floating-point rounding of the divisions can never
    # put two matchable points two buckets apart
    side, span = match_m * (1.0 + 1e-9), time_tolerance_s * (1.0 + 1e-9)
    kx = np.floor(traj.x / side).astype(np.int64)
    ky = np.floor(traj.y / side).astype(np.int64)
    kt = np.floor(traj.t / span).astype(np.int64)
    kx -= kx.min() - 1
    ky -= ky.min() - 1
    kt -= kt.min() - 1
    nx, ny = int(kx.max()) + 2, int(ky.max()) + 2
    key = (kt * ny + ky) * nx + kx
    owner = np.repeat(np.arange(traj.n, dtype=np.int64), traj.lengths)
    cells = pd.DataFrame({"key": key, "traj": owner}).drop_duplicates()
    found = []
    base = cells.rename(columns={"traj": "i"})
    for dt in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                shifted = pd.DataFrame({"key": cells["key"].to_numpy() + (dt * ny + dy) * nx + dx,
                                        "j": cells["traj"].to_numpy()})
                m = base.merge(shifted, on="key", how="inner")
                i, j = m["i"].to_numpy(), m["j"].to_numpy()
                keep = i < j
                found.append(np.unique(i[keep] * traj.n + j[keep]))
    code = np.unique(np.concatenate(found))
    return np.stack([code // traj.n, code % traj.n], axis=1)


def normalised(edr_values: np.ndarray, len_a: np.ndarray, len_b: np.ndarray) -> np.ndarray:
    """EDR divided by the longer length: 0 = every point of the shorter trajectory aligned with a matching
    point, 1 = no match at all (the value of every pruned pair)."""
    return np.asarray(edr_values, dtype=np.float64) / np.maximum(len_a, len_b)
