"""Privacy accounting: the secrets (temporal correlations), the paper's analytic ε and an empirical ε̂.

Ou et al. (2018), Def. 6, Thms 3–4, Eq. 4; the empirical ε̂ and G8, G10, G15:
docs/design.md, FGS-Pufferfish.

Both numbers are **data-dependent**: the "sensitivity" is the largest weighted L1 distance between two objects'
correlations in this database (Thm 4; G15), so ε itself says something about the data, and a b_C0 calibrated from a
target ε leaks that distance. The secrets stay in memory; none of them is returned in metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mechanisms.fgs_pufferfish.mechanism import centre_days, fgs_b_c0, release_object
from mechanisms.fgs_pufferfish.params import FgsParams
from mechanisms.fgs_pufferfish.scales import noise_scales
from mechanisms.fgs_pufferfish.spectrum import day_correlations, ensemble_correlation
from trajpub.errors import InputError, ParameterError

SCALE_ESTIMATORS = ("moments", "mle")


def object_correlation(days: np.ndarray, params: FgsParams) -> np.ndarray:
    """The object's secret ℂ = (C_0..C_{I−1}) for x and y, shape (2, I): the ensemble average over its days of
    the centred series' lag products (Def. 6), with ``params.correlation_estimator`` (G11)."""
    deviation, _ = centre_days(days, params.centre)
    return ensemble_correlation(np.transpose(deviation, (2, 0, 1)), params.lags, params.correlation_estimator)


