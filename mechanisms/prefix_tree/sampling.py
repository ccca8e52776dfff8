"""The empty-candidate process of Theorem 4.1 (Chen, Fung, Desai, Sec. IV-A), vectorised over many nodes.

A node v at level i has |L| candidate children. Those with a positive true count (the set G(v)) get an
explicit Laplace test. The m = |L| − |G(v)| empty ones (true count 0) are never looped over: Theorem 4.1
shows that m independent tests "0 + Laplace(b) ≥ θ" are equivalent to

1. drawing the number that pass, k ~ Binomial(m, p_θ) with p_θ = exp(−θ/b)/2, then
2. picking k of the m empty labels uniformly without replacement and giving each a noisy count from
   P(x) = 1 − exp((θ − x)/b) for x ≥ θ, i.e. θ + Exponential(scale b) (the memoryless Laplace tail).

With the hardened noise of :mod:`trajpub.noise` the same argument holds on its grid (see
:func:`sample_empty_passes`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from trajpub import noise


def sample_empty_passes(
    n_empty: np.ndarray,
    keep_at_most: np.ndarray | None,
    laplace_scale: float,
    theta: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Thm 4.1 for many nodes at once: the empty candidates that pass θ, or only the largest of them.

    The noise is :func:`trajpub.noise.laplace`: g·K with K discrete Laplace of parameter t (q = e^(−1/t)) on
    the grid g. An empty candidate passes when g·K ≥ θ, i.e. K ≥ k₀ = ⌈θ/g⌉, with probability
    p_θ = q^k₀/(1 + q) for k₀ ≥ 1 (the discrete form of exp(−θ/b)/2). Node j has ``n_empty[j]`` empty
    candidates; ``k[j] ~ Binomial(n_empty[j], p_θ)`` of them pass, each with noisy count g·(k₀ + Y),
    Y ~ Geometric with P(Y = y) ∝ q^y (the memoryless tail, drawn exactly by :func:`trajpub.noise.geometric`).
    When ``keep_at_most`` is given, only the ``j_kept = min(k, keep_at_most)`` largest counts of a node are
    returned (the others could never be kept under parent_bound, G1); with ``None`` all k are. Returns
    ``(j_kept, counts)``: counts grouped by node in node order, descending within a node. Needs θ > 0.
    """
    g, t = noise.laplace_grid(laplace_scale)
    k0 = math.ceil(Fraction(theta) / Fraction(g))
    if k0 < 1:
        raise ValueError(f"theta must be positive for the empty-candidate process, got {theta!r}")
    log_q = -1.0 / float(t)
    p_theta = math.exp(k0 * log_q) / (1.0 + math.exp(log_q))
    k = rng.binomial(n_empty, p_theta).astype(np.int64)
    owner = np.repeat(np.arange(len(k)), k)
    counts = g * (k0 + noise.geometric(t, len(owner), rng))
    order = np.lexsort((-counts, owner))
    owner, counts = owner[order], counts[order]
    kept = k if keep_at_most is None else np.minimum(k, keep_at_most)
    first = np.concatenate(([0], np.cumsum(k)))[:-1]
    keep = np.arange(len(owner)) - first[owner] < kept[owner]
    return kept, counts[keep]


def sample_complement_labels(
    k: np.ndarray,
    occupied_owner: np.ndarray,
    occupied_label: np.ndarray,
    n_locations: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Thm 4.1 step 2: for each node j, ``k[j]`` distinct labels drawn uniformly from L \\ G(j).

    ``occupied_owner`` / ``occupied_label`` list G(j) for every node: pairs (j, label), sorted by
    (j, label), unique. Returns ``k.sum()`` labels, grouped by node in node order.

    Method: draw a rank r in 0..m_j−1 of the complement (m_j = |L| − |G(j)|) for every slot; redraw the
    slots whose rank repeats within a node until all ranks of a node are distinct; map each rank to the
    r-th label not in G(j). The redraw rule treats all ranks alike, so the law of the resulting set is
    invariant under permutations of the complement and therefore uniform over its k-subsets. This is exact
    whatever |G(j)| is, so no separate rejection sampler over L is needed when G(j) is small.
    """
    n_nodes = len(k)
    group_size = np.bincount(occupied_owner, minlength=n_nodes).astype(np.int64)
    n_free = n_locations - group_size
    if np.any(k > n_free):
        raise ValueError("cannot draw more labels than a node has empty candidates")
    owner = np.repeat(np.arange(n_nodes, dtype=np.int64), k)
    ranks = rng.integers(0, n_free[owner]) if len(owner) else np.empty(0, dtype=np.int64)
    while True:
        slot_key = owner * n_locations + ranks
        order = np.argsort(slot_key, kind="stable")
        repeated = np.zeros(len(ranks), dtype=bool)
        repeated[order[1:]] = slot_key[order[1:]] == slot_key[order[:-1]]
        if not repeated.any():
            break
        ranks[repeated] = rng.integers(0, n_free[owner[repeated]])
    # The r-th free label of node j is r + #{i : g_i − i ≤ r} for its sorted occupied labels g_0 < g_1 < ...
    group_start = np.concatenate(([0], np.cumsum(group_size)))
    index_in_group = np.arange(len(occupied_label)) - group_start[occupied_owner]
    shifted = occupied_owner * n_locations + (occupied_label - index_in_group)
    below = np.searchsorted(shifted, owner * n_locations + ranks, side="right") - group_start[owner]
    return ranks + below
