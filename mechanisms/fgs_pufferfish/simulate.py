"""The paper's simulated data: AR(1) daily series with exponential temporal correlation (Ou et al. 2018,
§VIII-A.2a, with our choices g ~ N(0, 1), x_0 ~ N(0, 1); docs/design.md).

x_n = C_1 x_{n−1} + g_n sqrt(1 − C_1²), C_1 = exp(−1/τ_c): stationary, unit variance, C_i = exp(−i/τ_c).
"""

from __future__ import annotations

import numpy as np


def ar1_series(shape: tuple[int, ...], n_slots: int, tau_c: float | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Independent AR(1) series of ``n_slots`` values, array of shape (*shape, n_slots).

    ``tau_c`` (slots) is a scalar or broadcasts against ``shape`` (e.g. one τ_c per user).
    """
    c1 = np.broadcast_to(np.exp(-1.0 / np.asarray(tau_c, dtype=float)), shape)
    innovation = np.sqrt(1.0 - c1**2)
    g = rng.standard_normal((*shape, n_slots))
    x = np.empty_like(g)
    x[..., 0] = g[..., 0]
    for n in range(1, n_slots):
        x[..., n] = c1 * x[..., n - 1] + innovation * g[..., n]
    return x
