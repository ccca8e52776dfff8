"""Constrained inference (Sec. IV-B): isotonic paths (Thm 4.2), Phase B consolidation,
the intermediate estimates and consistency (G6, G7)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import isotonic_regression

from mechanisms.prefix_tree import (
    NoisyPrefixTree,
    PrefixTreeParams,
    consistent_estimates,
    intermediate_estimates,
    isotonic_non_decreasing,
    sanitize,
)


def minimax(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Thm 4.2 literally: L_m = min_{j≥m} max_{i≤j} mean[i,j] and U_m = max_{i≤m} min_{j≥i} mean[i,j]."""
    n = len(s)
    mean = np.full((n, n), np.nan)
    for i in range(n):
        for j in range(i, n):
            mean[i, j] = s[i : j + 1].mean()
    lower = np.array([min(max(mean[i, j] for i in range(j + 1)) for j in range(m, n)) for m in range(n)])
    upper = np.array([max(min(mean[i, j] for j in range(i, n)) for i in range(m + 1)) for m in range(n)])
    return lower, upper


@pytest.fixture(scope="module")
def sequences():
    rng = np.random.default_rng(42)
    seqs = [rng.normal(50, 20, rng.integers(1, 13)) for _ in range(400)]
    seqs += [np.round(rng.normal(5, 3, rng.integers(1, 13))) for _ in range(100)]  # with ties
    return seqs


def test_batched_pava_equals_the_minimax_formula(sequences):
    # PAVA on all paths at once == Thm 4.2's L_m == U_m, within 1e-9.
    bounds = np.concatenate(([0], np.cumsum([len(s) for s in sequences])))
    fitted = isotonic_non_decreasing(np.concatenate(sequences), bounds)
    for s, lo, hi in zip(sequences, bounds[:-1], bounds[1:], strict=True):
        lower, upper = minimax(s)
        assert np.allclose(lower, upper, atol=1e-9, rtol=0)
        assert np.allclose(fitted[lo:hi], lower, atol=1e-9, rtol=0)
        assert np.allclose(fitted[lo:hi], isotonic_regression(s).x, atol=1e-9, rtol=0)


def test_pava_is_monotone_preserves_sums_and_leaves_monotone_input_alone(sequences):
    bounds = np.concatenate(([0], np.cumsum([len(s) for s in sequences])))
    fitted = isotonic_non_decreasing(np.concatenate(sequences), bounds)
    for s, lo, hi in zip(sequences, bounds[:-1], bounds[1:], strict=True):
        assert np.all(np.diff(fitted[lo:hi]) >= -1e-12)
        assert fitted[lo:hi].sum() == pytest.approx(s.sum(), abs=1e-9)
    monotone = np.sort(np.concatenate(sequences))
    assert np.array_equal(isotonic_non_decreasing(monotone, np.array([0, len(monotone)])), monotone)
    # Segments never pool across a boundary, even when the joint sequence decreases.
    assert isotonic_non_decreasing(np.array([5.0, 1.0, 9.0, 2.0]), np.array([0, 1, 2, 4])).tolist() == [
        5.0, 1.0, 5.5, 5.5,
    ]  # fmt: skip


def hand_tree(parent, label, count, height=3):
    parent, label = np.asarray(parent), np.asarray(label)
    depth = np.zeros(len(parent), dtype=np.int64)
    for v in range(1, len(parent)):
        depth[v] = depth[parent[v]] + 1
    level_start = np.searchsorted(depth, np.arange(depth.max() + 2))
    return NoisyPrefixTree(
        params=PrefixTreeParams(epsilon=1.0, height=height, expansion_policy="literal"),
        n_locations=int(label.max()) + 1,
        parent=parent,
        label=label,
        depth=depth,
        count=np.asarray(count, dtype=float),
        spurious=np.zeros(len(parent), dtype=bool),
        level_start=level_start,
    )


def test_consolidation_is_the_unweighted_mean_over_leaf_paths():
    # Root → a(10) → {b(12), c(4)}: path b gives (12, 10) → (11, 11); path c gives (4, 10) unchanged.
    tree = hand_tree([-1, 0, 1, 1], [-1, 0, 1, 2], [np.nan, 10.0, 12.0, 4.0])
    est = intermediate_estimates(tree)
    assert np.isnan(est[0])
    assert est[1:].tolist() == pytest.approx([10.5, 11.0, 4.0], abs=1e-12)


