"""The guarantee of an AdaTrace release, in words a data steward reads verbatim."""

from __future__ import annotations

from mechanisms.adatrace.params import AdaTraceParams
from trajpub import noise
from trajpub.guarantee import Guarantee, object_level_caveat

_NEIGHBOURING = {
    "add_remove": "add/remove one trajectory record",
    "replace": "replace one trajectory record",
}


def guarantee(params: AdaTraceParams) -> Guarantee:
    """ε-DP per trajectory record for the synopsis; for the released trajectories unless the raw-data
    resilience checks run (``attack_resilience`` with ``resilience_reads_raw``): sniffing and outlier
    deniability read the raw data, which is not post-processing."""
    eps = params.epsilon
    b = params.budget
    differ = ("differ by adding or removing one trajectory record" if params.neighbouring == "add_remove"
              else "differ by replacing one trajectory record with another")
    if params.length_model == "median":
        lengths = (f"route lengths {b['length_global'] + b['length_trip']:g} (global median {b['length_global']:g}, "
                   f"per-trip medians {b['length_trip']:g}, exponential mechanism)")
    else:
        lengths = f"route-length detour histogram {b['length_detour']:g}"
    parts = (f"grid {b['grid_top'] + b['grid_leaf']:g} (top level {b['grid_top']:g}, leaves {b['grid_leaf']:g}), "
             f"mobility model {b['markov']:g}, trip distribution {b['trip']:g}, {lengths}")
    core = (f"The AdaTrace synopsis (Gursoy et al., CCS 2018) satisfies epsilon-differential privacy with epsilon = "
            f"{eps:g} for each trajectory record: for any two input databases that {differ}, the probability of "
            f"every possible synopsis changes by at most a factor exp({eps:g}). The budget is split into {parts}; "
            "each trajectory's contribution to every count is bounded (its point weights sum to 1 in the density "
            f"grids, its transitions weigh at most {params.transition_cap:g} in total, it has one trip and one "
            "length), and Laplace noise of scale sensitivity/epsilon-part is added.")
    if params.reads_raw_after_synopsis:
        statement = core + (
            " Attack resilience is ON: after synthesis, the partial-sniffing and outlier-leakage checks compare the "
            "synthetic trajectories with the RAW trajectories and drop or replace some of them. That step is not "
            "post-processing of the synopsis, so the released trajectories are NOT covered by the differential "
            "privacy proof: which trajectories are released depends on the raw data in a way whose privacy loss "
            "is not bounded. The Bayesian-inference check uses only the synopsis and keeps the guarantee.")
        proven = False
    elif params.attack_resilience:
        statement = core + (
            " Attack resilience is ON in its synopsis-only form: the Bayesian-inference check and the rare-cell "
            "outlier rule read only the synopsis, the synthetic data and fresh randomness, so the released "
            "synthetic trajectories are epsilon-differentially private as well (post-processing). The paper's "
            "partial-sniffing and plausible-deniability checks, which read the raw data, are off.")
        proven = True
    else:
        statement = core + (
            " Synthesis reads only the synopsis and fresh randomness, so the released synthetic trajectories are "
            "epsilon-differentially private as well (post-processing). Attack resilience is off.")
        proven = True
    object_level = object_level_caveat(eps, params.max_records_per_object)
    caveats = [
        object_level,
        ("The extent of the grid, its top level, the length cap and the other parameters are public and fixed "
         "before looking at the data (the authors' code takes the grid's extent from the data, which we do not)."),
        ("Synthetic trajectories carry no timestamps and one point per visited grid cell, drawn uniformly inside "
         "the cell; they are not any person's trajectory, but population-level patterns (dense areas, popular "
         "trips) are released on purpose and can be learned by anyone (survey: 'purely relying on differential "
         "privacy is not the ultimately safest choice')."),
        noise.CAVEAT,
    ]
    if params.attack_resilience:
        caveats.append(
            "The attack-resilience checks are heuristics against three named attacks (Bayesian inference on one "
            "sensitive zone, partial sniffing in one sniff region, outliers); passing them is not a guarantee "
            "against other zones, regions or attacks.")
    else:
        caveats.append(
            "Without attack resilience, a synthetic trajectory may by chance resemble a real one in a sparse area "
            "(AdaTrace's outlier-leakage threat); differential privacy bounds what that reveals about any one "
            "record but does not prevent the resemblance.")
    model = "epsilon-DP synopsis + heuristic filters on raw data" if params.reads_raw_after_synopsis else "epsilon-DP"
    return Guarantee.per_record(eps, statement, caveats, params.max_records_per_object, model=model, proven=proven,
                                neighbouring=_NEIGHBOURING[params.neighbouring])
