"""Noise scales of the Fourier coefficients: the paper's closed form (Eq. 11) and the uniform alternative.

Ou et al. (2018), Eqs. 10–11, 17, Thm 3, Defs. 7–9; G5 and G8 of docs/design.md (FGS-Pufferfish).
The scales depend only on public parameters (p, w, I, N, b_C0), never on the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.fgs_pufferfish.params import FgsParams
from trajpub.errors import ParameterError


@dataclass(frozen=True, eq=False)
class NoiseScales:
    """β_k = b_{F_k}² for k < K_max at one b_C0, with the paper's derived quantities.

    survival: q_k = (1−p)^k; weights: 𝒲'_k (Def. 9); beta: β_k; lagrange: λ* of Eq. 17 (None for uniform).
    Every β_k is proportional to b_C0, so b_{C_i} = r_i·b_C0, U_L ∝ b_C0 and σ̄_L ∝ √b_C0 (Eq. 11, Thm 3).
    """

    n_slots: int
    lags: int
    b_c0: float
    survival: np.ndarray
    weights: np.ndarray
    beta: np.ndarray
    lagrange: float | None

    @property
    def b(self) -> np.ndarray:
        """b_{F_k}, the Laplace scale of the real and of the imaginary part of δF_k (Eq. 8)."""
        return np.sqrt(self.beta)

    @property
    def s(self) -> float:
        """S = Σ_{k<K_max} q_k (< 6 for a feasible Eq. 11, G4)."""
        return float(self.survival.sum())

    @property
    def utility(self) -> float:
        """U = Σ_k q_k 𝒲'_k β_k (Def. 9): the objective of Eq. 10."""
        return float(np.sum(self.survival * self.weights * self.beta))

    @property
    def location_variance(self) -> float:
        """U_L = Σ_k q_k 2β_k (Def. 7, Lemma 1): Var(δx_n) for every slot n (exact for the lowpass release)."""
        return float(np.sum(self.survival * 2.0 * self.beta))

    @property
    def location_std(self) -> float:
        """σ̄_L = √U_L, the average location standard deviation the paper plots (§VIII-A.3, G13)."""
        return float(np.sqrt(self.location_variance))

    @property
    def mean_shift(self) -> np.ndarray:
        """δC̄_i = Σ_k q_k 2β_k cos(2πik/N), i < I (Thm 3, real part of W_{i,k}, G6): E[C'_i] − C̄_i."""
        k, i = np.arange(len(self.beta)), np.arange(self.lags)
        return (self.survival * 2.0 * self.beta * np.cos(2 * np.pi * np.outer(i, k) / self.n_slots)).sum(axis=1)

    @property
    def correlation_scales(self) -> np.ndarray:
        """b_{C_i} = sqrt(Σ_k q_k 12β_k² − δC̄_i²/2) (Thm 3). The formula is the paper's and is wrong as a
        variance (G8); it is used only for the paper's analytic ε. b_{C_0} equals the b_C0 input."""
        return np.sqrt(12.0 * np.sum(self.survival * self.beta**2) - self.mean_shift**2 / 2.0)

    @property
    def correlation_ratios(self) -> np.ndarray:
        """r_i = b_{C_i}/b_{C0}, independent of b_C0 (Thm 3); r_0 = 1 and r_i ≥ 1."""
        return self.correlation_scales / self.b_c0


def sherman_morrison_solution(survival: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """v = (6𝐈 − 𝐐)^{−1} 𝒲' with 𝐐 = 𝟏qᵀ (every row q), without a matrix solve (Eq. 11, our derivation):
    v_k = (𝒲'_k + qᵀ𝒲'/(6 − S))/6."""
    s = survival.sum()
    return (weights + survival @ weights / (6.0 - s)) / 6.0


def paper_scales(params: FgsParams, b_c0: float) -> NoiseScales:
    """Eq. 11: β*_k = b_C0·(v_k/2)/den, den = sqrt(3Σq v² − (Σq v)²/2), λ* = den/(2 b_C0) (Eq. 17).

    This is the critical point with λ* > 0 of the linear objective U on the ellipsoid of Eq. 10, which is the
    *maximum* of U at fixed b_C0 (G5); at w = 1 it equals the uniform allocation.
    """
    _require_b_c0(b_c0)
    q, weights = params.survival, params.utility_weights
    v = sherman_morrison_solution(q, weights)
    den = float(np.sqrt(3.0 * np.sum(q * v**2) - np.sum(q * v) ** 2 / 2.0))
    beta = b_c0 * (v / 2.0) / den  # > 0: FgsParams guarantees S < 6 and W'_k > 0
    return NoiseScales(params.n_slots, params.lags, float(b_c0), q, weights, beta, den / (2.0 * b_c0))


def uniform_scales(params: FgsParams, b_c0: float) -> NoiseScales:
    """Equal β_k = b_C0/sqrt(12S − 2S²) on the constraint of Eq. 10 (the equal-scale case of Eq. 10; G5 ablation)."""
    _require_b_c0(b_c0)
    q = params.survival
    s = q.sum()
    beta = np.full(len(q), b_c0 / np.sqrt(12.0 * s - 2.0 * s**2))
    return NoiseScales(params.n_slots, params.lags, float(b_c0), q, params.utility_weights, beta, None)


def noise_scales(params: FgsParams, b_c0: float) -> NoiseScales:
    """The scales of ``params.allocation`` ("paper": Eq. 11, "uniform") at this b_C0."""
    return paper_scales(params, b_c0) if params.allocation == "paper" else uniform_scales(params, b_c0)


def b_c0_for_location_std(params: FgsParams, location_std: float) -> float:
    """The b_C0 whose scales give σ̄_L = ``location_std``: b_C0 = (σ̄_L/σ̄_L(1))², as σ̄_L ∝ √b_C0 (Eq. 11)."""
    return float((location_std / noise_scales(params, 1.0).location_std) ** 2)


def _require_b_c0(b_c0: float) -> None:
    if not (np.isfinite(b_c0) and b_c0 > 0):
        raise ParameterError(f"b_C0 must be a finite number > 0, got {b_c0!r}", "fgs_pufferfish.b_c0")
