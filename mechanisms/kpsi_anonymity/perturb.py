"""Phase 2: Laplace perturbation of every location, real and dummy (Chen, Li, Zhang 2020, §5.2–5.3, Alg. 2).

Choices A6–A9 and the accounting notes of docs/design.md, (k-Ψ)-anonymity. For the k locations L_i at timestamp
t_i, each axis of
each location gets independent Laplace noise of scale b_i = Δ_i/ε_axis, drawn with the paper's inverse-CDF
formula ``−b·sign(r)·ln(1 − 2|r|)`` from r uniform on the OPEN interval (−1/2, 1/2) (A9).
"""

from __future__ import annotations

import numpy as np

from mechanisms.kpsi_anonymity.params import KPsiParams
from trajpub.errors import InputError

_HALF_ULP = 2.0 ** -54


def open_centred_uniform(u: np.ndarray) -> np.ndarray:
    """Map uniforms from ``Generator.random`` (multiples of 2⁻⁵³ in [0, 1)) to r in (−1/2, 1/2): the midpoints
    (m + 1/2)·2⁻⁵³ − 1/2, exact in float64, symmetric about 0, never ±1/2 (A9)."""
    return (np.asarray(u, dtype=float) - 0.5) + _HALF_ULP


def laplace_from_uniform(r: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The paper's Laplace sampler (§5.2): −b·sign(r)·ln(1 − 2|r|) for r in (−1/2, 1/2); log1p keeps precision
    near 0. Distributed as Laplace(0, b) when r is uniform."""
    r = np.asarray(r, dtype=float)
    if np.any(np.abs(r) >= 0.5) or not np.all(np.isfinite(r)):
        raise InputError("r must lie in the open interval (-1/2, 1/2)", "kpsi_anonymity.laplace")
    return -np.asarray(b, dtype=float) * np.sign(r) * np.log1p(-2.0 * np.abs(r))


def noise_scales(locations: np.ndarray, psi: np.ndarray, epsilon_axis: np.ndarray, params: KPsiParams,
                 cap: float) -> np.ndarray:
    """(P, 2) Laplace scales b_{x,i}, b_{y,i} for the k locations at each timestamp, ``locations`` (P, k, 2).

    "paper": Δ = max_j − min_j of the coordinate over the k locations (Eq. 18–19, per timestamp, A6);
    "diameter": Δ = 2δ_i; "data_independent": Δ = 2·``cap``. Then b = max(Δ, noise_floor_m)/ε_axis (A8)."""
    locations = np.asarray(locations, dtype=float)
    if params.noise_scale == "paper":
        delta = locations.max(axis=1) - locations.min(axis=1)
    elif params.noise_scale == "diameter":
        delta = np.repeat(2.0 * np.asarray(psi, dtype=float)[:, None], 2, axis=1)
    else:
        delta = np.full((len(locations), 2), 2.0 * cap)
    return np.maximum(delta, params.noise_floor_m) / np.asarray(epsilon_axis, dtype=float).reshape(-1, 1)


def perturb(locations: np.ndarray, scales: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Alg. 2 ``LapDifferential``: ``locations`` (P, k, 2) plus independent Laplace noise of scale ``scales``
    (P, 2) per axis, from uniforms ``u`` (P, k, 2) in [0, 1)."""
    noise = laplace_from_uniform(open_centred_uniform(u), np.asarray(scales)[:, None, :])
    return np.asarray(locations, dtype=float) + noise
