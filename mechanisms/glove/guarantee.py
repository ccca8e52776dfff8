"""The guarantee of a GLOVE release, in words a data steward reads verbatim (Jin et al., TKDE 2023,
Sec. 3.1.1 and 6.1: what k-anonymity does and does not give)."""

from __future__ import annotations

from mechanisms.glove.params import GloveParams
from trajpub.guarantee import Guarantee


def privacy_unit(params: GloveParams) -> str:
    return ("one trajectory (a person's trip on one day)" if params.unit == "trajectory"
            else "one object's whole fingerprint (all of its trajectories in the release window)")


def k_statement(params: GloveParams, model: str, every_fix_covered: bool = True) -> str:
    """The k-anonymity part of the statement (shared with KLT, which may suppress regions)."""
    k = params.k
    leftover = ("groups still below k at the end are merged into the nearest finished group"
                if params.on_leftover == "merge_nearest" else "groups still below k at the end are suppressed")
    covered = (", and every original fix of a published record lies inside one of its group's published samples"
               if every_fix_covered else "")
    return (
        f"k-anonymity of mobile fingerprints by generalisation ({model}), k = {k}. The "
        f"fingerprints ({'trajectories' if params.unit == 'trajectory' else 'objects'}) are merged greedily into "
        f"groups of at least {k} distinct objects, never two fingerprints of the same object in one group; "
        f"{leftover}, so no group of fewer than {k} objects is published. Every published record is a sequence of "
        "generalised samples, each a rectangle (lon/lat bounds) and a time span, and all the records of a group "
        f"are identical: each record is indistinguishable from at least {k - 1} others that belong to other "
        f"objects. Every published rectangle and time span contains at least one original fix of each of the "
        f"group's objects (so at least {k} objects){covered}. Original coordinates and times are not published. "
        "This is a syntactic property enforced by construction and checked on the output, not a bound on what an "
        "attacker learns: it is a heuristic privacy model, not differential privacy.")


def guarantee(params: GloveParams) -> Guarantee:
    """What a GLOVE release with ``params`` protects."""
    statement = k_statement(params, "GLOVE, Gramaglia and Fiore 2015")
    caveats = [
        ("Homogeneity: when the members of a group went to the same places (a shared depot, a rank at the airport), "
         "the generalised samples still reveal those places; k-anonymity does not protect attributes (attribute "
         "linkage); KLT adds l-diversity and t-closeness of the places for that."),
        ("Background knowledge: an attacker who knows some of a person's fixes can still narrow the person down "
         "to the groups whose regions contain them; the group's k records share the person's rough path, time of "
         "day and trip duration."),
        ("The algorithm is deterministic and public (greedy least-stretch merging): an attacker who knows it and "
         "most of the input may reason about which grouping produced the output (minimality-style attacks)."),
        ("Locality pruning: merge costs are only computed to nearby candidates, so groups may be larger in space "
         "and time than exhaustive GLOVE would make them; this affects utility, not the k-anonymity property."),
        ("Utility: every group publishes as many samples as its shortest member (or fewer); the survey measured "
         "that GLOVE loses more than 90% of point-level information, and regions of several kilometres and "
         "time spans of hours are common on taxi data."),
    ]
    if params.unit == "trajectory":
        caveats.insert(0, "The unit is one trajectory: an object with several trajectories (e.g. one per day) is "
                          "in several groups, and nothing bounds what those groups reveal together; an attacker "
                          "who links an object's days (same home, same depot) can intersect its groups.")
    if params.on_leftover == "suppress":
        caveats.append("Suppressed fingerprints are left out of the release; whether one was left out depends on "
                       "where and when it moved.")
    return Guarantee.heuristic("k-anonymity by generalisation (GLOVE, heuristic)", privacy_unit(params), statement,
                               caveats)
