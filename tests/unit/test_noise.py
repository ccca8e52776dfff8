"""trajpub.noise: the exact samplers have the laws they claim, stay on their grid, and are reproducible.

Frequencies are compared with the exact probability mass functions by chi-square tests (p > 0.001) or within
5 standard errors."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chisquare

from trajpub import noise
from trajpub.errors import ParameterError

N = 40_000


def _chi2(values: np.ndarray, support: np.ndarray, pmf: np.ndarray) -> float:
    """Chi-square p-value of ``values`` against ``pmf`` on ``support``, the tails pooled into one cell."""
    observed = np.array([np.count_nonzero(values == v) for v in support] + [0])
    observed[-1] = len(values) - observed[:-1].sum()
    expected = np.append(pmf, max(1.0 - pmf.sum(), 0.0)) * len(values)
    keep = expected > 0
    return float(chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()).pvalue)


@pytest.mark.parametrize("scale", [0.4, 1.0, 3.7])
def test_discrete_laplace_has_the_exact_pmf(scale):
    k = noise.discrete_laplace(scale, N, np.random.default_rng(1))
    q = math.exp(-1.0 / scale)
    support = np.arange(-12, 13)
    pmf = (1 - q) / (1 + q) * q ** np.abs(support)
    assert k.dtype == np.int64
    assert _chi2(k, support, pmf) > 0.001


def test_geometric_has_the_exact_pmf():
    y = noise.geometric(2.5, N, np.random.default_rng(2))
    q = math.exp(-1 / 2.5)
    support = np.arange(0, 20)
    assert y.min() >= 0
    assert _chi2(y, support, (1 - q) * q ** support) > 0.001


def test_laplace_lies_on_its_grid_so_neighbouring_counts_have_the_same_support():
    scale = 2.0
    g, t = noise.laplace_grid(scale)
    assert g == 2.0 ** -23 and t >= Fraction(scale) / Fraction(g) and t - Fraction(scale) / Fraction(g) < 2 ** -15
    rng = np.random.default_rng(3)
    for count in (0.0, 1.0, 12345.0):
        out = count + noise.laplace(scale, N, rng)
        assert np.all(out / g == np.round(out / g))  # every output is a grid point, whatever the count
        assert np.all((out - count) + count == out)  # the addition is exact
    x = noise.laplace(scale, N, rng)
    assert abs(np.abs(x).mean() - scale) <= 5 * scale / math.sqrt(N)  # E|Laplace(b)| = b, sd b


def test_laplace_real_snaps_to_its_grid_and_pays_for_the_rounding():
    values = np.array([0.1, 1 / 3, 2.5, 7.0])
    out = noise.laplace_real(np.tile(values, N // 4), 1.0, 0.5, np.random.default_rng(4)).reshape(-1, 4)
    g = 2.0 ** math.floor(math.log2(2.0 ** -10 / N))
    assert np.all(out / g == np.round(out / g))
    assert abs(np.abs(out - values).mean() - 2.0) <= 5 * 2.0 * (1 + 2 ** -10) / math.sqrt(N)
    with pytest.raises(ParameterError, match="too large"):
        noise.laplace_real(np.array([1e30]), 1.0, 1.0, np.random.default_rng(0))


def test_exponential_mechanism_has_the_exact_softmax_law():
    scores = np.array([0, -1, -2, -3, 5 - 5])
    eps, sens = 2.0, 1.0
    c = math.floor(Fraction(eps) / (2 * Fraction(sens)) * 2 ** 32) / 2 ** 32
    weights = np.exp(c * scores)
    chosen = noise.exponential_mechanism(np.tile(scores, (N, 1)), eps, sens, np.random.default_rng(5))
    assert chosen.shape == (N,)
    assert _chi2(chosen, np.arange(5), weights / weights.sum()) > 0.001
    with pytest.raises(ParameterError, match="integer scores"):
        noise.exponential_mechanism(np.array([0.5, 1.0]), 1.0, 1.0, np.random.default_rng(0))


def test_bernoulli_rounds_the_probability_up_exactly():
    rng = np.random.default_rng(6)
    assert not noise.bernoulli(0.0, 1000, rng).any() and noise.bernoulli(1.0, 1000, rng).all()
    p = 1 / (1 + math.e)
    assert abs(noise.bernoulli(p, N, rng).mean() - p) <= 5 * math.sqrt(p * (1 - p) / N)
    with pytest.raises(ParameterError):
        noise.bernoulli(1.5, 1, rng)


def test_a_seed_reproduces_the_draws_and_different_seeds_do_not():
    a = noise.laplace(1.0, 100, np.random.default_rng(7))
    assert np.array_equal(a, noise.laplace(1.0, 100, np.random.default_rng(7)))
    assert not np.array_equal(a, noise.laplace(1.0, 100, np.random.default_rng(8)))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), True])
def test_bad_scales_are_refused(bad):
    with pytest.raises(ParameterError):
        noise.laplace(bad, 3, np.random.default_rng(0))


def test_a_vanishing_scale_is_raised_not_refused():
    # ε = 10^12 (a test's "no noise"): t is raised to 2^-20, where P(K != 0) = 2e^(-2^20)/(1 + e^(-2^20)) = 0
    rng = np.random.default_rng(9)
    assert not noise.discrete_laplace(1e-12, 1000, rng).any()
    assert np.array_equal(noise.laplace_real(np.array([1.0, 2.5]), 1.0, 1e12, rng), [1.0, 2.5])
