"""The Fourier machinery (Ou et al. 2018, Defs. 3–4): round trip, zero-noise identity, Eq. 4 / Lemma 2."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.fgs_pufferfish import centre_days, day_correlations, dft, fourier_perturb, lowpass
from mechanisms.fgs_pufferfish.spectrum import ensemble_correlation, hermitian_weights


@pytest.mark.parametrize("n", [32, 33, 48])
def test_dft_round_trip(n):
    # with F = fft(x)/N, Σ_{k<N} F_k e^{j2πnk/N} = x (the explicit sum, not numpy's inverse).
    x = np.random.default_rng(1).normal(size=(5, n))
    w = np.exp(2j * np.pi * np.outer(np.arange(n), np.arange(n)) / n)
    assert (dft(x) @ w.T).real == pytest.approx(x, abs=1e-12)
    assert np.abs((dft(x) @ w.T).imag).max() < 1e-12


@pytest.mark.parametrize("n", [32, 33, 48])
def test_zero_noise_with_all_coefficients_is_the_identity(n):
    # noise off and K_eff = K_max gives back x exactly.
    rng = np.random.default_rng(2)
    x = rng.normal(size=(7, n))
    k_max = n // 2 + 1
    out = fourier_perturb(x, np.full(7, k_max), np.zeros(k_max), rng)
    assert out == pytest.approx(x, abs=1e-12)


@pytest.mark.parametrize("n", [32, 33])
def test_lowpass_projection_is_idempotent_and_never_adds_energy(n):
    # with K < K_max the zero-noise release is the low-pass projection.
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, n))
    k = rng.integers(1, n // 2 + 1, size=40)
    zero_noise = fourier_perturb(x, k, np.zeros(n // 2 + 1), rng)
    projected = lowpass(x, k)
    assert zero_noise == pytest.approx(projected, abs=1e-12)
    assert lowpass(projected, k) == pytest.approx(projected, abs=1e-12)
    assert np.all((projected**2).sum(axis=1) <= (x**2).sum(axis=1) + 1e-12)
    # Keeping only the DC term leaves the series mean.
    assert lowpass(x, 1) == pytest.approx(np.repeat(x.mean(axis=1, keepdims=True), n, axis=1), abs=1e-12)


def test_paper_literal_reconstruction_halves_the_non_dc_signal():
    # G2: Re Σ_{k<=N/2} F_k W_{n,k} = (x + F_0 + F_{N/2}(−1)^n)/2 for even N.
    n = 32
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, n))
    f = dft(x)
    out = fourier_perturb(x, np.full(3, n // 2 + 1), np.zeros(n // 2 + 1), rng, "paper_literal")
    expected = (x + f[:, :1].real + f[:, n // 2 : n // 2 + 1].real * (-1.0) ** np.arange(n)) / 2
    assert out == pytest.approx(expected, abs=1e-12)


def test_hermitian_weights():
    assert hermitian_weights(8).tolist() == [1, 2, 2, 2, 1]
    assert hermitian_weights(7).tolist() == [1, 2, 2, 2]


def test_correlation_is_the_inverse_transform_of_the_power_spectrum():
    # (Eq. 4, Lemma 2) circular ensemble C_i = Σ_k S_k cos(2πik/N), S_k = mean_d |F_k^{(d)}|².
    n, d = 32, 9
    rng = np.random.default_rng(5)
    x, _ = centre_days(rng.normal(size=(d, n, 2)).cumsum(axis=1))
    series = np.moveaxis(x, -1, 0)  # (2, D, N)
    c = ensemble_correlation(series, n)
    s = (np.abs(dft(series)) ** 2).mean(axis=1)
    spectral = s @ np.cos(2 * np.pi * np.outer(np.arange(n), np.arange(n)) / n)
    assert c == pytest.approx(spectral, abs=1e-12)
    # The direct definition, (1/D) Σ_d (1/N) Σ_n x_{(n+i) mod N} x_n.
    direct = np.stack([(np.roll(series, -i, axis=-1) * series).mean(axis=(-1, -2)) for i in range(n)], axis=-1)
    assert c == pytest.approx(direct, abs=1e-12)
    # After per-slot centring, Σ_d x_n^{(d)} = 0 and Σ_d F_k^{(d)} = 0, so S_k = Var_d(F_k).
    assert np.abs(series.sum(axis=1)).max() < 1e-10
    assert np.abs(dft(series).sum(axis=1)).max() < 1e-10
    assert s == pytest.approx(dft(series).var(axis=1), abs=1e-12)


def test_truncated_estimator_matches_its_definition():
    # G11: (1/(N−i)) Σ_{n=0}^{N−1−i} x_{n+i} x_n, with no index overflow.
    x = np.random.default_rng(6).normal(size=(4, 12))
    c = day_correlations(x, 12, "truncated")
    for i in range(12):
        assert c[:, i] == pytest.approx((x[:, i:] * x[:, : 12 - i]).sum(axis=1) / (12 - i), abs=1e-12)
