"""CTS baseline: correlated Laplace noise whose autocorrelation follows the series' own. NOT FROM THE PAPER.

Ou et al. compare FGS with CTS-DP (H. Wang, Z. Xu, Knowledge-Based Systems 122, 2017) but do not describe
it. This is our reconstruction from the CTS-DP abstract and standard identities (docs/design.md,
FGS-Pufferfish); it has not been checked against Wang & Xu's paper.

If G_1..G_4 are independent stationary unit-variance Gaussian series with autocorrelation ρ_G, then
η_n = (b/2)(G_1² + G_2² − G_3² − G_4²) is marginally Laplace(0, b) (Var 2b²) with normalised autocorrelation ρ_G².
Setting ρ_G = sqrt(max(ρ_target, 0)) gives η the target's autocorrelation wherever it is non-negative.
"""

from __future__ import annotations

import numpy as np


def normalised_autocorrelation(correlation: np.ndarray) -> np.ndarray:
    """ρ_i = C_i/C_0 of a circular correlation over all N lags, symmetrised (ρ_i + ρ_{N−i})/2; a series with
    C_0 = 0 (no variation at all) gets white noise, ρ = (1, 0, …, 0)."""
    c = np.asarray(correlation, dtype=float)
    white = np.zeros_like(c)
    white[..., 0] = 1.0
    c0 = c[..., :1]
    rho = np.where(c0 > 0, c / np.where(c0 > 0, c0, 1.0), white)
    return (rho + np.roll(rho[..., ::-1], 1, axis=-1)) / 2.0


def gaussian_filter(rho: np.ndarray) -> np.ndarray:
    """Amplitude response H_k of the circular filter that turns unit white noise into a unit-variance
    stationary Gaussian series with autocorrelation ρ_G = sqrt(max(ρ, 0)), spectrum clipped at 0.

    Filtering white noise w by H gives Cov(G_n, G_{n+i}) = IDFT(H²)_i, so H is renormalised to mean(H²) = 1:
    the *theoretical* variance is 1 (the sample variance of each series is left alone)."""
    rho_g = np.sqrt(np.maximum(rho, 0.0))
    power = np.maximum(np.fft.fft(rho_g, axis=-1).real, 0.0)
    return np.sqrt(power / power.mean(axis=-1, keepdims=True))


def correlated_laplace(rho: np.ndarray, b: float, n_series: int, rng: np.random.Generator) -> np.ndarray:
    """``n_series`` draws of η (shape (n_series, N)), marginally Laplace(0, b), autocorrelation ≈ max(ρ, 0)."""
    h = gaussian_filter(np.asarray(rho, dtype=float))
    white = rng.standard_normal((4, n_series, len(h)))
    g = np.fft.ifft(h * np.fft.fft(white, axis=-1), axis=-1).real
    return (b / 2.0) * (g[0] ** 2 + g[1] ** 2 - g[2] ** 2 - g[3] ** 2)