def weighted_diameter(vectors: np.ndarray, weights: np.ndarray) -> float:
    """max_{u≠v} Σ_i w_i |a_i^{(u)} − a_i^{(v)}| over the rows of ``vectors`` (M, I); O(M²·I) in row blocks."""
    vectors = np.asarray(vectors, dtype=float)
    if len(vectors) < 2:
        raise InputError("Pufferfish secret pairs need at least two objects", "fgs_pufferfish.privacy")
    best = 0.0
    block = max(1, 2_000_000 // (len(vectors) * vectors.shape[1]))
    for start in range(0, len(vectors), block):
        diff = np.abs(vectors[start : start + block, None, :] - vectors[None, :, :]) @ weights
        best = max(best, float(diff.max()))
    return best


def theorem4_epsilon(correlations: np.ndarray, mean_shifts: np.ndarray, scales: np.ndarray) -> tuple[float, float]:
    """(ε_0, Δ) of Thm 4: ε_0 = sup_{u,v} Σ_i |C_i^{(u)} − C_i^{(v)}|/b_{C_i}, Δ = sup_{u,v} Σ_i |δC̄_i^{(u)} −
    δC̄_i^{(v)}|/b_{C_i}; ε = ε_0 + Δ is the paper's bound (via the triangle inequality). Rows are objects."""
    weights = 1.0 / np.asarray(scales, dtype=float)
    return weighted_diameter(correlations, weights), weighted_diameter(mean_shifts, weights)


@dataclass(frozen=True)
class AnalyticEpsilon:
    """The paper's ε (Thm 4 with the Thm 3 scales b_{C_i}) per coordinate, at the b_C0 of the release.

    With scales shared by all objects (this implementation) δC̄ is the same for everybody and Δ = 0 (Thm 4).
    It is a bookkeeping number, not a verified bound: Thm 3's variance is wrong (G8).
    """

    epsilon_x: float
    epsilon_y: float
    delta: tuple[float, float]
    b_c0: tuple[float, float]
    n_objects: int
    lags: int
    estimator: str

    @property
    def total(self) -> float:
        """ε_x + ε_y, sequential composition over the two coordinates (our choice)."""
        return self.epsilon_x + self.epsilon_y

    def to_dict(self) -> dict:
        return {
            "kind": "analytic (Ou et al. Thm 4, data-dependent)",
            "epsilon_x": self.epsilon_x,
            "epsilon_y": self.epsilon_y,
            "epsilon_total": self.total,
            "delta_term": list(self.delta),
            "b_c0_m2": list(self.b_c0),
            "n_objects": self.n_objects,
            "lags": self.lags,
            "estimator": self.estimator,
        }


def analytic_epsilon(
    correlations: np.ndarray, params: FgsParams, b_c0: tuple[float, float] | None = None
) -> AnalyticEpsilon:
    """Thm 4 for all objects' correlations (M, 2, I) (from :func:`object_correlation`) at the release's b_C0.

    ε = (1/b_C0)·max_{u≠v} Σ_i |C_i^{(u)} − C_i^{(v)}|/r_i per coordinate, so ε·σ̄_L² is constant (Thm 4).
    """
    correlations = _check_correlations(correlations, params)
    bx_by = fgs_b_c0(params, b_c0)
    epsilon, delta = [], []
    for c, value in enumerate(bx_by):
        scales = noise_scales(params, value)
        shifts = np.broadcast_to(scales.mean_shift, correlations[:, c].shape)  # the same for every object
        eps0, d = theorem4_epsilon(correlations[:, c], shifts, scales.correlation_scales)
        epsilon.append(eps0 + d)
        delta.append(d)
    return AnalyticEpsilon(epsilon[0], epsilon[1], (delta[0], delta[1]), bx_by, len(correlations), params.lags,
                           params.correlation_estimator)


def calibrate_b_c0(correlations: np.ndarray, params: FgsParams) -> tuple[float, float]:
    """b_C0 per coordinate so that the analytic ε_x = ε_y = ``params.epsilon``/2 (docs/design.md, FGS-Pufferfish):
    b_C0 = A/ε_c with A = max_{u≠v} Σ_i |C_i^{(u)} − C_i^{(v)}|/r_i. Data-dependent (G15)."""
    if params.method != "fgs" or params.epsilon is None:
        raise ParameterError("calibration needs method 'fgs' with epsilon", "fgs_pufferfish.epsilon")
    correlations = _check_correlations(correlations, params)
    ratios = noise_scales(params, 1.0).correlation_ratios
    out = []
    for c in range(2):
        diameter = weighted_diameter(correlations[:, c], 1.0 / ratios)
        if diameter <= 0:
            raise InputError("all objects have the same temporal correlation: ε = 0 for every b_C0, nothing "
                             "to calibrate", "fgs_pufferfish.epsilon")
        out.append(diameter / (params.epsilon / 2.0))
    return out[0], out[1]


def noise_calibration(params: FgsParams, correlations: np.ndarray | None = None) -> tuple[float, float]:
    """The b_C0 of x and y for a FGS release: from the parameters, or calibrated from ``correlations``
    (M, 2, I) when ``params.epsilon`` is set."""
    if params.method == "fgs" and params.epsilon is not None:
        if correlations is None:
            raise ParameterError("epsilon calibration needs all objects' correlations", "fgs_pufferfish.epsilon")
        return calibrate_b_c0(correlations, params)
    return fgs_b_c0(params)


@dataclass(frozen=True, eq=False)
class CorrelationStats:
    """Per-object summary of the noisy correlations C'_i over repeated releases (docs/design.md, FGS-Pufferfish).

    mean: μ_i per coordinate (2, I); scale: the Laplace scale b̂_i per coordinate (2, I); n_samples: number of
    C' vectors summarised (realizations × days for the per-day estimator, realizations for the ensemble one).
    """

    mean: np.ndarray
    scale: np.ndarray
    n_samples: int


def noisy_correlations(
    days: np.ndarray,
    params: FgsParams,
    rng: np.random.Generator,
    *,
    n_realizations: int,
    b_c0: tuple[float, float] | None = None,
    ensemble: bool = False,
) -> np.ndarray:
    """C' of ``n_realizations`` independent releases of one object's days, with the estimator of G10–G11 applied
    to the released deviations x' (the adversary subtracts the published mean). Shape (samples, 2, I):
    one per (realization, day) by default (per-day ergodic C', G10), one per realization if ``ensemble``."""
    days = np.asarray(days, dtype=float)
    n_days = len(days)
    batch = max(1, 400_000 // (n_days * params.n_slots))
    out = []
    for start in range(0, n_realizations, batch):
        r = min(batch, n_realizations - start)
        # r stacked copies of the same days have the same per-slot mean and correlation, so one call is r
        # independent releases of this object (fresh K and noise for every copy of every day).
        released, _ = release_object(np.tile(days, (r, 1, 1)), params, rng, b_c0=b_c0)
        series = np.moveaxis(released.deviation, -1, 1)  # (r·D, 2, N)
        c = day_correlations(series, params.lags, params.correlation_estimator)
        out.append(c.reshape(r, n_days, 2, -1).mean(axis=1) if ensemble else c)
    return np.concatenate(out)


def correlation_stats(samples: np.ndarray, scale_estimator: str = "moments") -> CorrelationStats:
    """μ and b̂ of C' samples (n, 2, I): b̂ = sqrt(Var/2) ("moments") or mean|C' − median| ("mle", the
    Laplace maximum-likelihood scale)."""
    if scale_estimator not in SCALE_ESTIMATORS:
        raise ParameterError(f"scale_estimator must be one of {', '.join(SCALE_ESTIMATORS)}",
                             "fgs_pufferfish.scale_estimator")
    mean = samples.mean(axis=0)
    if scale_estimator == "moments":
        scale = np.sqrt(samples.var(axis=0) / 2.0)
    else:
        scale = np.abs(samples - np.median(samples, axis=0)).mean(axis=0)
    return CorrelationStats(mean, scale, len(samples))


@dataclass(frozen=True)
class EmpiricalEpsilon:
    """ε̂ per coordinate, the plug-in version of Thm 4 on simulated releases (docs/design.md, FGS-Pufferfish)."""

    epsilon_x: float
    epsilon_y: float
    n_objects: int
    n_samples: int

    @property
    def total(self) -> float:
        return self.epsilon_x + self.epsilon_y

    def to_dict(self) -> dict:
        return {
            "kind": "empirical (plug-in of Thm 4 on simulated releases, data-dependent)",
            "epsilon_x": self.epsilon_x,
            "epsilon_y": self.epsilon_y,
            "epsilon_total": self.total,
            "n_objects": self.n_objects,
            "min_samples_per_object": self.n_samples,
        }


def empirical_epsilon(stats: Sequence[CorrelationStats]) -> EmpiricalEpsilon:
    """ε̂ = max_{u≠v} Σ_i |μ_i^{(u)} − μ_i^{(v)}|/b̂_i with the conservative pooled b̂_i = min_u b̂_i^{(u)}."""
    means = np.stack([s.mean for s in stats])
    scales = np.stack([s.scale for s in stats]).min(axis=0)
    eps = [weighted_diameter(means[:, c], 1.0 / scales[c]) for c in range(2)]
    return EmpiricalEpsilon(eps[0], eps[1], len(stats), min(s.n_samples for s in stats))


def _check_correlations(correlations: np.ndarray, params: FgsParams) -> np.ndarray:
    correlations = np.asarray(correlations, dtype=float)
    if correlations.ndim != 3 or correlations.shape[1:] != (2, params.lags):
        raise InputError(f"correlations must have shape (M, 2, {params.lags}), got {correlations.shape}",
                         "fgs_pufferfish.privacy")
    return correlations
