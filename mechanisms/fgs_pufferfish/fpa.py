"""FPA_k baseline (Rastogi and Nath, SIGMOD 2010) as an ablation of FGS. NOT FROM THE PAPER.

Ou et al. cite FPA as "a similar noise mechanism" (§V-B) but do not evaluate it. FPA_k keeps the first k DFT
coefficients, adds i.i.d. Laplace noise to the real and imaginary part of each and inverts the zero-padded
transform (Rastogi and Nath, SIGMOD 2010; docs/design.md G19). Here it is exactly FGS with K fixed to k and uniform
scales, on
the same centred series and with the same reconstruction, so the two differ only in the random K and Eq. 11.

Rastogi and Nath calibrate the scale as √k·Δ₂/ε from an L2 sensitivity Δ₂ of the series. Per-object centring
and an unbounded domain leave no finite Δ₂, so this release calibrates the *noise level* instead:
Var(δx_n) = Σ_{k'<k} 2b² = 2kb² for every slot n, hence b = σ̄_L/√(2k). It carries no DP claim.
"""

from __future__ import annotations

import numpy as np


def fpa_scale(location_std: float, k: int) -> float:
    """b such that FPA_k's location noise has standard deviation ``location_std`` at every slot: σ̄_L/√(2k)."""
    return float(location_std / np.sqrt(2.0 * k))
