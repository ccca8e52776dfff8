"""Algorithm 1 of Ou et al. (2018) for one object: centre its days, perturb each daily series, re-attach the mean.

The unit of work is one object (a user, a vehicle) with its D prepared days, shape (D, N, 2) in metres, so a
pipeline can run :func:`release_object` per object on its workers. Our choices: docs/design.md, FGS-Pufferfish.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.fgs_pufferfish.cts import correlated_laplace, normalised_autocorrelation
from mechanisms.fgs_pufferfish.fpa import fpa_scale
from mechanisms.fgs_pufferfish.params import FgsParams
from mechanisms.fgs_pufferfish.scales import b_c0_for_location_std, noise_scales
from mechanisms.fgs_pufferfish.spectrum import ensemble_correlation, fourier_perturb
from trajpub.errors import InputError, ParameterError


@dataclass(frozen=True, eq=False)
class ReleasedDays:
    """One object's release, the tuple of Alg. 1 line 15 for every day and slot.

    deviation: (D, N, 2), the noisy centred coordinates (x'_n, y'_n) in metres.
    mean: (N, 2), the mean trajectory (X̄_n, Ȳ_n) as published: exact ("publish"), noisy ("perturb"), or
        ``None`` ("withhold"). Zero when the release does not centre.
    n_kept: (D, 2), the number K of Fourier coefficients kept per day and coordinate (FGS, FPA); ``None``
        for CTS. Not published (it can be read off the released spectrum anyway).
    """

    deviation: np.ndarray
    mean: np.ndarray | None
    n_kept: np.ndarray | None

    @property
    def positions(self) -> np.ndarray:
        """(D, N, 2), the published locations X'_n = X̄_n + x'_n (Alg. 1 output)."""
        if self.mean is None:
            raise ValueError("the mean trajectory is withheld: only the deviations x'_n are released")
        return self.deviation + self.mean


def centre_days(days: np.ndarray, centre: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(x, X̄): X̄_n = mean over days of X_n^{(d)} (Alg. 1 line 3) and x_n^{(d)} = X_n^{(d)} − X̄_n (line 5)."""
    days = np.asarray(days, dtype=float)
    mean = days.mean(axis=0) if centre else np.zeros(days.shape[1:])
    return days - mean, mean


def fgs_b_c0(params: FgsParams, b_c0: tuple[float, float] | None = None) -> tuple[float, float]:
    """b_C0 for x and y. From ``params`` when its noise level is data-independent (b_c0, location_std_m);
    with ``params.epsilon`` it must be given, as calibrated from the data by
    :func:`mechanisms.fgs_pufferfish.privacy.calibrate_b_c0`. A given value that contradicts the parameters
    is refused (so a caller may always pass the result of ``noise_calibration``)."""
    if params.method != "fgs":
        raise ParameterError(f"b_C0 belongs to method 'fgs', not '{params.method}'", "fgs_pufferfish.method")
    if params.epsilon is None:
        value = params.b_c0 if params.b_c0 is not None else b_c0_for_location_std(params, params.location_std_m)
        if b_c0 is not None and not np.allclose(b_c0, (value, value), rtol=1e-12, atol=0):
            raise ParameterError(f"b_c0 {b_c0!r} contradicts the parameters, which give {value!r}",
                                 "fgs_pufferfish.b_c0")
        return float(value), float(value)
    if b_c0 is None:
        raise ParameterError("with epsilon the b_C0 of x and y must be calibrated from all objects' correlations "
                             "first (privacy.calibrate_b_c0)", "fgs_pufferfish.epsilon")
    bx, by = (float(v) for v in b_c0)
    if not all(np.isfinite(v) and v > 0 for v in (bx, by)):
        raise ParameterError(f"calibrated b_C0 must be finite and > 0, got {b_c0!r}", "fgs_pufferfish.b_c0")
    return bx, by


def release_object(
    days: np.ndarray,
    params: FgsParams,
    rng: np.random.Generator,
    *,
    b_c0: tuple[float, float] | None = None,
) -> tuple[ReleasedDays, dict]:
    """Release one object's days (shape (D, N, 2), metres, D ≥ ``params.min_days``) by ``params.method``.

    FGS (Alg. 1 lines 3–15): per day and coordinate, F_k = DFT/N, K ~ Geo(p) clipped at K_max (one K per day
    for both coordinates if ``share_k``), Laplace(b_{F_k}) on Re and Im of F_k for k < K with the Eq. 11 (or
    uniform) scales at b_C0, inverse transform (G2). CTS adds correlated Laplace noise shaped
    by the object's own circular correlation (docs/design.md, FGS-Pufferfish); FPA_k keeps K = k with uniform
    scales (G19).

    ``rng`` must be this object's own generator (e.g. one of ``Generator.spawn``), so that objects draw
    independent K and noise. Draw order: K, coefficient noise, mean-trajectory noise.
    Returns the release and JSON-safe facts for lineage (no seed, no raw value).
    """
    days = np.asarray(days, dtype=float)
    if days.ndim != 3 or days.shape[1:] != (params.n_slots, 2):
        raise InputError(f"days must have shape (D, {params.n_slots}, 2), got {days.shape}", "fgs_pufferfish")
    if len(days) < params.min_days:
        raise InputError(f"an object needs at least min_days = {params.min_days} days, got {len(days)}",
                         "fgs_pufferfish.min_days")
    if not np.all(np.isfinite(days)):
        raise InputError("days contain non-finite coordinates", "fgs_pufferfish")
    deviation, mean = centre_days(days, params.centre)
    series = np.moveaxis(deviation, -1, 1)  # (D, 2, N): one series per day and coordinate
    n_kept = None
    if params.method == "fgs":
        bx, by = fgs_b_c0(params, b_c0)
        scales = np.stack([noise_scales(params, bx).b, noise_scales(params, by).b])
        n_kept = _draw_k(len(days), params, rng)
        noisy = fourier_perturb(series, n_kept, scales, rng, params.reconstruction)
    elif params.method == "fpa":
        n_kept = np.full((len(days), 2), params.fpa_k)
        b = fpa_scale(params.location_std_m, params.fpa_k)
        noisy = fourier_perturb(series, n_kept, np.full(params.k_max, b), rng, params.reconstruction)
    else:
        b = params.location_std_m / np.sqrt(2.0)
        rho = normalised_autocorrelation(ensemble_correlation(np.transpose(deviation, (2, 0, 1)), params.n_slots))
        noise = np.stack([correlated_laplace(rho[c], b, len(days), rng) for c in range(2)], axis=1)
        noisy = series + noise
    released_mean: np.ndarray | None = mean
    if params.mean_trajectory == "withhold":
        released_mean = None
    elif params.mean_trajectory == "perturb":
        released_mean = mean + rng.laplace(0.0, params.mean_noise_m, size=mean.shape)
    released = ReleasedDays(np.moveaxis(noisy, 1, -1), released_mean, n_kept)
    info = {"method": params.method, "n_days": len(days), "mean_trajectory": params.mean_trajectory}
    if n_kept is not None:
        info["mean_kept_coefficients"] = [float(v) for v in n_kept.mean(axis=0)]
    return released, info


def _draw_k(n_days: int, params: FgsParams, rng: np.random.Generator) -> np.ndarray:
    """K_eff = min(K, K_max), K ~ Geo(p) on {1, 2, …}, per day and coordinate (Alg. 1 line 7, G3, G12)."""
    k = rng.geometric(params.p, size=(n_days, 1 if params.share_k else 2))
    return np.broadcast_to(np.minimum(k, params.k_max), (n_days, 2)).copy()
