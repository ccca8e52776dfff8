"""Phase 2: the Laplace perturbation (Chen, Li, Zhang 2020, §5.2–5.3, Alg. 2)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mechanisms.kpsi_anonymity import (
    KPsiParams,
    closeness,
    laplace_disc_probability,
    laplace_from_uniform,
    noise_scales,
    open_centred_uniform,
    perturb,
)
from trajpub.errors import InputError

# one timestamp with k = 3 locations (P = 1): x range 30 m, y range 0 m
L = np.array([[[0.0, 5.0], [10.0, 5.0], [30.0, 5.0]]])
PSI = np.array([20.0])


def test_scales_follow_the_paper_and_the_alternative_modes_exactly():
    eps = np.array([0.5])
    paper = noise_scales(L, PSI, eps, KPsiParams(epsilon=0.5), cap=500.0)
    assert paper.tolist() == [[30.0 / 0.5, 1.0 / 0.5]]  # y range 0 -> floor 1 m (docs/design.md, A8)
    floor = noise_scales(L, PSI, eps, KPsiParams(noise_floor_m=4.0), cap=500.0)
    assert floor.tolist() == [[60.0, 8.0]]
    diameter = noise_scales(L, PSI, eps, KPsiParams(noise_scale="diameter"), cap=500.0)
    assert diameter.tolist() == [[80.0, 80.0]]
    fixed = noise_scales(L, PSI, eps, KPsiParams(noise_scale="data_independent"), cap=500.0)
    assert fixed.tolist() == [[2000.0, 2000.0]]


def test_the_sampler_is_the_papers_inverse_cdf_on_the_open_interval():
    b = 3.0
    got = laplace_from_uniform(np.array([0.25, -0.25, 0.0]), b)
    assert got == pytest.approx([b * np.log(2), -b * np.log(2), 0])
    for bad in (0.5, -0.5, np.nan):
        with pytest.raises(InputError):
            laplace_from_uniform(np.array([bad]), b)
    # Generator.random's extremes 0 and 1 - 2^-53 map strictly inside (-1/2, 1/2), symmetrically
    r = open_centred_uniform(np.array([0.0, 1.0 - 2.0**-53, 0.5]))
    assert np.all(np.abs(r) < 0.5) and r[0] == -r[1] and r[2] == 2.0**-54


def test_noise_has_the_laplace_distribution():
    n, b = 100_000, 7.0
    x = laplace_from_uniform(open_centred_uniform(np.random.default_rng(31).random(n)), b)
    # mean: sd sqrt(2) b / sqrt(n), 4 sd allowed; E|X| = b, sd(|X|) = b, so 2% is 6.3 sd;
    # Var = 2b^2, sd of the sample variance ~ sqrt(Var(X^2)/n) = sqrt(20) b^2/sqrt(n), 3% of 2b^2 is 4.2 sd
    assert abs(x.mean()) < 4 * np.sqrt(2) * b / np.sqrt(n)
    assert np.abs(x).mean() == pytest.approx(b, rel=0.02)
    assert x.var() == pytest.approx(2 * b * b, rel=0.03)
    assert stats.kstest(x, stats.laplace(scale=b).cdf).pvalue > 1e-3


def test_the_per_axis_density_ratio_is_bounded_by_exp_epsilon_and_tight():
    eps = 0.7
    b = noise_scales(L, PSI, np.array([eps]), KPsiParams(epsilon=eps), cap=500.0)[0, 0]
    xs = L[0, :, 0]
    grid = np.linspace(-200, 250, 2001)
    pdf = stats.laplace.pdf(grid[:, None], loc=xs[None], scale=b)  # (grid, k)
    ratio = pdf[:, :, None] / pdf[:, None, :]
    assert ratio.max() <= np.exp(eps) * (1 + 1e-12)
    outside = (grid < xs.min()) | (grid > xs.max())
    # tight for the two extreme locations and an output outside their span
    np.testing.assert_allclose(ratio[outside, 2, 0].max(), np.exp(eps), rtol=1e-12)


def test_perturbation_only_moves_coordinates_independently_and_scales_with_one_over_epsilon():
    rng = np.random.default_rng(32)
    locs = rng.uniform(0, 100, (50, 8, 2))
    u = rng.random((50, 8, 2))
    scales = noise_scales(locs, np.full(50, 60.0), np.full(50, 1.0), KPsiParams(), cap=500.0)
    noisy = perturb(locs, scales, u)
    noise = noisy - locs
    assert noisy.shape == locs.shape and np.all(noise != 0)
    assert not np.any(np.all(noise[:, :1] == noise[:, 1:], axis=-1))  # real and dummy noise differ
    twice = noise_scales(locs, np.full(50, 60.0), np.full(50, 2.0), KPsiParams(epsilon=2.0), cap=500.0)
    # with the same uniforms, doubling epsilon halves every noise value (exactly, up to rounding)
    np.testing.assert_allclose(perturb(locs, twice, u) - locs, noise / 2, rtol=1e-12, atol=1e-9)


def test_closeness_matches_the_laplace_disc_probability():
    # docs/design.md, (k-Ψ) calibration: F(rho) at rho = 1/3, 1, 5/3, 10/3 is 0.066, 0.354, 0.611, 0.914
    for rho, f in ((1 / 3, 0.066), (1.0, 0.354), (5 / 3, 0.611), (10 / 3, 0.914)):
        assert laplace_disc_probability(rho, 1.0) == pytest.approx(f, abs=6e-4)
    # ranges of 150 m at epsilon 0.5: b = 300 m, closeness (100, 500, 1000 m) = (0.066, 0.611, 0.914)
    runs, k, n = 500, 8, 13
    rng = np.random.default_rng(33)
    base = rng.uniform(0, 150, (n, k, 2))
    base[:, 0], base[:, 1] = 0.0, 150.0  # every timestamp spans exactly 150 m on both axes
    locs = np.broadcast_to(base, (runs, n, k, 2)).reshape(runs * n, k, 2)
    scales = noise_scales(locs, np.full(runs * n, 100.0), np.full(runs * n, 0.5), KPsiParams(epsilon=0.5),
                          500.0)
    assert np.allclose(scales, 300.0)
    got = closeness(perturb(locs, scales, rng.random(locs.shape)), locs, [100, 500, 1000])
    want = [laplace_disc_probability(r, 300.0) for r in (100, 500, 1000)]
    # R k n = 52,000 draws: sd of a share <= 0.5/sqrt(52,000) = 0.0022, so 0.02 is 9 sd
    np.testing.assert_allclose(got, want, atol=0.02)
    assert np.all(np.diff(got) > 0)
