"""The statistics every attack reports: a Wilson score interval and Anonymeter's baseline-corrected risk.

Kept in one place, as Anonymeter does (``anonymeter.stats.confidence``), so that every attack's numbers mean the
same thing.
"""

from __future__ import annotations

import math
import numbers

from scipy.stats import norm

from trajpub.errors import ParameterError


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``successes / n``.

    E. B. Wilson, "Probable inference, the law of succession, and statistical inference", JASA 22 (1927),
    209-212. With ``p = successes / n`` and ``z`` the two-sided standard-normal quantile of ``confidence``::

        centre    = (p + z^2 / (2n)) / (1 + z^2 / n)
        halfwidth = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))

    The interval is ``centre -/+ halfwidth``; unlike the Wald interval it stays inside [0, 1] and does not
    collapse to a point at ``p = 0`` or ``p = 1``. ``successes`` may be fractional (an expected count, as
    when an attack breaks ties uniformly at random); the formula only uses ``p``.
    """
    if not (isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1):
        raise ParameterError(f"n must be a positive integer, got {n!r}", "wilson_interval")
    if not 0 <= successes <= n:
        raise ParameterError(f"successes must be in [0, n={n}], got {successes}", "wilson_interval")
    if not 0 < confidence < 1:
        raise ParameterError(f"confidence must be in (0, 1), got {confidence}", "wilson_interval")
    z = float(norm.ppf(0.5 + confidence / 2))
    p = successes / n
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    halfwidth = z / (1 + z2n) * math.sqrt(p * (1 - p) / n + z2n / (4 * n))
    # the interval holds p in exact arithmetic; in floating point p = 1 gave an upper end of 1 - 2e-16
    return max(0.0, min(p, centre - halfwidth)), min(1.0, max(p, centre + halfwidth))


def baseline_corrected_risk(rate: float, baseline: float) -> float:
    """Risk ``max(0, (rate - baseline) / (1 - baseline))``: the attack's success beyond a random guess.

    Giomi, Boenisch, Wehmeyer, Tasnádi, "A Unified Framework for Quantifying Privacy Risk in Synthetic Data",
    PoPETs 2023(2), arXiv:2211.10459: the risk ``(r_attack - r_baseline) / (1 - r_baseline)``, implemented in
    Anonymeter as ``anonymeter.stats.confidence.residual_success`` with the negative values clipped to 0. It is
    0 when the attack does no better than the baseline and 1 when it always succeeds where the baseline does
    not. A baseline of 1 leaves no room for the attack to add anything, so the risk is 0.
    """
    if not (0 <= rate <= 1 and 0 <= baseline <= 1):
        raise ParameterError(f"rate and baseline must be in [0, 1], got {rate} and {baseline}",
                             "baseline_corrected_risk")
    if baseline == 1:
        return 0.0
    return max(0.0, (rate - baseline) / (1 - baseline))
