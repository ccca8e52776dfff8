"""FGS-Pufferfish: Fourier-coefficient Laplace noise with a geometric number of kept coefficients, protecting the
temporal correlation of each object's daily trajectories. Ou, Qin, Liao, Yin, Jia, IEEE Access 6 (2018).
Pure numpy/pandas. Labels G1–G19 in this package are the choices listed in docs/design.md (FGS-Pufferfish).

Public surface, in the order a pipeline uses it:

- :class:`FgsParams` (``from_dict``/``to_dict``): all public parameters, validated, including the method
  ("fgs", or the baselines "cts" and "fpa", which are not from the paper) and the noise level.
- :func:`guarantee` (params[, analytic, empirical]): the steward's text; before the run it says that ε comes
  from the data.
- :func:`prepare` (points, grid, params) → :class:`PreparedDays`: daily series of N slots per object-day in
  metres, with the days left out and why; ``PreparedDays.objects()`` yields (object_id, dates, days);
  :func:`days_in_window` (params, window) says beforehand how many days a snapshot window can hold.
- :func:`object_correlation` (days, params) → (2, I): an object's secret, needed on the driver only for ε.
- :func:`noise_calibration` (params[, correlations]) → (b_C0 x, b_C0 y): data-independent unless
  ``params.epsilon`` is set (then calibrated from all objects' correlations; docs/design.md, FGS-Pufferfish).
- :func:`release_object` (days, params, rng, b_c0=...) → (:class:`ReleasedDays`, info): one object, Alg. 1.
- :func:`released_points` (object_id, dates, released, grid, timezone[, traj_ids]) → point frame.
- :func:`analytic_epsilon` (correlations, params, b_c0) → :class:`AnalyticEpsilon` (Thm 4);
  :func:`noisy_correlations` + :func:`correlation_stats` per object, then :func:`empirical_epsilon` →
  :class:`EmpiricalEpsilon` (docs/design.md, FGS-Pufferfish).

Lower level (tests, benchmarks): :func:`noise_scales` / :class:`NoiseScales` (Eq. 11 and uniform),
:func:`fourier_perturb`, :func:`lowpass`, :func:`dft`, :func:`day_correlations`, :func:`correlated_laplace` (CTS),
:func:`ar1_series` (the paper's simulated data).
"""

from mechanisms.fgs_pufferfish.cts import correlated_laplace
from mechanisms.fgs_pufferfish.guarantee import guarantee
from mechanisms.fgs_pufferfish.mechanism import ReleasedDays, centre_days, release_object
from mechanisms.fgs_pufferfish.params import FgsParams
from mechanisms.fgs_pufferfish.points import released_points
from mechanisms.fgs_pufferfish.prepare import PreparedDays, days_in_window, prepare, slot_times
from mechanisms.fgs_pufferfish.privacy import (
    AnalyticEpsilon,
    CorrelationStats,
    EmpiricalEpsilon,
    analytic_epsilon,
    calibrate_b_c0,
    correlation_stats,
    empirical_epsilon,
    noise_calibration,
    noisy_correlations,
    object_correlation,
)
from mechanisms.fgs_pufferfish.scales import NoiseScales, b_c0_for_location_std, noise_scales
from mechanisms.fgs_pufferfish.simulate import ar1_series
from mechanisms.fgs_pufferfish.spectrum import day_correlations, dft, fourier_perturb, lowpass

__all__ = [
    "AnalyticEpsilon",
    "CorrelationStats",
    "EmpiricalEpsilon",
    "FgsParams",
    "NoiseScales",
    "PreparedDays",
    "ReleasedDays",
    "analytic_epsilon",
    "ar1_series",
    "b_c0_for_location_std",
    "calibrate_b_c0",
    "centre_days",
    "correlated_laplace",
    "correlation_stats",
    "day_correlations",
    "days_in_window",
    "dft",
    "empirical_epsilon",
    "fourier_perturb",
    "guarantee",
    "lowpass",
    "noise_calibration",
    "noise_scales",
    "noisy_correlations",
    "object_correlation",
    "prepare",
    "release_object",
    "released_points",
    "slot_times",
]
