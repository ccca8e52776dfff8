"""The guarantee of a (k-Ψ)-anonymity release, in words a data steward reads verbatim.

Chen, Li, Zhang (2020) §4.1, §5.2, §6, and what the claims really give (per-axis ε, composition
over axes and timestamps, data-dependent scale, centroid leakage, road network sources): docs/design.md,
(k-Ψ)-anonymity.
"""

from __future__ import annotations

from mechanisms.kpsi_anonymity.params import KPsiParams
from trajpub.errors import ParameterError
from trajpub.guarantee import EmpiricalBound, Guarantee

#: Where the road network comes from: a public map (OSM, a national road database), a synthetic network
#: (experiments), a network derived from the private trajectories themselves, or none at all.
ROAD_NETWORK_SOURCES = ("public", "synthetic", "derived_from_private_data", "none")

#: The bench's audit (``python -m bench.dp_audit --only kpsi_anonymity``, :func:`mechanisms.kpsi_anonymity.dp_audit.scenarios`).
AUDIT = EmpiricalBound(
    "kpsi_anonymity", "the real location moved 100 m inside its disc",
    ("k = 4, constant delta 200 m, no road network, the paper's noise scale, per-location epsilon 1; one "
     "location and the same location moved 100 m; statistic: the centroid of its published set"),
    1.0, 0.4613565603966691, False, 2000, 10_000)

_PSI_WORDS = {
    "segment": ("adapted to the local road density: about (1+{mu:g}) times the distance at which a disc "
                "around the point, or around its road segment, first touches k road edges, within "
                "[{lo:g}, {hi:g}] m"),
    "point": ("adapted to the local road density: about (1+{mu:g}) times the distance at which a disc "
              "around the point first touches k road edges, within [{lo:g}, {hi:g}] m"),
    "constant": "the same at every timestamp ({delta}), i.e. (k, delta)-anonymity",
}


def guarantee(params: KPsiParams, road_network_source: str = "public") -> Guarantee:
    """What a release with ``params`` protects, given where its road network comes from
    (:data:`ROAD_NETWORK_SOURCES`)."""
    if road_network_source not in ROAD_NETWORK_SOURCES:
        raise ParameterError(f"road_network_source must be one of {', '.join(ROAD_NETWORK_SOURCES)}; got "
                             f"{road_network_source!r}", "kpsi_anonymity.road_network_source")
    if params.road_aware and road_network_source == "none":
        raise ParameterError("road-aware dummies need a road network: give road_network (a network in "
                             "roads.networks), or road_aware false without one", "kpsi_anonymity.road_network")
    if params.psi_mode != "constant" and road_network_source == "none":
        raise ParameterError("an adaptive psi_mode needs a road network; use 'constant' with delta_m",
                             "kpsi_anonymity.psi_mode")
    k, eps = params.k, params.epsilon
    delta = (f"delta = {params.delta_m:g} m" if params.delta_m is not None
             else "delta = the largest segment threshold")
    psi_words = _PSI_WORDS[params.psi_mode].format(mu=params.mu, lo=params.delta_min_m, hi=params.delta_max_m,
                                                   delta=delta)
    axis_eps = {"paper_per_axis": f"{eps:g}", "per_location": f"{eps / 2:g}",
                "per_trajectory": f"{eps:g}/(2n) for a trajectory of n points"}[params.epsilon_semantics]
    per_location = {"paper_per_axis": f"{2 * eps:g}", "per_location": f"{eps:g}",
                    "per_trajectory": f"{eps:g}/n"}[params.epsilon_semantics]
    per_trajectory = {"paper_per_axis": f"2n x {eps:g}", "per_location": f"n x {eps:g}",
                      "per_trajectory": f"{eps:g}"}[params.epsilon_semantics]
    if params.road_aware:
        dummy_words = ("each dummy lies on a road edge of the network, the k-1 dummies of one timestamp on "
                       "distinct edges other than the real location's edge")
    else:
        dummy_words = "each dummy is drawn uniformly in the disc, ignoring roads"
    measured = ", measured along the roads" if params.road_aware else ", as the crow flies"
    link_words = {
        "reachable": (f"each dummy moves between consecutive timestamps by at most a travel budget "
                      f"({params.kappa:g} x the real object's speed, at least {params.v_floor_mps:g} m/s, "
                      f"times the time step, capped at {params.max_link_budget_m:g} m{measured}); when no "
                      "such position exists the nearest one is taken and counted as a motion violation in "
                      "the status"),
        "index": "dummy locations are drawn independently at each timestamp (the paper's Algorithm 1)",
    }
    scale_words = {
        "paper": ("the coordinate range of the k locations at that timestamp divided by the per-axis epsilon "
                  "(the paper's Eq. 18-19)"),
        "diameter": "2 delta_i divided by the per-axis epsilon",
        "data_independent": (f"2 x {_cap_words(params)} divided by the per-axis epsilon, the same for every "
                             "timestamp"),
    }[params.noise_scale]
    statement = (
        f"(k-Psi)-anonymity with Laplace perturbation (Chen, Li and Zhang 2020), k = {k}. Every real "
        f"trajectory is published inside its own set of exactly {k} trajectories with its real timestamps: "
        f"itself and {k - 1} dummies made up by the anonymity server, in a uniformly random order. Before "
        f"noise, at every timestamp all {k} locations lie within delta_i of the real location, so any two "
        f"are within 2 delta_i (Definitions 4-6 of the paper); delta_i is {psi_words}; {dummy_words}; "
        f"{link_words[params.linking]}. Then every coordinate of every location (real and dummy) gets "
        f"independent Laplace noise with scale {scale_words}, per-axis epsilon = {axis_eps}. Given the set, "
        "the density of any published x (or y) coordinate under one member's true position is within a "
        "factor exp(per-axis epsilon) of its density under any other member's (the paper's Eq. 9-10). That "
        f"bound is per axis: it is exp({per_location}) for a location (x and y) and exp({per_trajectory}) "
        "for a whole trajectory, by composition. The paper's claim that an attacker identifies the real "
        "trajectory with probability at most 1/k is a heuristic, not a theorem (see the caveats)."
    )
    caveats = [_scale_caveat(params)]
    caveats.append(
        "Re-identification can beat 1/k: each disc is centred on the real location, so the average of the "
        f"{k} locations at each timestamp estimates it (centroid leakage), and dummies follow a simple "
        "synthetic motion model that a model of real movement may tell apart from the real trajectory.")
    caveats.append(_network_caveat(params, road_network_source))
    caveats.append(
        f"Timestamps are published exactly, shared by the {k} members of a set; every set holds exactly one "
        "real trajectory, so the number of real trajectories and their timing are disclosed. Sets are "
        "identified by set_id; the real trajectory's member number is not published.")
    caveats.append(
        f"The release holds {k} times as many trajectories as the input and {k - 1} in {k} are synthetic: "
        "counts, densities and flows computed from it are biased unless the consumer accounts for k.")
    caveats.append(
        "Each trajectory is protected on its own: a person with several trajectories gets one independent "
        "set per trajectory, and nothing bounds what the sets reveal together.")
    if params.on_infeasible == "suppress_trajectory":
        caveats.append(
            "Trajectories for which the road network cannot host k-1 dummies are left out; whether a "
            "trajectory was left out depends on where it went.")
    caveats.append("Laplace noise is sampled in floating point, not hardened against Mironov's attack "
                   "(2012).")
    return Guarantee.heuristic(
        "(k-Psi)-anonymity with per-axis Laplace perturbation (heuristic)", "one trajectory", statement, caveats,
        neighbouring="any two locations of the same anonymity set at one timestamp, per axis (not neighbouring "
        "datasets)", empirical_bound=AUDIT)


