"""Checks and metrics of the paper's experiments (Chen, Li, Zhang 2020, §4.1 Defs 4–6, §7.1 Eq. 20, §7.2 Fig.
9).

Our readings (A10–A12) and the Laplace calibration F of closeness: docs/design.md, (k-Ψ)-anonymity.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import quad


def within_discs(locations: np.ndarray, real: np.ndarray, psi: np.ndarray, tol: float = 1e-6) -> bool:
    """Alg. 1 line 11: every location of ``locations`` (m, n, 2) is within δ_i (+ tol) of ``real`` (n, 2)."""
    d = np.hypot(*(np.asarray(locations) - np.asarray(real)[None]).transpose(2, 0, 1))
    return bool(np.all(d <= np.asarray(psi)[None] + tol))


def is_k_psi_anonymous(locations: np.ndarray, psi: np.ndarray, k: int, tol: float = 1e-6) -> bool:
    """Defs 4–6: the m >= k trajectories ``locations`` (m, n, 2) are pairwise approximate, i.e. at every t_i
    any two are within 2δ_i (Eq. 3), so each belongs to an anonymity set of size >= k."""
    locations = np.asarray(locations, dtype=float)
    if locations.shape[0] < k:
        return False
    diff = locations[:, None] - locations[None, :]
    d = np.hypot(diff[..., 0], diff[..., 1])  # (m, m, n)
    return bool(np.all(d <= 2 * np.asarray(psi)[None, None] + tol))


def discernibility(locations: np.ndarray, psi: np.ndarray, offroad: np.ndarray | None = None,
                   normalized: bool = True) -> float:
    """DM (Eq. 20): (1/(k(k−1))) Σ_{m≠i} 1/D_im with D_im = max_j d_im^j, where d_im^j = 2δ_j when either
    point is off-road (``offroad`` (k, n) True: farther than τ_v from every edge), else their distance (A10,
    ours). Larger means harder to tell apart. ``normalized=False`` gives the plain double sum
    (A11)."""
    locations = np.asarray(locations, dtype=float)
    k = locations.shape[0]
    diff = locations[:, None] - locations[None, :]
    d = np.hypot(diff[..., 0], diff[..., 1])
    if offroad is not None:
        off = np.asarray(offroad, bool)
        penal = off[:, None, :] | off[None, :, :]
        d = np.where(penal, 2 * np.asarray(psi)[None, None, :], d)
    big_d = d.max(axis=2)
    off_diag = ~np.eye(k, dtype=bool)
    total = float((1.0 / big_d[off_diag]).sum())
    return total / (k * (k - 1)) if normalized else total


def closeness(perturbed: np.ndarray, reference: np.ndarray, radii) -> np.ndarray:
    """Share of perturbed locations strictly closer than each radius to their reference (§7.2 "closeness
    degree"; our reading, A12: each point against its own pre-noise location)."""
    d = np.hypot(*(np.asarray(perturbed) - np.asarray(reference)).reshape(-1, 2).T)
    return np.array([(d < r).mean() for r in np.atleast_1d(radii)])


def laplace_disc_probability(r: float, bx: float, by: float | None = None) -> float:
    """P(‖(X, Y)‖ < r) for independent X ~ Laplace(0, bx), Y ~ Laplace(0, by) (F of docs/design.md,
    (k-Ψ)-anonymity, with F(ρ) the case bx = by = 1, r = ρ): ∫_0^r (1/bx) e^{−u/bx} (1 − e^{−√(r²−u²)/by}) du."""
    by = bx if by is None else by
    if r <= 0:
        return 0.0
    def density(u: float) -> float:
        return np.exp(-u / bx) / bx * (1 - np.exp(-np.sqrt(max(r * r - u * u, 0.0)) / by))

    value, _ = quad(density, 0, r, limit=200)
    return float(value)
