"""The guarantee of a W4M release, in words a data steward reads verbatim.

Abul, Bonchi, Nanni (2010) define (k,δ)-anonymity (co-localisation within a cylinder of diameter δ) and W4M
reaches it heuristically; the survey (Jin et al., TKDE 2023) measured LA 0.847 on T-Drive (Table 4): the property
holds, the protection it suggests does not.
"""

from __future__ import annotations

from mechanisms.w4m.params import W4MParams
from trajpub.guarantee import Guarantee


def guarantee(params: W4MParams) -> Guarantee:
    """What a W4M release with ``params`` protects, and what it does not."""
    k, delta, r = params.k, params.delta_m, params.radius_m
    who = f"{k} distinct objects" if params.distinct_objects else f"{k} trajectories (possibly of fewer objects)"
    centre = ("the set's pivot, one of its members, whose trajectory is published unmoved"
              if params.centre == "pivot" else "the mean of the members' aligned positions")
    statement = (
        f"(k,delta)-anonymity by W4M (Abul, Bonchi and Nanni, 'Wait for Me', Information Systems 2010), k = {k}, "
        f"delta = {delta:g} m. Trajectories are grouped by a time-tolerant edit distance (EDR: points match "
        f"within {params.match_m:g} m per axis and {params.time_tolerance_s:g} s). Every published trajectory "
        f"belongs to a published set (set_id) of at least {who}; all members of a set are published at the "
        f"same timestamps, and at each of them every member lies within {r:g} m of the set's centre "
        f"({centre}), so any two members are within {delta:g} m of each other. This co-localisation holds by "
        "construction and is checked on the output. To get there, the release edits the data: a member's fix "
        "aligned with one of the pivot's (matched by the edit distance, or else the nearest in time within "
        f"{params.time_tolerance_s:g} s) is kept and re-timed to the pivot's timestamp, its other fixes "
        "are deleted, positions at the pivot's other timestamps are interpolated from the member's own track "
        f"(made up, not observed), and every position farther than {r:g} m from the centre is moved onto the "
        f"circle of radius {r:g} m. At most {params.trash_max:.0%} of the trajectories, judged outliers, are "
        f"suppressed (all of them, an empty release, when the data hold fewer than {k} objects). The model is heuristic: there is no theorem bounding what an attacker learns, and this "
        "is not differential privacy."
    )
    caveats = [
        ("Weak against re-identification in practice: the survey measured a linking accuracy of 0.847 for W4M "
         "on T-Drive taxis (Table 4), because original points that already lie in the cylinder are published "
         "unchanged. An attacker who knows a few of a person's points can often find the matching set, and "
         f"where the set is narrow ({delta:g} m) relative to how far people travel, a few known points single "
         "out one member."),
        ("No protection of location (attribute linkage): knowing that a person is in a set reveals where they "
         f"were at every published timestamp to within {delta:g} m, whichever member they are."),
        ("The pivot's trajectory is published exactly (positions and timestamps); the pivot is hidden only "
         "among the set's members, not by any perturbation." if params.centre == "pivot" else
         "The set's centre is the mean of real positions: the published points are anchored on the members' "
         "real whereabouts."),
        ("All members of a set share the pivot's exact timestamps: the pivot's sampling times are disclosed, "
         "and the other members' own timing is replaced (their fixes are shifted by up to the time tolerance, "
         "and fixes at other times are dropped)."),
        ("Suppression is data-dependent: which trajectories were trashed as outliers, and how many, depends on "
         "the data and is itself a signal (an absent trajectory was unusual)."),
        ("Each trajectory is protected on its own: an object with several trajectories (days, trips) appears "
         "in several sets, and intersecting them can narrow down who it is."),
        ("Utility is data-dependent and can be poor: points interpolated at the pivot's timestamps are not "
         "observations, and on sparse, wide-ranging data (taxis) most points move far (see the run metadata: "
         "kept, moved and inserted points and shift distances)."),
        ("Clusters are chosen greedily (EDR, then an estimated translation cost, then a random rank): the "
         "clustering is not optimal, and its random choices come from the run's generator, which is never "
         "published."),
    ]
    unit = "one trajectory" + (" (each set holds k distinct objects)" if params.distinct_objects else "")
    return Guarantee.heuristic("(k,delta)-anonymity (W4M, heuristic)", unit, statement, caveats)
