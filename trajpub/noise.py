"""The one place where DP noise is drawn (Laplace, discrete Laplace/geometric, exponential mechanism).

Every mechanism calls these functions instead of numpy's samplers, so that hardening the noise (issue 14:
floating-point Laplace is attackable, Mironov 2012, "On significance of the least significant bits for
differential privacy", CCS) happens here once. This first version still samples with numpy; the hardened
samplers replace the bodies, not the signatures.
"""

from __future__ import annotations

import numpy as np


def laplace(scale: float, shape, rng: np.random.Generator) -> np.ndarray:
    """Laplace(0, ``scale``) noise of ``shape`` (Dwork et al. 2006: scale = L1 sensitivity / ε)."""
    return rng.laplace(0.0, scale, shape)


def exponential_mechanism(scores: np.ndarray, epsilon: float, sensitivity: float,
                          rng: np.random.Generator) -> np.ndarray:
    """Index of the chosen candidate along the last axis of ``scores`` with probability proportional to
    exp(ε·score / (2·sensitivity)) (McSherry & Talwar 2007), by the Gumbel-max trick."""
    scores = np.asarray(scores, dtype=float)
    return np.argmax(scores * (epsilon / (2.0 * sensitivity)) + rng.gumbel(size=scores.shape), axis=-1)