def test_paper_and_projected_top_down_on_hand_cases():
    # Parent a (c̄ = 10) with children c̃ = (6, 7): both modes subtract (13 − 10)/2 = 1.5 from each.
    tree = hand_tree([-1, 0, 1, 1], [-1, 0, 1, 2], [np.nan, 10.0, 6.0, 7.0])
    c_tilde = np.array([np.nan, 10.0, 6.0, 7.0])
    for mode in ("paper", "projected"):
        assert consistent_estimates(tree, c_tilde, mode)[1:].tolist() == pytest.approx([10.0, 4.5, 5.5])
    # Children (30, 1) under c̄ = 10: the paper's formula gives (19.5, −9.5), a child above its parent and
    # a negative one (G7); the projection gives (10, 0).
    c_tilde = np.array([np.nan, 10.0, 30.0, 1.0])
    assert consistent_estimates(tree, c_tilde, "paper")[2:].tolist() == pytest.approx([19.5, -9.5])
    assert consistent_estimates(tree, c_tilde, "projected")[2:].tolist() == pytest.approx([10.0, 0.0])
    # Children that already fit are unchanged.
    c_tilde = np.array([np.nan, 10.0, 3.0, 4.0])
    for mode in ("paper", "projected"):
        assert consistent_estimates(tree, c_tilde, mode)[2:].tolist() == [3.0, 4.0]


def bisection_projection(x: np.ndarray, cap: float) -> np.ndarray:
    if x.sum() <= cap:
        return x
    lo, hi = 0.0, x.max()
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.maximum(x - mid, 0).sum() > cap else (lo, mid)
    return np.maximum(x - hi, 0)


def test_projection_matches_a_bisection_reference():
    # 300 parents with random fan-out under one level-1 node each; random caps, some below the sums.
    rng = np.random.default_rng(3)
    fan_out = rng.integers(1, 9, 300)
    parent = [-1] + [0] * 300 + np.repeat(np.arange(1, 301), fan_out).tolist()
    label = [-1, *range(300), *np.concatenate([np.arange(f) for f in fan_out]).tolist()]
    tree = hand_tree(parent, label, np.ones(len(parent)))
    c_tilde = np.concatenate(([np.nan], rng.uniform(0, 60, 300), rng.exponential(10, fan_out.sum())))
    got = consistent_estimates(tree, c_tilde, "projected")
    bounds = np.concatenate(([301], 301 + np.cumsum(fan_out)))
    for w in range(300):
        lo, hi = bounds[w], bounds[w + 1]
        assert np.allclose(got[lo:hi], bisection_projection(c_tilde[lo:hi], c_tilde[w + 1]), atol=1e-7)


@pytest.fixture(scope="module")
def noisy_results(random_walk_csr):
    offsets, locs = random_walk_csr(20000, 60, 4.0, seed=12)
    out = {}
    for mode in ("paper", "projected"):
        params = PrefixTreeParams(epsilon=0.5, height=6, consistency=mode)
        out[mode] = sanitize(offsets, locs, 60, params, np.random.default_rng(13))
    return out


@pytest.mark.parametrize("mode", ["paper", "projected"])
def test_intermediate_estimates_stay_above_theta(noisy_results, mode):
    # Every c̃(v) is an average of noisy counts ≥ θ.
    result = noisy_results[mode]
    c_tilde = intermediate_estimates(result.tree)
    assert np.all(c_tilde[1:] >= result.params.theta - 1e-9)


@pytest.mark.parametrize("mode", ["paper", "projected"])
def test_consistency_constraints(noisy_results, mode):
    # Children sum to at most their parent; level 1 is unchanged; projected estimates lie in [0, parent].
    result = noisy_results[mode]
    tree = result.tree
    c_tilde = intermediate_estimates(tree)
    c_bar = result.estimates
    assert np.array_equal(c_bar, consistent_estimates(tree, c_tilde, mode), equal_nan=True)
    level1 = slice(tree.level_start[1], tree.level_start[2])
    assert np.array_equal(c_bar[level1], c_tilde[level1])
    child_sum_bar = np.bincount(tree.parent[1:], c_bar[1:], minlength=len(c_bar))
    child_sum_tilde = np.bincount(tree.parent[1:], c_tilde[1:], minlength=len(c_bar))
    internal = np.flatnonzero(tree.n_children() > 0)
    internal = internal[internal > 0]
    assert np.all(child_sum_bar[internal] <= c_bar[internal] + 1e-9 * np.maximum(1, np.abs(c_bar[internal])))
    fits = internal[child_sum_tilde[internal] <= c_bar[internal]]
    unchanged = np.isin(tree.parent, fits)
    assert np.array_equal(c_bar[unchanged], c_tilde[unchanged])
    reduced = np.isin(tree.parent, internal[child_sum_tilde[internal] > c_bar[internal]])
    assert reduced.any() and np.all(c_bar[reduced] <= c_tilde[reduced])
    child = np.flatnonzero(tree.depth >= 2)
    if mode == "projected":
        assert np.all(c_bar[1:] >= 0)
        assert np.all(c_bar[child] <= c_bar[tree.parent[child]] + 1e-9)