def _cap_words(params: KPsiParams) -> str:
    if params.psi_mode == "constant":
        return f"{params.delta_m:g} m" if params.delta_m is not None else "the constant delta"
    return f"delta_max = {params.delta_max_m:g} m"


def _scale_caveat(params: KPsiParams) -> str:
    if params.noise_scale == "data_independent":
        return ("The noise scale does not depend on the data. For each published coordinate, any two true "
                f"positions at most 2 x {_cap_words(params)} apart on that axis are indistinguishable up to "
                "a factor exp(per-axis epsilon), a proven metric-privacy bound per point. It is still not "
                "differential privacy with respect to neighbouring datasets: the dummies and their discs are "
                "built around the real trajectory, which the noise does not hide beyond that distance.")
    source = ("from the locations themselves, the real one included" if params.noise_scale == "paper"
              else "from delta_i, which depends on where the real trajectory runs")
    return (f"NOT differential privacy: the noise scale is computed {source}, so the noise level itself "
            "reveals information about the data, and the exp(epsilon) bound holds only within a set, "
            "conditional on that set (Def. 7 of the paper, over neighbouring datasets, is not satisfied). "
            "The epsilon above is the paper's bookkeeping number, not a privacy budget that composes with "
            "DP releases.")


def _network_caveat(params: KPsiParams, source: str) -> str:
    if not params.road_aware:
        return ("Dummies ignore the road network: they may fall off-road, in buildings or in water. An "
                "attacker with a map can discard such dummies, so the effective anonymity can fall below k, "
                "down to 1 (the paper's own Fig. 6 baseline).")
    words = {
        "public": "The road network is public (a published map).",
        "synthetic": "The road network is synthetic: this release is an experiment, not a real publication.",
        "derived_from_private_data": ("The road network was derived from the private trajectories "
                                      "themselves: it leaks information about them and is not covered by "
                                      "any privacy model."),
    }[source]
    snap = (" Real locations are snapped onto their nearest road before anonymization." if params.snap_real
            else " Real locations are not snapped to the road: a real GPS point off the road stands out "
            "among on-road dummies (see the status column real_offroad_median_m).")
    return words + snap
