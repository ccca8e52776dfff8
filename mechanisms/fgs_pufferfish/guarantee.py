"""The guarantee of an FGS-Pufferfish release (or of a baseline), in words a data steward reads verbatim.

Ou et al. (2018), §V-A (the Pufferfish framework), Thm 4; caveats G8, G9, G14, G15 of
docs/design.md (FGS-Pufferfish).
"""

from __future__ import annotations

from mechanisms.fgs_pufferfish.params import FgsParams
from mechanisms.fgs_pufferfish.privacy import AnalyticEpsilon, EmpiricalEpsilon
from mechanisms.fgs_pufferfish.scales import b_c0_for_location_std, noise_scales
from trajpub.guarantee import EmpiricalBound, Guarantee, PrivacyMap

_AUDIT_PAIR = ("two simulated objects of 6 days of 32 slots with 300 m series, one jittery (correlation time 1 "
               "slot) and one smooth (8 slots), b_C0 calibrated to epsilon 1; one object's release when it is "
               "either of the two, the claim's secret pair")
#: The bench's audit (``python -m bench.dp_audit --only fgs_pufferfish``, :func:`mechanisms.fgs_pufferfish.dp_audit.scenarios`)
#: with the mean trajectory published in clear: its first value separates the two objects in every run.
AUDIT_PUBLISHED_MEAN = EmpiricalBound(
    "fgs_pufferfish", "the two objects (secret pair), published-mean statistic",
    _AUDIT_PAIR + "; statistic: the published mean trajectory", 1.0, 7.904833181370311, True, 2000, 10_000)
#: The same pair with the mean withheld, against the claim's own adversary (the released series' correlation).
AUDIT_CORRELATION = EmpiricalBound(
    "fgs_pufferfish", "the two objects (secret pair), lag-1 correlation statistic",
    _AUDIT_PAIR + "; mean trajectory withheld; statistic: the lag-1 correlation of the released deviations",
    1.0, 0.0, False, 2000, 10_000)


def audited_bound(params: FgsParams) -> EmpiricalBound | None:
    """The bench's empirical lower bound that applies to ``params``: a mean published in clear is told apart
    whatever the method; with the mean withheld, FGS against its own adversary; a perturbed mean is not audited
    (its noise is not calibrated to any sensitivity, so its bound depends on how far apart the objects' means are)."""
    if params.centre and params.mean_trajectory == "publish":
        return AUDIT_PUBLISHED_MEAN
    if params.method == "fgs" and params.centre and params.mean_trajectory == "withhold":
        return AUDIT_CORRELATION
    return None


_SECRETS = (
    "secrets: the temporal correlation of each object's centred daily series; discriminative pairs: the "
    "correlations of any two distinct objects in this database"
)


def guarantee(
    params: FgsParams,
    analytic: AnalyticEpsilon | None = None,
    empirical: EmpiricalEpsilon | None = None,
) -> Guarantee:
    """The guarantee before the run (``analytic`` None: ε is computed from the data after it) or after it."""
    if params.method == "fgs":
        return _fgs(params, analytic, empirical)
    return _baseline(params, empirical)


def _noise_words(params: FgsParams) -> str:
    if params.method != "fgs":
        return f"location noise of standard deviation {params.location_std_m:g} m per slot and coordinate"
    if params.location_std_m is not None:
        b_c0 = b_c0_for_location_std(params, params.location_std_m)
        return (f"location noise of standard deviation {params.location_std_m:g} m per slot and coordinate "
                f"(b_C0 = {b_c0:.6g} m^2)")
    if params.b_c0 is not None:
        sigma = noise_scales(params, params.b_c0).location_std
        return f"b_C0 = {params.b_c0:g} m^2, i.e. location noise of standard deviation {sigma:.4g} m per slot"
    return (f"b_C0 calibrated from the data so that the analytic epsilon is {params.epsilon:g} in total "
            f"({params.epsilon / 2:g} for x and for y)")


