"""The guarantee of a dummy-trajectory release (DTPP), in words a data steward reads verbatim (Jin et al.,
TKDE 2023: Sec. 3.2.2, Table 4: LA 0.957 on T-Drive, Sec. 6.1: "utility without privacy")."""

from __future__ import annotations

from mechanisms.dummy.params import DummyParams
from trajpub.errors import ParameterError
from trajpub.guarantee import Guarantee

#: Where the candidate locations come from: a public road network, a synthetic one (experiments), a network
#: derived from the private trajectories, or no network (sub-cell centres).
CANDIDATE_SOURCES = ("public", "synthetic", "derived_from_private_data", "none")


def guarantee(params: DummyParams, road_network_source: str = "none") -> Guarantee:
    """Heuristic (k, l) dummy anonymity against an adversary who knows exactly the exposed locations."""
    if road_network_source not in CANDIDATE_SOURCES:
        raise ParameterError(f"road_network_source must be one of {', '.join(CANDIDATE_SOURCES)}; got "
                             f"{road_network_source!r}", "dummy.road_network_source")
    k, l, ratio = params.k, params.l, params.exposure_ratio
    where = ("points of the road network (vertices and points every "
             f"{params.candidate_spacing_m:g} m along its roads) in the same {params.cell_deg:g} degree cell"
             if road_network_source != "none" else
             f"centres of a fixed {params.subcells} x {params.subcells} subdivision of the same "
             f"{params.cell_deg:g} degree cell (no road network: dummies may fall off-road)")
    exposure = ({"random": f"a random {ratio:.0%} of its locations (drawn by the mechanism)",
                 "spaced": f"{ratio:.0%} of its locations, evenly spaced from first to last (a public rule)"}
                [params.exposure])
    statement = (
        f"Dummy trajectories (Liu et al., WISA 2019, DTPP), k = {k}, l = {l}. Every published real trajectory "
        f"sits in a set of exactly {k} trajectories with the same timestamps: itself and {k - 1} dummies, in a "
        f"random order; which one is real is kept only by the pipeline. The 'exposed' locations, {exposure}, "
        f"are assumed known to the attacker and are shown identically in all {k} members. At every other "
        f"published timestamp the {k} locations include the real one and at least {l - 1} different "
        f"alternatives taken from {where}; each dummy moves no faster than the real trajectory's top speed. "
        "Timestamps where this fails are removed from all members; a trajectory where nothing but exposed "
        "locations would be left is not published. An attacker who knows only the exposed locations cannot "
        f"tell the {k} members apart from them. This is a heuristic: it is not differential privacy, and "
        "the 1-in-k claim does not hold against other knowledge (see the caveats)."
    )
    caveats = [
        ("The real trajectory is published exactly, with its true times: an attacker who knows any one of its "
        "unexposed locations (not just the exposed ones) picks the real member at once. The survey measured "
        "linkage accuracy 0.957 on T-Drive for this model (the worst of its seven models)."),
        ("Dummies stay within the real location's grid cell (about 100 m) at every timestamp, so the set as a "
        "whole reveals where the person was to within a cell; the centre of the k locations estimates it."),
        ("Dummies follow a simple synthetic motion model (random choice among nearby candidates, bounded by the "
        "real top speed); a model of real movement may tell them apart from the real trajectory."),
        "The exposed locations are visible in the release (all members coincide there).",
        ("Every set holds exactly one real trajectory: the number of real trajectories and their timing are "
        f"disclosed, and {k - 1} in {k} published trajectories are fake, which biases counts and densities."),
        ("Each trajectory is protected on its own: a person with several trajectories gets one set per "
        "trajectory, and nothing bounds what the sets reveal together."),
        "Which timestamps and trajectories were suppressed depends on where the person went.",
    ]
    if road_network_source == "none":
        caveats.append("No road network: candidates are sub-cell centres, so dummies may stand in buildings or "
                       "water and an attacker with a map can discard them, reducing the effective k.")
    else:
        caveats.append("Road connectivity is checked only as 'consecutive road locations of a dummy lie on "
                       "the same connected part of the network'; the speed limit uses straight-line distance, "
                       "a lower bound of the road distance.")
    if road_network_source == "synthetic":
        caveats.append("The road network is synthetic: this release is an experiment, not a real publication.")
    elif road_network_source == "derived_from_private_data":
        caveats.append("The road network was derived from the private trajectories themselves: the candidate "
                       "locations may leak information about them.")
    return Guarantee.heuristic("dummy trajectories, (k, l) against exposed locations (heuristic)", "one trajectory",
                               statement, caveats)
