"""Synthesis from the noisy synopsis (Gursoy et al. CCS 2018, Sec. 5.1; [Ada-code] ``generateSyntheticTrajs``).

For each synthetic trajectory: sample a trip (start top cell, end top cell) from the noisy trip distribution;
a start and an end leaf inside those top cells from the noisy leaf densities; the total length
L = max(median of the trip (:attr:`Synopsis.synthesis_length`), hop distance + 1) (model "median"), or
hop distance + 1 + a detour drawn from the noisy detour histogram, capped at max_length (model
"detour_histogram"); then a first-order Markov
walk that must end in the end leaf after exactly L cells. The next cell j after cell i, with r moves still to make after j, is drawn with
probability ∝ P[i, j]·(P^r)[j, end] (the paper's / the Java code's bias towards the destination). When that is
0 for every neighbour (the noisy chain cannot reach the end in r moves), j is drawn ∝ P[i, j] among the
neighbours from which the end is still reachable in r moves (hop distance ≤ r), then uniformly among them; the
Java code instead jumps along the straight route. Every step only reads the synopsis and ``rng``.
"""

from __future__ import annotations

import numpy as np

from mechanisms.adatrace.synopsis import Synopsis

#: largest number of floats held for the destination-bias columns P^r[:, end] at once
_CHUNK_FLOATS = 20_000_000


