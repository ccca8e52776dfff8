"""The statistics every attack reports: a Wilson score interval, Anonymeter's baseline-corrected risk, and for
members against controls Newcombe's interval of a difference of proportions and DeLong's interval of an AUC.

Kept in one place, as Anonymeter does (``anonymeter.stats.confidence``), so that every attack's numbers mean the
same thing.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import pandas as pd
from scipy.special import ndtri

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
    z = float(ndtri(0.5 + confidence / 2))
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


def newcombe_interval(x1: float, n1: int, x2: float, n2: int, confidence: float = 0.95) -> tuple[float, float]:
    """Interval of the difference ``p1 - p2`` of two independent proportions ``x1 / n1`` and ``x2 / n2``.

    R. G. Newcombe, "Interval estimation for the difference between independent proportions: comparison of eleven
    methods", Statistics in Medicine 17 (1998), 873-890, method 10 (the hybrid score interval): with the Wilson
    intervals ``[l1, u1]`` and ``[l2, u2]`` of the two proportions (:func:`wilson_interval`)::

        low  = (p1 - p2) - sqrt((p1 - l1)^2 + (u2 - p2)^2)
        high = (p1 - p2) + sqrt((u1 - p1)^2 + (p2 - l2)^2)

    It stays inside [-1, 1], keeps its coverage near the nominal level for small samples and proportions near 0
    or 1 (where the Wald interval collapses), and is what the gate reads for members against controls.
    """
    p1, p2 = x1 / _positive(n1, "n1"), x2 / _positive(n2, "n2")
    l1, u1 = wilson_interval(x1, n1, confidence)
    l2, u2 = wilson_interval(x2, n2, confidence)
    d = p1 - p2
    return d - math.hypot(p1 - l1, u2 - p2), d + math.hypot(u1 - p1, p2 - l2)


def auc_interval(positives: np.ndarray, negatives: np.ndarray,
                 confidence: float = 0.95) -> tuple[float, float, float]:
    """The AUC ``P(X > Y) + P(X = Y) / 2`` of scores ``X`` of ``positives`` against ``Y`` of ``negatives`` (the
    Mann-Whitney statistic divided by ``m n``) and its interval ``AUC -/+ z sqrt(V)``, clipped to [0, 1].

    V is DeLong's variance of the U-statistic (E. R. DeLong, D. M. DeLong, D. L. Clarke-Pearson, "Comparing the
    areas under two or more correlated receiver operating characteristic curves: a nonparametric approach",
    Biometrics 44 (1988), 837-845, Sec. 2): with the placements ``V10(X_i)`` (the share of negatives ``X_i`` beats,
    ties 1/2) and ``V01(Y_j)`` (the share of positives that beat ``Y_j``), ``V = S10 / m + S01 / n`` with ``S10``,
    ``S01`` their sample variances. Placements come from mid-ranks (Hanley and Hajian-Tilaki, Acad. Radiol. 4
    (1997)), so ties are exact and the cost is O((m + n) log(m + n)). When every positive beats every negative
    the placements are constant and the interval is the point (a sample too small to show otherwise is the
    policy's ``min_objects`` to refuse).
    """
    x, y = np.asarray(positives, dtype=float), np.asarray(negatives, dtype=float)
    m, n = len(x), len(y)
    if m < 2 or n < 2:
        raise ParameterError(f"the AUC's interval needs at least 2 scores per side, got {m} and {n}", "auc_interval")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ParameterError("scores must be finite", "auc_interval")
    if not 0 < confidence < 1:
        raise ParameterError(f"confidence must be in (0, 1), got {confidence}", "auc_interval")
    both = mid_ranks(np.concatenate([x, y]))
    rx, ry = mid_ranks(x), mid_ranks(y)
    v10 = (both[:m] - rx) / n            # negatives below X_i, ties 1/2
    v01 = 1.0 - (both[m:] - ry) / m      # positives above Y_j, ties 1/2
    auc = float(v10.mean())
    z = float(ndtri(0.5 + confidence / 2))
    half = z * math.sqrt(v10.var(ddof=1) / m + v01.var(ddof=1) / n)
    return auc, max(0.0, auc - half), min(1.0, auc + half)


def _positive(n: int, name: str) -> int:
    if not (isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1):
        raise ParameterError(f"{name} must be a positive integer, got {n!r}", "newcombe_interval")
    return int(n)


def mid_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``values``, tied values sharing the mean of their ranks (the Mann-Whitney statistic's
    ranks). Through pandas, already loaded: ``scipy.stats`` would add most of a second to every release process's
    start."""
    return pd.Series(values).rank(method="average").to_numpy()
