"""Noise scales (Ou et al. 2018, Eqs. 10–11, Thm 3): Eq. 11, its Lagrange conditions, the uniform case,
reference values of the closed form and the fact that Eq. 11 is not an improvement over uniform scales (G5)."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.fgs_pufferfish import FgsParams, noise_scales
from mechanisms.fgs_pufferfish.scales import paper_scales, sherman_morrison_solution, uniform_scales

SETTINGS = [
    (32, 0.2, 0.9, None),
    (48, 0.2, 0.9, None),
    (32, 0.25, 0.5, 8),
    (48, 0.3, 0.9, 16),
    (32, 0.3, 1.0, None),
    (48, 0.25, 0.5, 16),
]


def params_for(n, p, w, lags, **kw):
    return FgsParams(n_slots=n, p=p, w=w, correlation_length=lags, b_c0=1.0, **kw)


@pytest.mark.parametrize(("n", "p", "w", "lags"), SETTINGS)
@pytest.mark.parametrize("b_c0", [0.3, 1.0, 7.0])
def test_eq11_satisfies_the_constraint(n, p, w, lags, b_c0):
    # 12 Σ q β*² − 2 (Σ q β*)² = b_C0².
    s = paper_scales(params_for(n, p, w, lags), b_c0)
    q, beta = s.survival, s.beta
    assert 12 * np.sum(q * beta**2) - 2 * np.sum(q * beta) ** 2 == pytest.approx(b_c0**2, rel=1e-12)
    assert s.correlation_scales[0] == pytest.approx(b_c0, rel=1e-12)


@pytest.mark.parametrize(("n", "p", "w", "lags"), SETTINGS)
def test_eq11_is_a_stationary_point_with_eq17_multiplier(n, p, w, lags):
    # (6I − Q) β* = 𝒲'/(4λ*), and Sherman–Morrison v = solve(6I − Q, 𝒲').
    params = params_for(n, p, w, lags)
    s = paper_scales(params, 2.5)
    q, weights = params.survival, params.utility_weights
    matrix = 6 * np.eye(len(q)) - np.outer(np.ones(len(q)), q)
    assert matrix @ s.beta == pytest.approx(weights / (4 * s.lagrange), rel=1e-12)
    assert sherman_morrison_solution(q, weights) == pytest.approx(np.linalg.solve(matrix, weights), rel=1e-12)


@pytest.mark.parametrize("allocation", ["paper", "uniform"])
def test_scaling_with_b_c0(allocation):
    # β ∝ b_C0, b ∝ √b_C0, U and U_L ∝ b_C0, r_i = b_{C_i}/b_{C0} independent of b_C0.
    params = params_for(48, 0.2, 0.9, None, allocation=allocation)
    one, other = noise_scales(params, 1.0), noise_scales(params, 13.7)
    assert other.beta == pytest.approx(13.7 * one.beta, rel=1e-12)
    assert other.b == pytest.approx(np.sqrt(13.7) * one.b, rel=1e-12)
    assert other.utility == pytest.approx(13.7 * one.utility, rel=1e-12)
    assert other.location_variance == pytest.approx(13.7 * one.location_variance, rel=1e-12)
    assert other.location_std == pytest.approx(np.sqrt(13.7) * one.location_std, rel=1e-12)
    assert other.correlation_ratios == pytest.approx(one.correlation_ratios, rel=1e-12)


@pytest.mark.parametrize(("n", "p"), [(32, 0.2), (48, 0.25), (33, 0.3)])
def test_w_one_gives_uniform_scales(n, p):
    # w = 1 (constant 𝒲') gives b_k = (b_C0/sqrt(12S − 2S²))^{1/2} for every k.
    params = params_for(n, p, 1.0, None)
    s_sum = params.survival.sum()
    for b_c0 in (0.5, 4.0):
        expected = np.sqrt(b_c0 / np.sqrt(12 * s_sum - 2 * s_sum**2))
        assert paper_scales(params, b_c0).b == pytest.approx(np.full(params.k_max, expected), rel=1e-12)
        assert uniform_scales(params, b_c0).b == pytest.approx(np.full(params.k_max, expected), rel=1e-12)


# Reference values of Eq. 11 at b_C0 = 1, computed from the closed form independently of this code
# (I = N, K_max = ⌊N/2⌋+1):
# N, p, w, S, λ*, b_0, b_{k>=1}, U, U_L, σ̄_L, b_{C1}, max_i b_{Ci}
TABLE = [
    (32, 0.20, 0.9, 4.887410, 1.364393, 0.555012, 0.549482, 2.728786, 2.963531, 1.721491, 1.901044, 2.309393),
    (48, 0.20, 0.9, 4.981111, 1.438726, 0.564318, 0.559163, 2.877452, 3.126401, 1.768163, 1.713679, 2.413125),
    (32, 0.25, 0.9, 3.969932, 0.915195, 0.505766, 0.496682, 1.830390, 1.976922, 1.406031, 1.376215, 1.705755),
    (48, 0.25, 0.9, 3.996990, 0.924314, 0.506532, 0.497553, 1.848627, 1.997014, 1.413157, 1.241519, 1.717197),
    (32, 0.20, 1.0, 4.887410, 1.482029, 0.550667, 0.550667, 2.964059, 2.964059, 1.721644, 1.903498, 2.310515),
]


@pytest.mark.parametrize("row", TABLE, ids=[f"N{r[0]}-p{r[1]}-w{r[2]}" for r in TABLE])
def test_regression_values_of_the_reference_table(row):
    # To 1e-6 (the table is rounded to 6 decimals).
    n, p, w, s_sum, lam, b0, b1, u, u_l, sigma, b_c1, b_c_max = row
    s = paper_scales(params_for(n, p, w, None), 1.0)
    assert s.s == pytest.approx(s_sum, abs=1e-6)
    assert s.lagrange == pytest.approx(lam, abs=1e-6)
    assert s.b[0] == pytest.approx(b0, abs=1e-6)
    assert s.b[1:] == pytest.approx(np.full(len(s.b) - 1, b1), abs=1e-6)
    assert s.utility == pytest.approx(u, abs=1e-6)
    assert s.location_variance == pytest.approx(u_l, abs=1e-6)
    assert s.location_std == pytest.approx(sigma, abs=1e-6)
    assert s.correlation_scales[1] == pytest.approx(b_c1, abs=1e-6)
    assert s.correlation_scales.max() == pytest.approx(b_c_max, abs=1e-6)


@pytest.mark.parametrize(("n", "p", "w", "lags"), SETTINGS)
def test_eq11_is_no_better_than_uniform_or_random_allocations(n, p, w, lags):
    # G5 (docs/design.md): at equal b_C0, U(Eq. 11) >= U(uniform) and >= U of random feasible positive allocations
    # rescaled onto the constraint; equality with uniform iff 𝒲' is constant. NOT "optimal beats uniform".
    params = params_for(n, p, w, lags)
    paper, uniform = paper_scales(params, 1.0), uniform_scales(params, 1.0)
    q, weights = params.survival, params.utility_weights
    beta = np.random.default_rng(7).uniform(0.01, 1.0, size=(20_000, len(q)))
    beta /= np.sqrt(12 * (q * beta**2).sum(axis=1) - 2 * (beta @ q) ** 2)[:, None]
    random_u = beta @ (q * weights)
    assert paper.utility >= random_u.max()
    if np.ptp(weights) == 0:
        assert paper.utility == pytest.approx(uniform.utility, rel=1e-12)
    else:
        assert paper.utility > uniform.utility * (1 + 1e-9)


def test_eq11_at_the_paper_setting_is_within_a_fraction_of_a_percent_of_uniform():
    # G5: at w = 0.9, I = N it is ≈ 0.02 % worse than uniform.
    params = params_for(32, 0.2, 0.9, None)
    ratio = paper_scales(params, 1.0).utility / uniform_scales(params, 1.0).utility
    assert 1.0 < ratio < 1.001


@pytest.mark.parametrize(("n", "p", "w", "lags"), SETTINGS)
@pytest.mark.parametrize("allocation", ["paper", "uniform"])
def test_correlation_scales_are_at_least_b_c0(n, p, w, lags, allocation):
    # b_{C_i} >= b_{C0} for all i, r_0 = 1.
    s = noise_scales(params_for(n, p, w, lags, allocation=allocation), 3.0)
    assert s.correlation_ratios[0] == pytest.approx(1.0, rel=1e-12)
    assert np.all(s.correlation_scales >= 3.0 * (1 - 1e-12))
