"""AdaTrace synthesis: with a huge ε the synthetic trips and lengths follow the real ones; walks are valid."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from mechanisms.adatrace import (
    AdaTraceParams,
    Trajectories,
    generate,
    leaf_sequences,
    noisy_top_density,
    sanitize,
)

EXTENT = (0.0, 0.0, 6000.0, 6000.0)


def walks(seed: int, n: int) -> pd.DataFrame:
    """Random walks in a 6 km box; start points drawn from three hot spots, so trips are skewed."""
    rng = np.random.default_rng(seed)
    hubs = np.array([[1000.0, 1000.0], [3000.0, 4500.0], [5000.0, 2000.0]])
    frames = []
    for i in range(n):
        k = int(rng.integers(2, 50))
        start = hubs[rng.choice(3, p=[0.5, 0.3, 0.2])] + rng.normal(0, 300, 2)
        xy = np.clip(start + np.cumsum(rng.normal(0, 250, (k, 2)), axis=0), 1.0, 5999.0)
        frames.append(pd.DataFrame({"traj_id": i, "seq": np.arange(k), "x": xy[:, 0], "y": xy[:, 1]}))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    return walks(1, 1500)


@pytest.fixture(scope="module")
def exact_release(data):
    params = AdaTraceParams(epsilon=1e6, top_level=3, max_subdivision=3, max_length=30, length_model="median")
    return sanitize(data, EXTENT, params, np.random.default_rng(4))


@pytest.fixture(scope="module")
def exact_detour_release(data):
    # max_length 100: the cap hop + 1 + detour <= 100 never binds on these (< 70-cell) routes
    params = AdaTraceParams(epsilon=1e6, top_level=3, max_subdivision=3, max_length=100)
    return sanitize(data, EXTENT, params, np.random.default_rng(6))


def _trips(grid, df: pd.DataFrame) -> np.ndarray:
    d = df.sort_values(["traj_id", "seq"])
    first, last = d.groupby("traj_id").head(1), d.groupby("traj_id").tail(1)
    return grid.top_of(first["x"].to_numpy(), first["y"].to_numpy()) * grid.n_top + grid.top_of(
        last["x"].to_numpy(), last["y"].to_numpy())


@pytest.mark.parametrize("release", ["exact_release", "exact_detour_release"])
def test_huge_epsilon_trip_distribution_is_a_multinomial_sample_of_the_real_one(data, release, request):
    exact_release = request.getfixturevalue(release)
    grid = exact_release.synopsis.grid
    n_trips = grid.n_top ** 2
    real = np.bincount(_trips(grid, data), minlength=n_trips)
    synth = np.bincount(_trips(grid, exact_release.points), minlength=n_trips)
    assert synth.sum() == real.sum() == 1500  # the noisy count rounds to the true one
    assert synth[real == 0].sum() == 0  # no mass on trips nobody made
    # synthetic trips ~ Multinomial(n, real / n): Pearson's statistic ~ chi-square(k - 1)
    seen = real > 0
    expected = real[seen] * synth.sum() / real.sum()
    chi2 = ((synth[seen] - expected) ** 2 / expected).sum()
    assert chi2 < stats.chi2.ppf(0.999, seen.sum() - 1)


def test_huge_epsilon_lengths_are_the_real_per_trip_medians(data, exact_release):
    syn = exact_release.synopsis
    grid = syn.grid
    trajs = Trajectories.from_frame(data)
    offs, _ = leaf_sequences(trajs, grid)
    real_len = np.clip(np.diff(offs), 1, 30)
    trips = _trips(grid, data)
    for t in np.unique(trips):
        lengths = real_len[trips == t]
        x = np.arange(1, 31)
        u = -np.abs((lengths[:, None] < x).sum(0) - (lengths[:, None] > x).sum(0))
        assert syn.median_length[t] in x[u == u.max()]  # the exact median set of that trip
        assert syn.synthesis_length[t] == syn.median_length[t]  # all trips are confident at this ε
    # every synthetic trajectory has the length max(median of its trip, hops between its end leaves + 1)
    pts = exact_release.points.sort_values(["traj_id", "seq"])
    first, last = pts.groupby("traj_id").head(1), pts.groupby("traj_id").tail(1)
    sizes = pts.groupby("traj_id").size().to_numpy()
    start, end = first["leaf"].to_numpy(), last["leaf"].to_numpy()
    trip = grid.leaf_top[start] * grid.n_top + grid.leaf_top[end]
    want = np.maximum(syn.synthesis_length[trip], grid.hops[start, end] + 1)
    want = np.where((start == end) & (want == 2), 1, want)
    assert (sizes == want).all()


def test_huge_epsilon_detours_are_a_multinomial_sample_of_the_real_ones(data, exact_detour_release):
    syn = exact_detour_release.synopsis
    grid = syn.grid
    offs, leaves = leaf_sequences(Trajectories.from_frame(data), grid)
    assert np.diff(offs).max() < 70
    real = np.diff(offs) - 1 - grid.hops[leaves[offs[:-1]], leaves[offs[1:] - 1]]
    pts = exact_detour_release.points.sort_values(["traj_id", "seq"])
    start = pts.groupby("traj_id")["leaf"].first().to_numpy()
    end = pts.groupby("traj_id")["leaf"].last().to_numpy()
    synth = pts.groupby("traj_id").size().to_numpy() - 1 - grid.hops[start, end]
    # a detour of 1 between equal start and end leaves is released as a one-cell trajectory (detour -1)
    synth = np.where((synth == -1) & (start == end), 1, synth)
    assert (synth >= 0).all()
    r, s = np.bincount(real, minlength=100), np.bincount(synth, minlength=100)
    seen = r > 0
    assert s[~seen].sum() == 0
    expected = r[seen] * s.sum() / r.sum()
    chi2 = ((s[seen] - expected) ** 2 / expected).sum()
    assert chi2 < stats.chi2.ppf(0.999, seen.sum() - 1)


def test_walks_are_valid_markov_paths(data):
    params = AdaTraceParams(epsilon=5.0, top_level=3, max_subdivision=4, max_length=30)
    result = sanitize(data, EXTENT, params, np.random.default_rng(8))
    syn, pts = result.synopsis, result.points
    grid = syn.grid
    assert pts["traj_id"].nunique() == syn.n_synthetic()
    leaves = pts["leaf"].to_numpy()
    same = pts["traj_id"].to_numpy()[1:] == pts["traj_id"].to_numpy()[:-1]
    assert (grid.edge_index(leaves[:-1][same], leaves[1:][same]) >= 0).all()  # only moves to touching leaves
    assert (grid.leaf_of(pts["x"].to_numpy(), pts["y"].to_numpy()) == leaves).all()  # points in their leaf
    assert (pts.groupby("traj_id")["seq"].apply(lambda s: (s.to_numpy() == np.arange(len(s))).all())).all()


def test_generated_trajectories_start_and_end_in_their_trip(data):
    params = AdaTraceParams(epsilon=5.0, top_level=3, max_subdivision=4, max_length=30)
    syn = sanitize(data, EXTENT, params, np.random.default_rng(2)).synopsis
    offs, leaves, trip = generate(syn, 400, np.random.default_rng(3))
    g = syn.grid
    assert (g.leaf_top[leaves[offs[:-1]]] == trip // g.n_top).all()
    assert (g.leaf_top[leaves[offs[1:] - 1]] == trip % g.n_top).all()
    assert syn.trip_probabilities[trip].min() > 0


def test_laplace_noise_has_scale_sensitivity_over_epsilon_part():
    params = AdaTraceParams(epsilon=2.0)
    b = params.noise_scale["grid_top"]  # 1 / (2 * 0.05 * 0.5) = 20
    assert b == pytest.approx(20.0)
    n = 200_000
    noise = noisy_top_density(np.zeros(n), params, np.random.default_rng(1))
    # E|Laplace(b)| = b and sd|Laplace(b)| = b, so the mean absolute value is b ± 5 b / sqrt(n)
    assert abs(np.abs(noise).mean() - b) < 5 * b / np.sqrt(n)
    assert abs(noise.mean()) < 5 * np.sqrt(2) * b / np.sqrt(n)


def test_public_number_of_synthetic_trajectories(data):
    params = AdaTraceParams(epsilon=1.0, top_level=3, max_subdivision=2, max_length=20, n_synthetic=77)
    result = sanitize(data, EXTENT, params, np.random.default_rng(5))
    assert result.points["traj_id"].nunique() == 77
    assert result.report["n_synthetic_source"] == "public"
