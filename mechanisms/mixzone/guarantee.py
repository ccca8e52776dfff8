"""The guarantee of a mix-zone release, in words a data steward reads verbatim (Jin et al.,
TKDE 2023: Sec. 3.2.1, Table 4 and Sec. 6.1)."""

from __future__ import annotations

from mechanisms.mixzone.params import MixzoneParams
from trajpub.errors import ParameterError
from trajpub.guarantee import Guarantee

#: Where the road network that carries the zones comes from (as in the (k-Psi) mechanism).
ROAD_NETWORK_SOURCES = ("public", "synthetic", "derived_from_private_data")


def guarantee(params: MixzoneParams, road_network_source: str = "public") -> Guarantee:
    """Heuristic unlinkability of trajectory fragments; not differential privacy, not k-anonymity."""
    if road_network_source not in ROAD_NETWORK_SOURCES:
        raise ParameterError(f"road_network_source must be one of {', '.join(ROAD_NETWORK_SOURCES)}; got "
                             f"{road_network_source!r}", "mixzone.road_network_source")
    r, k_zones = params.radius_m, params.n_zones
    if params.suppress_in_zone:
        inside = (f"every point within {r:g} m of a zone is removed, so consecutive fragments of one trip are "
                  "separated by at least the crossing of a zone")
    else:
        inside = ("no point is removed (the survey's behaviour, 'survey_no_suppression'): consecutive fragments "
                  "of one trip touch each other in space and time")
    statement = (
        f"Mix-zone pseudonym change (Liu, Kang, Wang and Zhang, INFOCOM 2012, UTMP placement). Up to {k_zones} "
        "mix zones are placed on road intersections chosen from the road network alone (not from the data). A "
        f"trajectory is cut into fragments where it enters a mix zone (a point within {r:g} m of the zone's "
        "intersection) other than the last one it was cut at, provided the current fragment already has "
        f"{params.min_length} points; {inside}. Every fragment is published with a fresh random identifier, "
        "unrelated to the person, to the original trip and to the other fragments; which fragments belong "
        "together is kept only by the pipeline (private, never published). Locations and times inside the "
        "fragments are the true ones. This is a heuristic: it makes linking fragments harder, it does not bound "
        "what an attacker can learn (no epsilon, no k)."
    )
    caveats = [
        ("Each fragment is one person's true movement: anyone who knows a few of the person's locations and times "
        "can recognise that fragment (record linkage); the survey measures linkage accuracy about that of KLT "
        "(LA 0.20 on T-Drive) and it rises to 68% when points are sparse, because sparse trips rarely hit a zone."),
        ("Fragments can be re-linked by timing and geometry (attack A13): the fragment that leaves a zone "
        "shortly after another entered it, in a consistent direction, is likely the same trip (a FIFO attack is "
        "easy when few vehicles use a zone at once). Nothing here enforces that several objects mix in a zone."),
        "Trajectories that never enter a mix zone are published whole, under a new identifier only.",
        ("The mapping between fragments and people (object_id, source trajectory) is held by the pipeline, which "
        "acts as the trusted third party: whoever can read the private tables can undo the protection."),
        ("The zone positions are public (they follow from the road network), so an attacker knows where the cuts "
        "can be."),
        ("Each trajectory is protected on its own: a person with many trips contributes many fragments, and their "
        "regularities (home, work) are not hidden."),
    ]
    if not params.suppress_in_zone:
        caveats.insert(0, "Points inside mix zones are NOT removed (survey behaviour): the end of one fragment "
                          "and the start of the next are consecutive fixes of the same trip, seconds and metres "
                          "apart, so the fragments are trivially re-linked. Use this setting only to reproduce "
                          "the survey.")
    if road_network_source == "synthetic":
        caveats.append("The road network is synthetic: the zones do not correspond to real intersections; this "
                       "release is an experiment, not a real publication.")
    elif road_network_source == "derived_from_private_data":
        caveats.append("The road network was derived from the private trajectories themselves: the zone "
                       "positions may leak information about them.")
    return Guarantee.heuristic("mix-zone pseudonym change (heuristic unlinkability)", "one trajectory (its fragments)",
                               statement, caveats)
