"""Theorem 4.1: the fast empty-candidate process has the law of the literal per-candidate Laplace tests.

Tolerances are 5 standard errors of the estimator under the theoretical law; KS tests use p > 0.001.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy.stats import chisquare, ks_2samp

from mechanisms.prefix_tree.sampling import sample_complement_labels, sample_empty_passes
from trajpub.noise import laplace

M, REPS = 1012, 4000
SCALE = 10.0  # ε̄ = 0.1, as in the spec's prototype check
THETA = 2 * math.sqrt(2) * SCALE
P_THETA = 0.5 * math.exp(-2 * math.sqrt(2))


@pytest.fixture(scope="module")
def literal():
    """m explicit tests 0 + Laplace(b) ≥ θ per repetition (Procedure 1, lines 9-13)."""
    noise = laplace(SCALE, (REPS, M), np.random.default_rng(101))
    passed = noise >= THETA
    return passed.sum(axis=1), noise[passed], noise


@pytest.fixture(scope="module")
def fast():
    return sample_empty_passes(np.full(REPS, M), None, SCALE, THETA, np.random.default_rng(202))


def assert_binomial_moments(k: np.ndarray) -> None:
    mean, var = M * P_THETA, M * P_THETA * (1 - P_THETA)
    assert abs(k.mean() - mean) <= 5 * math.sqrt(var / REPS)
    excess_kurtosis = (1 - 6 * P_THETA * (1 - P_THETA)) / var
    se_var = var * math.sqrt(2 / (REPS - 1) + excess_kurtosis / REPS)
    assert abs(k.var(ddof=1) - var) <= 5 * se_var


def test_number_passing_is_binomial_in_both_processes(literal, fast):
    assert_binomial_moments(literal[0])
    assert_binomial_moments(fast[0])


def test_passing_counts_have_the_exponential_tail_law(literal, fast):
    for counts in (literal[1], fast[1]):
        assert counts.min() >= THETA
        assert abs(counts.mean() - (THETA + SCALE)) <= 5 * SCALE / math.sqrt(len(counts))
    assert ks_2samp(literal[1], fast[1]).pvalue > 0.001


def test_counts_are_grouped_by_node_in_descending_order(fast):
    k, counts = fast
    assert len(counts) == k.sum()
    bounds = np.concatenate(([0], np.cumsum(k)))
    for j in range(50):
        group = counts[bounds[j] : bounds[j + 1]]
        assert np.all(np.diff(group) <= 0)


def test_truncated_draw_matches_the_largest_of_the_full_draw(literal):
    # parent_bound only ever keeps the largest K passing counts of a node; drawing just those
    # (order statistics) must give the law of "draw all, sort, keep K".
    cap = 3
    k_lit, _, noise = literal
    top_lit = -np.sort(-np.where(noise >= THETA, noise, -np.inf), axis=1)[:, :cap]
    kept, counts = sample_empty_passes(
        np.full(REPS, M), np.full(REPS, cap), SCALE, THETA, np.random.default_rng(7)
    )
    assert np.all(kept <= cap)
    assert abs(np.mean(kept == cap) - np.mean(np.minimum(k_lit, cap) == cap)) <= 5 * math.sqrt(
        0.25 * 2 / REPS
    )
    bounds = np.concatenate(([0], np.cumsum(kept)))
    for rank in range(cap):
        has = kept > rank
        fast_stat = counts[bounds[:-1][has] + rank]
        lit_stat = top_lit[:, rank][np.minimum(k_lit, cap) > rank]
        assert ks_2samp(fast_stat, lit_stat).pvalue > 0.001, rank


def _occupied(groups: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    owner = np.concatenate([np.full(len(g), j) for j, g in enumerate(groups)]).astype(np.int64)
    labels = np.concatenate([np.asarray(sorted(g), dtype=np.int64) for g in groups])
    return owner, labels


def test_complement_labels_are_distinct_free_and_exhaustive():
    n_locations = 12
    groups = [[], [0, 1, 2], [11], [3, 5, 7, 9], list(range(12)), [0, 11], list(range(1, 12))]
    free = [sorted(set(range(n_locations)) - set(g)) for g in groups]
    rng = np.random.default_rng(5)
    owner, labels = _occupied(groups)
    for _ in range(200):
        k = np.array([rng.integers(0, len(f) + 1) for f in free])
        drawn = sample_complement_labels(k, owner, labels, n_locations, rng)
        bounds = np.concatenate(([0], np.cumsum(k)))
        for j, f in enumerate(free):
            mine = drawn[bounds[j] : bounds[j + 1]].tolist()
            assert len(set(mine)) == len(mine) == k[j] and set(mine) <= set(f)
    all_free = sample_complement_labels(np.array([len(f) for f in free]), owner, labels, n_locations, rng)
    assert sorted(all_free.tolist()) == sorted(x for f in free for x in f)


def test_complement_labels_are_uniform_over_subsets():
    # L = 0..9, G = {2, 5, 7}: the 35 three-subsets of the 7 free labels must be equally likely.
    reps = 14000
    owner, labels = _occupied([[2, 5, 7]] * reps)
    drawn = sample_complement_labels(np.full(reps, 3), owner, labels, 10, np.random.default_rng(9))
    subsets = [tuple(sorted(s)) for s in drawn.reshape(reps, 3).tolist()]
    free = [0, 1, 3, 4, 6, 8, 9]
    observed = [subsets.count(s) for s in combinations(free, 3)]
    assert sum(observed) == reps
    assert chisquare(observed).pvalue > 0.001


def test_too_many_labels_is_an_error():
    owner, labels = _occupied([[0, 1]])
    with pytest.raises(ValueError, match="more labels"):
        sample_complement_labels(np.array([3]), owner, labels, 4, np.random.default_rng(0))


def test_subcritical_expand_count_gives_the_requested_branching():
    # An expanded node of a 1000-location universe: on average 0.5 of its spurious children reach θ_exp.
    from mechanisms.prefix_tree import PrefixTreeParams

    params = PrefixTreeParams(epsilon=1.0, height=20)
    threshold = params.subcritical_expand_count(1000, branching=0.5)
    reps = 4000
    kept, counts = sample_empty_passes(
        np.full(reps, 1000), None, params.laplace_scale, params.theta, np.random.default_rng(11)
    )
    owner = np.repeat(np.arange(reps), kept)
    reaching = np.bincount(owner, counts >= threshold, minlength=reps)
    # Binomial(1000, 0.5/1000) per node: variance ≈ 0.5.
    assert abs(reaching.mean() - 0.5) <= 5 * math.sqrt(0.5 / reps)
