"""The Fourier machinery of FGS: DFT with our normalisation (G1), the noisy low-pass reconstruction and the
temporal-correlation estimators.

Ou et al. (2018), Defs. 3–4, 6, Eqs. 2, 4, 7; G1, G2, G11 of docs/design.md
(FGS-Pufferfish).
All functions work on the last axis (the N slots) and broadcast over the leading ones.
"""

from __future__ import annotations

import numpy as np


def dft(x: np.ndarray) -> np.ndarray:
    """F_k = (1/N) Σ_n x_n exp(−j2πnk/N), k = 0..N−1 (corrects Defs. 3–4, which cannot both hold
    without a 1/N: G1), so x_n = Σ_k F_k W_{n,k}."""
    x = np.asarray(x, dtype=float)
    return np.fft.fft(x, axis=-1) / x.shape[-1]


def hermitian_weights(n_slots: int) -> np.ndarray:
    """a_k, k < K_max = ⌊N/2⌋+1: 1 for the DC term, 2 for 1 ≤ k < N/2, 1 for k = N/2 when N is even.

    Σ_{k<K_max} Re(a_k F_k W_{n,k}) is the real inverse DFT of a real series (G2).
    """
    a = np.full(n_slots // 2 + 1, 2.0)
    a[0] = 1.0
    if n_slots % 2 == 0:
        a[-1] = 1.0
    return a


def reconstruct(coefficients: np.ndarray, n_slots: int) -> np.ndarray:
    """x_n = Re Σ_{k<K_max} G_k exp(+j2πnk/N) for coefficients G of shape (..., K_max) (Eq. 2, no 1/N, G1)."""
    padded = np.zeros((*coefficients.shape[:-1], n_slots), dtype=complex)
    padded[..., : coefficients.shape[-1]] = coefficients
    return (np.fft.ifft(padded, axis=-1) * n_slots).real


def kept_mask(n_kept: np.ndarray, k_max: int) -> np.ndarray:
    """Boolean (..., K_max): coefficient k is kept iff k < K (the lowest K frequencies, DC included, Alg. 1)."""
    return np.arange(k_max) < np.asarray(n_kept)[..., None]


def lowpass(x: np.ndarray, n_kept: np.ndarray | int) -> np.ndarray:
    """The real low-pass projection of x onto its K lowest frequencies: Σ_{k<K} Re(a_k F_k W_{n,k})."""
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    f = dft(x)[..., : n // 2 + 1]
    mask = kept_mask(np.broadcast_to(n_kept, x.shape[:-1]), n // 2 + 1)
    return reconstruct(hermitian_weights(n) * f * mask, n)


def fourier_perturb(
    x: np.ndarray,
    n_kept: np.ndarray,
    scales: np.ndarray,
    rng: np.random.Generator,
    reconstruction: str = "lowpass",
) -> np.ndarray:
    """Eq. 7 then Eq. 2: noisy coefficients F'_k = F_k + δF_k for k < K, everything at k ≥ K dropped.

    x: (..., N) real series; n_kept: (...) numbers K of kept coefficients (1 ≤ K ≤ K_max); scales: b_{F_k},
    shape (K_max,) or broadcastable to (..., K_max). δF_k = A_k + jB_k with A_k, B_k i.i.d. Laplace(0, b_{F_k})
    (Eq. 8), drawn for all K_max coefficients (a fixed number of draws per series) and masked.

    "lowpass" (default, G2): x'_n = Σ_{k<K} Re(a_k F_k W_{n,k}) + Re Σ_{k<K} δF_k W_{n,k}, i.e. the exact
    low-pass signal plus the paper's δx_n; Var(δx_n | K) = Σ_{k<K} 2b_k² for every n. "paper_literal":
    x'_n = Re Σ_{k<K} (F_k + δF_k) W_{n,k}, the same noise with the non-DC signal halved.
    """
    if reconstruction not in ("lowpass", "paper_literal"):
        raise ValueError(f"unknown reconstruction {reconstruction!r}")
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    k_max = n // 2 + 1
    scales = np.asarray(scales, dtype=float)
    noise = rng.laplace(0.0, 1.0, size=(*x.shape[:-1], k_max, 2))
    delta = (noise[..., 0] + 1j * noise[..., 1]) * scales
    f = dft(x)[..., :k_max]
    signal = hermitian_weights(n) * f if reconstruction == "lowpass" else f
    return reconstruct((signal + delta) * kept_mask(n_kept, k_max), n)


def day_correlations(x: np.ndarray, lags: int, estimator: str = "circular") -> np.ndarray:
    """Per-series (ergodic) temporal correlation C_i, i < I (Def. 6, ergodic form, with G11 resolved).

    "circular": C_i = (1/N) Σ_n x_{(n+i) mod N} x_n; "truncated": C_i = (1/(N−i)) Σ_{n<N−i} x_{n+i} x_n.
    Returns shape (..., I).
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    if estimator == "circular":
        f = np.fft.fft(x, axis=-1)
        return (np.fft.ifft(np.abs(f) ** 2, axis=-1).real / n)[..., :lags]
    if estimator == "truncated":
        out = np.empty((*x.shape[:-1], lags))
        for i in range(lags):
            out[..., i] = (x[..., i:] * x[..., : n - i]).mean(axis=-1)
        return out
    raise ValueError(f"unknown correlation estimator {estimator!r}")


def ensemble_correlation(x: np.ndarray, lags: int, estimator: str = "circular") -> np.ndarray:
    """C_i = E_d{x_{n+i}^{(d)} x_n^{(d)}}, the mean over days (axis −2) of the per-day C_i (Def. 6, Eq. 4)."""
    return day_correlations(x, lags, estimator).mean(axis=-2)
