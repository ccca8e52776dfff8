"""Privacy accounting (Ou et al. 2018, Thm 4; docs/design.md, FGS-Pufferfish): the analytic ε of Thm 4, its
calibration, and the empirical ε̂."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mechanisms.fgs_pufferfish import (
    CorrelationStats,
    FgsParams,
    analytic_epsilon,
    calibrate_b_c0,
    correlation_stats,
    empirical_epsilon,
    noise_calibration,
    noise_scales,
    noisy_correlations,
    object_correlation,
)
from mechanisms.fgs_pufferfish.privacy import theorem4_epsilon, weighted_diameter
from trajpub.errors import InputError, ParameterError

N = 32


def user_days(n_users: int, n_days: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(0, 100 * (u + 1), size=(n_days, N, 2)).cumsum(axis=1) for u in range(n_users)]


@pytest.fixture(scope="module")
def correlations():
    params = FgsParams(n_slots=N, b_c0=1.0)
    return np.stack([object_correlation(days, params) for days in user_days(5, 6, 31)])


def test_theorem4_by_hand():
    # ε_0 = max_{u≠v} Σ_i |C_i^u − C_i^v|/b_{C_i}; Δ from the mean shifts.
    c = np.array([[4.0, 1.0], [1.0, 2.0], [3.0, -1.0]])
    b = np.array([1.0, 2.0])
    eps0, delta = theorem4_epsilon(c, np.zeros_like(c), b)
    assert eps0 == pytest.approx(max(3 + 0.5, 1 + 1.0, 2 + 1.5))
    assert delta == 0.0
    _, delta = theorem4_epsilon(c, np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 4.0]]), b)
    assert delta == pytest.approx(1 + 2.0)


def test_epsilon_is_symmetric_and_order_free(correlations):
    # ε_0 is symmetric in (u, v); the supremum does not depend on the order of the objects.
    weights = np.linspace(1, 2, N)
    a = weighted_diameter(correlations[:, 0], weights)
    assert weighted_diameter(correlations[::-1, 0], weights) == a
    assert weighted_diameter(correlations[[0, 3]][:, 0], weights) == weighted_diameter(
        correlations[[3, 0]][:, 0], weights)
    brute = max(np.abs(u - v) @ weights for u in correlations[:, 0] for v in correlations[:, 0])
    assert a == pytest.approx(brute, rel=1e-12)


def test_delta_is_zero_with_shared_scales(correlations):
    # scales are the same for every object, so Δ = 0 and ε = ε_0.
    params = FgsParams(n_slots=N, b_c0=2.0)
    eps = analytic_epsilon(correlations, params)
    assert eps.delta == (0.0, 0.0)
    scales = noise_scales(params, 2.0)
    eps0, _ = theorem4_epsilon(correlations[:, 1], np.zeros((5, N)), scales.correlation_scales)
    assert eps.epsilon_y == pytest.approx(eps0, rel=1e-12)
    assert eps.total == pytest.approx(eps.epsilon_x + eps.epsilon_y)


def test_epsilon_is_zero_for_identical_correlations(correlations):
    # Identical correlations: nothing to tell apart, ε = 0.
    same = np.repeat(correlations[:1], 4, axis=0)
    eps = analytic_epsilon(same, FgsParams(n_slots=N, b_c0=1.0))
    assert eps.epsilon_x == 0.0 and eps.epsilon_y == 0.0


def test_epsilon_scales_as_one_over_b_c0_and_epsilon_times_sigma_squared_is_constant(correlations):
    # ε ∝ 1/b_C0 and ε·σ̄_L² constant.
    values = []
    for sigma in (10.0, 35.0, 400.0):
        params = FgsParams(n_slots=N, location_std_m=sigma)
        eps = analytic_epsilon(correlations, params)
        values.append((eps.epsilon_x * sigma**2, eps.epsilon_y * sigma**2, eps.b_c0[0]))
    assert [v[0] for v in values] == pytest.approx([values[0][0]] * 3, rel=1e-12)
    assert [v[1] for v in values] == pytest.approx([values[0][1]] * 3, rel=1e-12)
    one = analytic_epsilon(correlations, FgsParams(n_slots=N, b_c0=1.0))
    five = analytic_epsilon(correlations, FgsParams(n_slots=N, b_c0=5.0))
    assert five.epsilon_x == pytest.approx(one.epsilon_x / 5, rel=1e-12)


@pytest.mark.parametrize("estimator", ["circular", "truncated"])
@pytest.mark.parametrize("allocation", ["paper", "uniform"])
def test_calibration_returns_the_target_exactly(correlations, estimator, allocation):
    # calibrate b_C0 from a target ε and recompute ε: the target, exactly (split over x and y).
    params = FgsParams(n_slots=N, epsilon=3.0, correlation_estimator=estimator, allocation=allocation)
    corr = np.stack([object_correlation(days, params) for days in user_days(5, 6, 31)])
    b_c0 = calibrate_b_c0(corr, params)
    assert noise_calibration(params, corr) == b_c0
    eps = analytic_epsilon(corr, params, b_c0)
    assert eps.epsilon_x == pytest.approx(1.5, rel=1e-12) and eps.epsilon_y == pytest.approx(1.5, rel=1e-12)
    assert eps.total == pytest.approx(3.0, rel=1e-12)
    json.dumps(eps.to_dict())


def test_calibration_refusals(correlations):
    params = FgsParams(n_slots=N, epsilon=1.0)
    with pytest.raises(ParameterError):
        noise_calibration(params)
    with pytest.raises(InputError, match="same temporal correlation"):
        calibrate_b_c0(np.repeat(correlations[:1], 3, axis=0), params)
    with pytest.raises(InputError, match="two objects"):
        analytic_epsilon(correlations[:1], FgsParams(n_slots=N, b_c0=1.0))
    with pytest.raises(InputError, match="shape"):
        analytic_epsilon(correlations[:, :, :5], FgsParams(n_slots=N, b_c0=1.0))
    assert noise_calibration(FgsParams(n_slots=N, b_c0=2.0)) == (2.0, 2.0)


def test_scale_estimators_recover_a_laplace_scale():
    # Empirical ε̂ (docs/design.md): b̂ = sqrt(Var/2) and the MLE mean|x − median| both estimate b.
    # SE of the MLE is b/√R; of the moment estimator ≈ b·sqrt(5/4)/√R (Var(x²) = 20b⁴).
    rng = np.random.default_rng(32)
    r, b = 200_000, 3.0
    samples = rng.laplace(1.0, b, size=(r, 2, 4))
    for estimator, se in (("moments", b * np.sqrt(1.25 / r)), ("mle", b / np.sqrt(r))):
        stats = correlation_stats(samples, estimator)
        assert np.all(np.abs(stats.scale - b) < 4 * se)
        assert np.all(np.abs(stats.mean - 1.0) < 4 * b * np.sqrt(2 / r))
    with pytest.raises(ParameterError):
        correlation_stats(samples, "median")


def test_empirical_epsilon_is_the_plug_in_formula():
    # Empirical ε̂, by hand: pooled b̂_i = min_u b̂_i^u, ε̂ = max pairwise Σ |μ^u − μ^v|/b̂.
    stats = [
        CorrelationStats(np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[1.0, 2.0], [1.0, 1.0]]), 10),
        CorrelationStats(np.array([[2.0, 1.0], [1.0, 1.0]]), np.array([[2.0, 4.0], [0.5, 1.0]]), 12),
    ]
    eps = empirical_epsilon(stats)
    assert eps.epsilon_x == pytest.approx(2 / 1 + 1 / 2)
    assert eps.epsilon_y == 0.0
    assert eps.n_samples == 10 and eps.n_objects == 2


def test_noisy_correlations_per_day_and_ensemble():
    # C' of repeated releases; per-day gives R·D samples, ensemble R. Their means agree (the
    # ensemble C' is the mean of the per-day ones), and the mean of C'_0 is E[C'_0] of Eq. 14 (>= δC̄_0).
    params = FgsParams(n_slots=N, b_c0=50.0)
    days = user_days(1, 4, 33)[0]
    per_day = noisy_correlations(days, params, np.random.default_rng(34), n_realizations=3000)
    ensemble = noisy_correlations(days, params, np.random.default_rng(34), n_realizations=3000, ensemble=True)
    assert per_day.shape == (12000, 2, N) and ensemble.shape == (3000, 2, N)
    assert per_day.reshape(3000, 4, 2, N).mean(axis=1) == pytest.approx(ensemble, rel=1e-12)
    assert np.all(per_day[:, :, 0].mean(axis=0) > noise_scales(params, 50.0).mean_shift[0])


def test_empirical_epsilon_separates_different_users_from_the_noise_floor():
    # Two copies of one user differ only by Monte-Carlo error; two different users differ by their correlations.
    params = FgsParams(n_slots=N, location_std_m=50.0)
    a, b = user_days(2, 4, 35)
    rng = np.random.default_rng(36)
    stats = {name: correlation_stats(noisy_correlations(d, params, rng, n_realizations=2000))
             for name, d in (("a1", a), ("a2", a), ("b", b))}
    floor = empirical_epsilon([stats["a1"], stats["a2"]])
    apart = empirical_epsilon([stats["a1"], stats["b"]])
    assert apart.epsilon_x > 5 * floor.epsilon_x and apart.epsilon_y > 5 * floor.epsilon_y
