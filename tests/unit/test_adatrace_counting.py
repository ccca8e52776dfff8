"""AdaTrace's grid, counting and per-trajectory sensitivity on small exact cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mechanisms.adatrace import (
    AdaptiveGrid,
    Trajectories,
    feature_counts,
    leaf_density,
    leaf_sequences,
    noisy_medians,
    subdivision,
    top_density,
)


def frame(trajs: list[list[tuple[float, float]]]) -> pd.DataFrame:
    rows = [(i, s, x, y) for i, t in enumerate(trajs) for s, (x, y) in enumerate(t)]
    return pd.DataFrame(rows, columns=["traj_id", "seq", "x", "y"])


def test_subdivision_formula_on_a_hand_case():
    # m = ceil(sqrt(max(n, 0) * eps_leaf / c2)), eps_leaf = 0.125, c2 = 5: n*0.025 under the root
    noisy = np.array([-3.0, 0.0, 40.0, 41.0, 1000.0, 1001.0, 1e6])
    assert subdivision(noisy, 0.125, 5.0, 8).tolist() == [1, 1, 1, 2, 5, 6, 8]
    assert subdivision(noisy, 0.125, 5.0, 5).tolist() == [1, 1, 1, 2, 5, 5, 5]


@pytest.fixture
def small_grid() -> AdaptiveGrid:
    # 2x2 top level over 4 x 4 m; top cell 1 (bottom right) split 2x2 -> leaves 1..4; leaves 0, 5, 6 whole
    return AdaptiveGrid((0.0, 0.0, 4.0, 4.0), 2, np.array([1, 2, 1, 1]))


def test_leaf_numbering_and_bounds(small_grid):
    g = small_grid
    assert g.n_leaves == 7
    assert g.leaf_bounds.tolist() == [[0, 0, 2, 2], [2, 0, 3, 1], [3, 0, 4, 1], [2, 1, 3, 2], [3, 1, 4, 2],
                                      [0, 2, 2, 4], [2, 2, 4, 4]]
    x = np.array([0.5, 2.5, 3.5, 2.5, 3.5, 1.0, 3.0, 4.0, -1.0])
    y = np.array([0.5, 0.5, 0.5, 1.5, 1.5, 3.0, 3.0, 4.0, -1.0])
    assert g.leaf_of(x, y).tolist() == [0, 1, 2, 3, 4, 5, 6, 6, 0]  # outside: nearest border cell
    rng = np.random.default_rng(3)
    leaves = rng.integers(0, 7, 500)
    px, py = g.sample_points(leaves, rng)
    assert (g.leaf_of(px, py) == leaves).all()


def test_adjacency_on_an_adaptive_grid(small_grid):
    g = small_grid
    nbrs = {a: sorted(g.edges[g.edges[:, 0] == a, 1].tolist()) for a in range(7)}
    assert nbrs[0] == [1, 3, 5, 6]  # 6 only through the corner (2, 2)
    assert nbrs[2] == [1, 3, 4]  # 3 through the corner (3, 1)
    assert nbrs[4] == [1, 2, 3, 6]
    assert g.hops[2, 5] == 2 and g.hops[0, 6] == 1 and g.hops[2, 2] == 0
    assert (g.edge_index(np.array([0, 0]), np.array([6, 2])) >= 0).tolist() == [True, False]


def test_interpolation_inserts_the_crossed_leaves():
    g = AdaptiveGrid((0.0, 0.0, 6.0, 6.0), 6, np.ones(36, np.int64))
    trajs = Trajectories.from_frame(frame([[(0.5, 0.5), (0.6, 0.5), (5.5, 0.5)], [(2.5, 2.5)]]))
    offs, leaves = leaf_sequences(trajs, g)
    assert offs.tolist() == [0, 6, 7]
    assert leaves.tolist() == [0, 1, 2, 3, 4, 5, 14]
    first = leaves[offs[0]:offs[1]]
    assert (g.edge_index(first[:-1], first[1:]) >= 0).all()


def test_counts_on_an_exact_case():
    g = AdaptiveGrid((0.0, 0.0, 6.0, 6.0), 2, np.array([1, 1, 1, 3]))  # top cells 3 m, cell 3 split 3x3
    t0 = [(0.5, 0.5), (1.0, 1.0), (3.5, 0.5), (3.5, 3.5)]  # top 0, 0, 1, 3 (leaf 3)
    t1 = [(4.5, 4.5), (5.5, 5.5)]  # top 3 only: leaves 7 and 11
    c = feature_counts(Trajectories.from_frame(frame([t0, t1])), g, transition_cap=1.0, max_length=10)
    assert np.allclose(c.leaf_density[[0, 1, 3, 7, 11]], [0.5, 0.25, 0.25, 0.5, 0.5])
    assert c.leaf_density.sum() == pytest.approx(2.0)
    assert c.trips[0, 3] == 1 and c.trips[3, 3] == 1 and c.trips.sum() == 2
    # t0: leaves 0 -> 1 -> 3 (2 moves, 1/2 each); t1: 7 -> 11 (1 move, weight 1)
    e = g.edge_index(np.array([0, 1, 7]), np.array([1, 3, 11]))
    assert (e >= 0).all()
    assert np.allclose(c.transitions[e], [0.5, 0.5, 1.0]) and c.transitions.sum() == pytest.approx(2.0)
    assert c.length_hist[0 * 4 + 3, 2] == 1 and c.length_hist[3 * 4 + 3, 1] == 1 and c.length_hist.sum() == 2
    # detours: t0 has 3 leaves but leaf 0 touches leaf 3 (corner (3, 3)): 3 - (1 + 1) = 1; t1: 2 - (1 + 1) = 0
    assert g.hops[0, 3] == 1 and g.hops[7, 11] == 1
    assert c.detour_hist[:3].tolist() == [1, 1, 0] and c.detour_hist.sum() == 2


def _random_trajectories(seed: int, n: int) -> list[list[tuple[float, float]]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k = int(rng.integers(1, 40))
        xy = np.clip(np.cumsum(rng.normal(0, 400, (k, 2)), axis=0) + rng.uniform(0, 6000, 2), 0, 5999.9)
        out.append([tuple(p) for p in xy])
    return out


@pytest.mark.parametrize("cap", [1.0, 2.5])
def test_one_trajectory_changes_each_count_vector_by_at_most_its_sensitivity(cap):
    g = AdaptiveGrid((0.0, 0.0, 6000.0, 6000.0), 3, np.array([1, 2, 3, 1, 4, 1, 2, 1, 1]))
    trajs = _random_trajectories(5, 30)
    full = feature_counts(Trajectories.from_frame(frame(trajs)), g, cap, max_length=20)
    full_top = top_density(Trajectories.from_frame(frame(trajs)), g)
    worst = {"top": 0.0, "leaf": 0.0, "trans": 0.0, "trip": 0.0, "utility": 0.0, "detour": 0.0}
    for i in range(len(trajs)):
        rest = Trajectories.from_frame(frame(trajs[:i] + trajs[i + 1:]))
        c = feature_counts(rest, g, cap, max_length=20)
        worst["top"] = max(worst["top"], np.abs(full_top - top_density(rest, g)).sum())
        worst["leaf"] = max(worst["leaf"], np.abs(full.leaf_density - c.leaf_density).sum())
        worst["trans"] = max(worst["trans"], np.abs(full.transitions - c.transitions).sum())
        worst["trip"] = max(worst["trip"], np.abs(full.trips - c.trips).sum())
        worst["detour"] = max(worst["detour"], np.abs(full.detour_hist - c.detour_hist).sum())
        # the exponential mechanism's utility -|#{<x} - #{>x}| per trip and candidate
        for h, h2 in ((full.length_hist, c.length_hist),):
            below, below2 = np.cumsum(h, 1) - h, np.cumsum(h2, 1) - h2
            u = -np.abs(below - (h.sum(1, keepdims=True) - below - h))
            u2 = -np.abs(below2 - (h2.sum(1, keepdims=True) - below2 - h2))
            worst["utility"] = max(worst["utility"], np.abs(u - u2).max())
    # densities and trips: exactly 1 (every trajectory has points); transitions: at most the cap
    assert worst["top"] == pytest.approx(1.0) and worst["leaf"] == pytest.approx(1.0)
    assert worst["trip"] == 1.0 and worst["utility"] == 1.0 and worst["detour"] == 1.0
    assert worst["trans"] <= cap + 1e-9
    assert worst["trans"] >= min(cap, 1.0) - 1e-9  # some trajectory with moves reaches min(cap, its moves)


def test_densities_of_a_trajectory_sum_to_one():
    g = AdaptiveGrid((0.0, 0.0, 6000.0, 6000.0), 3, np.array([1, 2, 3, 1, 4, 1, 2, 1, 1]))
    trajs = Trajectories.from_frame(frame(_random_trajectories(9, 12)))
    assert top_density(trajs, g).sum() == pytest.approx(12.0)
    assert leaf_density(trajs, g).sum() == pytest.approx(12.0)


def test_noisy_median_with_a_huge_epsilon_is_the_median():
    hist = np.zeros((3, 10))
    hist[0, 1], hist[0, 2], hist[0, 6] = 1, 2, 1  # lengths 2, 3, 3, 7: only x = 3 has #{<x} = #{>x}
    hist[1, 4] = 5  # all lengths 5
    hist[2, [0, 9]] = [1, 1]  # lengths 1 and 10: every x in 2..9 has utility 0 (ties)
    med = noisy_medians(hist, 1e6, 1.0, np.random.default_rng(0))
    assert med[0] == 3 and med[1] == 5 and 2 <= med[2] <= 9


def test_noisy_median_follows_the_exponential_mechanism():
    # lengths {1: 3, 4: 1} over 1..5: u(x) = -|#{<x} - #{>x}| = [-|0-1|, -|3-1|, -|3-1|, -|3-0|, -|4-0|]
    h = np.array([[3.0, 0, 0, 1, 0]])
    u = np.array([-1.0, -2, -2, -3, -4])
    eps = 1.2
    p = np.exp(eps * u / 2)
    p /= p.sum()
    n = 40_000
    draws = noisy_medians(np.repeat(h, n, axis=0), eps, 1.0, np.random.default_rng(11)) - 1
    obs = np.bincount(draws, minlength=5)
    chi2 = ((obs - n * p) ** 2 / (n * p)).sum()
    assert chi2 < 18.47  # chi-square(4) at p = 0.001