def _sample_rows(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One column index per row, drawn ∝ the row's non-negative weights (rows must have a positive sum)."""
    cum = np.cumsum(weights, axis=1)
    u = rng.random(len(weights)) * cum[:, -1]
    return np.minimum((cum <= u[:, None]).sum(axis=1), weights.shape[1] - 1)


def sample_leaves_in(syn: Synopsis, tops: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A leaf inside each given top cell, drawn ∝ the clipped noisy leaf densities (:attr:`Synopsis.leaf_weights`)."""
    g = syn.grid
    cw = np.r_[0.0, np.cumsum(syn.leaf_weights)]
    lo, hi = g.leaf_offsets[tops], g.leaf_offsets[tops + 1]
    target = cw[lo] + rng.random(len(tops)) * (cw[hi] - cw[lo])
    leaf = np.searchsorted(cw, target, side="right") - 1
    return np.clip(leaf, lo, hi - 1)


def _neighbour_table(syn: Synopsis) -> tuple[np.ndarray, np.ndarray]:
    """(K, D) neighbours padded with −1 and their transition probabilities (0 on padding)."""
    p = syn.transition_matrix
    k = syn.grid.n_leaves
    deg = np.diff(p.indptr)
    d = max(int(deg.max()) if k else 0, 1)
    nbr = np.full((k, d), -1, np.int64)
    prob = np.zeros((k, d))
    col = np.arange(len(p.indices)) - np.repeat(p.indptr[:-1], deg)
    row = np.repeat(np.arange(k), deg)
    nbr[row, col] = p.indices
    prob[row, col] = p.data
    return nbr, prob


def plan_trips(syn: Synopsis, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Trip index, start leaf, end leaf and total length (cells) of ``n`` synthetic trajectories."""
    g = syn.grid
    n_top = g.n_top
    trip = rng.choice(n_top * n_top, size=n, p=syn.trip_probabilities)
    start = sample_leaves_in(syn, trip // n_top, rng)
    end = sample_leaves_in(syn, trip % n_top, rng)
    hop = g.hops[start, end].astype(np.int64)
    if syn.params.length_model == "detour_histogram":
        detour = rng.choice(len(syn.detour_probabilities), size=n, p=syn.detour_probabilities)
        length = hop + 1 + np.minimum(detour, np.maximum(syn.params.max_length - hop - 1, 0))
    else:
        length = np.maximum(syn.synthesis_length[trip], hop + 1)
    length = np.where((start == end) & (length == 2), 1, length)
    if g.n_leaves == 1:
        length = np.ones(n, np.int64)
    return trip, start, end, length


def walk(syn: Synopsis, start: np.ndarray, end: np.ndarray, length: np.ndarray,
         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Destination-biased Markov walks; CSR ``(offsets, leaves)`` with ``leaves[offsets[i]] = start[i]`` and the
    last leaf ``end[i]`` (one cell when length is 1)."""
    g = syn.grid
    n = len(start)
    offsets = np.r_[0, np.cumsum(length)].astype(np.int64)
    out = np.empty(offsets[-1], np.int64)
    if n == 0:
        return offsets, out
    out[offsets[:-1]] = start
    out[offsets[1:] - 1] = end
    nbr, prob = _neighbour_table(syn)
    safe_nbr = np.maximum(nbr, 0)
    p = syn.transition_matrix
    hops = g.hops
    k = g.n_leaves
    ends = np.unique(end)
    r_max = int(max(length.max() - 2, 0))
    chunk = max(1, _CHUNK_FLOATS // max((r_max + 1) * k, 1))
    for c0 in range(0, len(ends), chunk):
        cend = ends[c0:c0 + chunk]
        members = np.flatnonzero(np.isin(end, cend))
        members = members[length[members] > 2]
        if len(members) == 0:
            continue
        col_of = np.searchsorted(cend, end[members])
        # bias[r][:, c] = (P^r)[:, cend[c]]
        bias = np.empty((r_max + 1, k, len(cend)))
        bias[0] = 0.0
        bias[0][cend, np.arange(len(cend))] = 1.0
        for r in range(1, r_max + 1):
            bias[r] = p @ bias[r - 1]
        cur = start[members].copy()
        e = end[members]
        L = length[members]
        for i in range(1, int(L.max()) - 1):
            act = np.flatnonzero(L > i + 1)
            ci, ei, ri = cur[act], e[act], L[act] - 1 - i
            cand = nbr[ci]
            valid = cand >= 0
            sc = safe_nbr[ci]
            reach = valid & (hops[sc, ei[:, None]] <= ri[:, None]) & ~((sc == ei[:, None]) & (ri[:, None] == 1))
            w = prob[ci] * bias[ri[:, None], sc, col_of[act][:, None]] * reach
            bad = w.sum(axis=1) <= 0
            if bad.any():
                w[bad] = prob[ci[bad]] * reach[bad]
                bad2 = bad & (w.sum(axis=1) <= 0)
                w[bad2] = reach[bad2].astype(float)
                bad3 = bad2 & (w.sum(axis=1) <= 0)
                if bad3.any():  # no neighbour can still reach the end: go to the nearest one
                    hh = np.where(valid[bad3], hops[sc[bad3], ei[bad3][:, None]], np.iinfo(np.int32).max)
                    w[bad3] = (hh == hh.min(axis=1, keepdims=True)) & valid[bad3]
            pick = _sample_rows(w, rng)
            nxt = cand[np.arange(len(act)), pick]
            cur[act] = nxt
            out[offsets[members[act]] + i] = nxt
    return offsets, out


def generate(syn: Synopsis, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` synthetic leaf sequences: CSR ``(offsets, leaves)`` and the trip index of each."""
    trip, start, end, length = plan_trips(syn, n, rng)
    offsets, leaves = walk(syn, start, end, length, rng)
    return offsets, leaves, trip


def generate_avoiding(syn: Synopsis, n: int, avoid: np.ndarray, rng: np.random.Generator,
                      max_batches: int = 20) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` synthetic sequences that visit none of the ``avoid`` leaves (rejection sampling, as [Ada-code]
    step ix); fewer if ``max_batches`` batches do not yield enough."""
    got_o, got_l, got_t = [], [], []
    have = 0
    for _ in range(max_batches):
        if have >= n:
            break
        offs, leaves, trip = generate(syn, 2 * (n - have) + 8, rng)
        hit = np.isin(leaves, avoid)
        owner = np.repeat(np.arange(len(offs) - 1), np.diff(offs))
        bad = np.bincount(owner[hit], minlength=len(offs) - 1) > 0
        good = np.flatnonzero(~bad)[: n - have]
        o, lv = select(offs, leaves, good)
        got_o.append(np.diff(o))
        got_l.append(lv)
        got_t.append(trip[good])
        have += len(good)
    lengths = np.concatenate(got_o) if got_o else np.empty(0, np.int64)
    return (np.r_[0, np.cumsum(lengths)].astype(np.int64),
            np.concatenate(got_l) if got_l else np.empty(0, np.int64),
            np.concatenate(got_t) if got_t else np.empty(0, np.int64))


def select(offsets: np.ndarray, values: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR rows ``which`` (in that order)."""
    which = np.asarray(which, dtype=np.int64)
    lengths = np.diff(offsets)[which]
    idx = np.repeat(offsets[:-1][which], lengths) + (
        np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    return np.r_[0, np.cumsum(lengths)].astype(np.int64), values[idx]
