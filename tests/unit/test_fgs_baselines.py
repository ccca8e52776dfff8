"""The simulator and the CTS baseline (Ou et al. 2018, §VIII-A.2a; our CTS, docs/design.md)."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.fgs_pufferfish import FgsParams, ar1_series, correlated_laplace, release_object
from mechanisms.fgs_pufferfish.cts import gaussian_filter, normalised_autocorrelation

N = 32


def lag_products(x: np.ndarray, lag: int) -> np.ndarray:
    """Per-series mean of x_n x_{n+lag} over n (non-circular): the estimates whose spread gives the SE."""
    return (x[:, lag:] * x[:, : x.shape[1] - lag]).mean(axis=1)


def test_ar1_simulator_has_exponential_correlation_and_unit_variance():
    # lag-i autocorrelation ≈ exp(−i/τ_c), variance 1 (stationary from x_0 ~ N(0, 1)).
    x = ar1_series((40_000,), N, 4.0, np.random.default_rng(41))
    for lag in range(6):
        per_series = lag_products(x, lag)
        se = per_series.std() / np.sqrt(len(per_series))
        assert abs(per_series.mean() - np.exp(-lag / 4.0)) < 4 * se
    slot_var = x.var(axis=0)  # every slot has unit variance (stationarity), SE ≈ sqrt(2/R)
    assert np.all(np.abs(slot_var - 1) < 4 * np.sqrt(2 / len(x)))


def test_ar1_simulator_takes_one_tau_per_user():
    tau = np.array([1.0, 8.0])
    x = ar1_series((2, 20_000), N, tau[:, None], np.random.default_rng(42))
    for u in range(2):
        per_series = lag_products(x[u], 1)
        assert abs(per_series.mean() - np.exp(-1 / tau[u])) < 4 * per_series.std() / np.sqrt(20_000)


def circular_exponential(tau: float) -> np.ndarray:
    i = np.arange(N)
    return np.exp(-np.minimum(i, N - i) / tau)


def test_cts_noise_is_laplace_scaled_with_the_target_autocorrelation():
    # mean 0, Var 2b², normalised autocorrelation ≈ target (lag 1 within 0.01).
    b, r = 1.5, 100_000
    rho = circular_exponential(4.0)
    eta = correlated_laplace(rho, b, r, np.random.default_rng(43))
    per_series_mean = eta.mean(axis=1)
    assert abs(per_series_mean.mean()) < 4 * per_series_mean.std() / np.sqrt(r)
    per_series_power = (eta**2).mean(axis=1)
    assert abs(per_series_power.mean() - 2 * b**2) < 4 * per_series_power.std() / np.sqrt(r)
    for lag in (1, 2, 3):
        estimate = np.mean(eta * np.roll(eta, -lag, axis=1)) / np.mean(eta**2)
        assert abs(estimate - rho[lag]) < 0.01
    # Marginal shape: E|η| = b for Laplace(0, b).
    absolute = np.abs(eta[:, 0])
    assert abs(absolute.mean() - b) < 4 * absolute.std() / np.sqrt(r)


def test_gaussian_filter_has_unit_theoretical_variance_and_clips_negative_targets():
    rho = circular_exponential(3.0)
    h = gaussian_filter(rho)
    assert np.mean(h**2) == pytest.approx(1.0, rel=1e-12)
    implied = np.fft.ifft(h**2).real
    assert implied[:4] == pytest.approx(np.sqrt(rho[:4]), rel=1e-9)
    oscillating = np.cos(2 * np.pi * np.arange(N) / 8)  # negative lags are clipped to 0 before the root
    assert np.all(np.isfinite(gaussian_filter(oscillating)))


def test_normalised_autocorrelation():
    c = np.array([[4.0, 2.0, 1.0, 3.0], [0.0, 0.0, 0.0, 0.0]])
    rho = normalised_autocorrelation(c)
    assert rho[0] == pytest.approx([1.0, 0.625, 0.25, 0.625])  # (ρ_i + ρ_{N−i})/2
    assert rho[1].tolist() == [1.0, 0.0, 0.0, 0.0]  # no variation: white noise


def test_cts_release_adds_noise_of_the_requested_std_shaped_by_the_objects_correlation():
    # CTS (docs/design.md) through release_object: Var(η) = σ̄_L² = 2b², E[η_n η_{n+1}] = 2b²·ρ_1 of the object's own ρ.
    params = FgsParams(method="cts", n_slots=N, location_std_m=80.0)
    rng = np.random.default_rng(44)
    days = np.moveaxis(ar1_series((20_000, 2), N, 3.0, rng), 1, -1) * 1000  # (D, N, 2)
    released, info = release_object(days, params, rng)
    assert released.n_kept is None and "mean_kept_coefficients" not in info
    centred = days - days.mean(axis=0)
    noise = (released.deviation - centred)[..., 0]
    power = (noise**2).mean(axis=1)
    assert abs(power.mean() - 80.0**2) < 4 * power.std() / np.sqrt(len(power))
    c = np.mean(centred[..., 0] * np.roll(centred[..., 0], -1, axis=1)) / np.mean(centred[..., 0] ** 2)
    lag1 = (noise * np.roll(noise, -1, axis=1)).mean(axis=1)
    assert abs(lag1.mean() - 80.0**2 * c) < 4 * lag1.std() / np.sqrt(len(lag1))