def _fgs(params: FgsParams, analytic: AnalyticEpsilon | None, empirical: EmpiricalEpsilon | None) -> Guarantee:
    if analytic is None:
        eps_words = ("The paper's analytic epsilon (Theorem 4) depends on the data and is computed after the run "
                     "from the objects' correlations; it is reported with the release.")
        if params.epsilon is not None:
            eps_words = f"The paper's analytic epsilon is set to {params.epsilon:g} (x and y together)."
        epsilon = params.epsilon
    else:
        eps_words = (f"The paper's analytic epsilon (Theorem 4) is {analytic.epsilon_x:.4g} for x and "
                     f"{analytic.epsilon_y:.4g} for y, {analytic.total:.4g} in total, over {analytic.n_objects} "
                     "objects.")
        epsilon = analytic.total
    if empirical is not None:
        eps_words += (f" An empirical estimate from {empirical.n_samples}+ simulated releases per object "
                      f"(a plug-in of the paper's Thm 4) is {empirical.epsilon_x:.4g} for x and "
                      f"{empirical.epsilon_y:.4g} for y.")
    statement = (
        "Pufferfish privacy of each object's temporal correlation (Ou et al. 2018, FGS mechanism): from the "
        "released daily trajectories, an adversary who computes the temporal correlation (mobility pattern) of "
        "a released object should not be able to tell which object of this database it belongs to, up to a "
        f"factor exp(epsilon). Each day is resampled to {params.n_slots} slots, centred on the object's per-slot "
        f"mean, and noise is added to a random number K ~ Geometric({params.p:g}) of its lowest Fourier "
        f"coefficients ({_noise_words(params)}); the higher frequencies are dropped. " + eps_words
        + " This epsilon is a bookkeeping number of the paper, not a proven bound: the paper's variance formula "
        "for the noisy correlation (Thm 3) is wrong and its Laplace shape is only asymptotic."
    )
    caveats = [
        ("The sensitivity is data-dependent: epsilon is the largest weighted distance between two objects' "
        "correlations in this database divided by the noise scale, so epsilon (and b_C0 when it is calibrated "
        "from a target epsilon) reveals something about the data itself. It protects only the pairs of objects "
        "present in this database, and it is not differential privacy."),
        _mean_caveat(params),
        ("Only the temporal correlation is protected. Individual positions carry noise but no location-privacy "
        "guarantee; the dates of each object's released days, their number, and the grouping of days by object "
        "are published in clear."),
        "x and y are protected separately; the total epsilon is their sum (sequential composition).",
        "Laplace noise is sampled in floating point, not hardened against Mironov's attack (2012).",
    ]
    if params.allocation == "paper":
        caveats.append("The paper's 'optimal' noise scales (Eq. 11) are a stationary point of its utility "
                       "objective, in fact its maximum, and are within 0.1% of uniform scales.")
    return Guarantee(
        model="epsilon-Pufferfish (analytic, data-dependent)",
        privacy_unit="the temporal correlation of one object",
        statement=statement,
        proven=False,
        privacy_map=PrivacyMap("Pufferfish", "per_object"),  # each object's series gets its own noise
        neighbouring=_SECRETS,
        epsilon=epsilon,
        caveats=tuple(caveats),
        empirical_bound=audited_bound(params),
    )


def _baseline(params: FgsParams, empirical: EmpiricalEpsilon | None) -> Guarantee:
    if params.method == "cts":
        what = ("CTS baseline (not from the paper; rebuilt from the abstract of Wang and Xu, CTS-DP, 2017): "
                "correlated Laplace noise whose autocorrelation follows the object's own temporal correlation, "
                "so the noise itself depends on the data")
    else:
        what = (f"FPA_k baseline (not from the paper; Rastogi and Nath 2010) with k = {params.fpa_k}: Laplace "
                f"noise on the {params.fpa_k} lowest Fourier coefficients, higher frequencies dropped; its "
                "epsilon-DP calibration needs an L2 sensitivity that centred, unbounded trajectories do not have, "
                "so it is calibrated by noise level instead")
    statement = (f"No formal privacy guarantee. Each day is resampled to {params.n_slots} slots and centred on "
                 f"the object's per-slot mean; {what}; {_noise_words(params)}.")
    if empirical is not None:
        statement += (" The empirical Pufferfish epsilon of the temporal correlations (a plug-in of Ou et al.'s "
                      f"Thm 4) is {empirical.epsilon_x:.4g} for x and {empirical.epsilon_y:.4g} for y, a "
                      "data-dependent estimate, not a bound.")
    return Guarantee.heuristic(
        "heuristic", "the temporal correlation of one object", statement,
        (_mean_caveat(params), _DATES_CAVEAT), neighbouring=_SECRETS, empirical_bound=audited_bound(params))


_DATES_CAVEAT = ("The dates of each object's released days, their number, and the grouping of days by object are "
                 "published in clear.")


def _mean_caveat(params: FgsParams) -> str:
    if not params.centre:
        return "The series are not centred (a known zero-mean process): the released values are the positions."
    if params.mean_trajectory == "publish":
        return ("The mean trajectory (each object's per-slot mean position over all its days) is published "
                "WITHOUT noise, as the paper's Algorithm 1 does. It is not covered by any guarantee and can reveal "
                "home and work places directly; with few days it is close to the raw trajectory.")
    if params.mean_trajectory == "withhold":
        return ("The mean trajectory is withheld: the release holds each slot's noisy deviation from an "
                "unpublished per-object mean, not absolute positions.")
    return (f"The mean trajectory is published with Laplace noise of scale {params.mean_noise_m:g} m per slot and "
            "coordinate, a heuristic with no formal guarantee; it can still reveal frequent places.")
