"""Mix zones: Liu, Kang, Wang, Zhang, "Traffic-aware multiple mix zone placement for protecting location
privacy", IEEE INFOCOM 2012 (UTMP), as re-implemented by the survey of trajectory privacy models (Jin et al., TKDE 2023,
Sec. 3.2.1, ref. [79]; settings, Sec. 5.1: r = 500 m, 1,000 zones; [S-code] the survey's Java code
``uqwhua/TrjPrivacy`` ``MixZone.java``). numpy/pandas/scipy; the
placement's graph loops, the cover and the cut are compiled with numba (sequential loops over vertices and points
that numpy cannot vectorise: a DFS, a greedy with a heap, a bucket-grid nearest-zone lookup, a per-point state
machine).

Public surface:

- :class:`MixzoneParams` (``from_dict``/``to_dict``), :func:`guarantee` (params, road_network_source).
- :func:`place_mix_zones` (road network, K) → :class:`Placement`: reads only the network.
- :func:`split_fragments` (points, zone_xy, params) → (points with a local ``fragment`` number, counts);
  :func:`assign_pseudonyms` (n, rng); :func:`finish`; :func:`anonymize` for a whole in-memory frame.
- Lower level: :func:`covering_zone`, :func:`fragment_numbers`, :func:`articulation_points`,
  :func:`maximal_independent_set`, :func:`node_graph`, :func:`split_components`.

Decisions (where the paper/survey is silent, or where this code deviates):

1. Placement (:mod:`.placement`): articulation points split the graph; the MIS of each component is greedy by
   (degree, node index); articulation points are never in the MIS, so they start as zones; all non-MIS vertices
   start as zones and the greedy removal runs on all of them. The greedy is exact (always the zone adding the
   fewest associations, ties to the smaller node index) with incremental costs instead of the paper's
   recomputation from scratch. No networkx (not installed): DFS and union-find compiled with numba, components
   with scipy.sparse.csgraph. The placement is deterministic: same network ⇒ same zones, whatever the data.
2. Coverage: a point is covered by the NEAREST zone within r (the survey's code takes "a zone within r").
3. Cut rule: the survey's code compares each covered point's zone with the FIRST zone the trajectory ever
   touched, never cuts there and never updates it. Here the reference is the zone of the last cut (at the start:
   the zone covering the first point, if any), so a trip is cut whenever it enters a zone different from the one it was last cut at, the first
   zone included (A → B → A cuts three times; a long stay in B cuts once). The cut needs >= ``min_length``
   (10) points in the current fragment, as in the code. Reason: a mix zone that does not change the
   pseudonym protects nothing, and with suppression it would only punch a hole in one fragment.
4. Suppression (``suppress_in_zone``, default True): the survey removes no point, so consecutive fragments
   are contiguous and trivially re-linked (survey Sec. 3.2.1, refs [32], [105], [106]). The default removes
   every covered point; the cuts are
   the same in both modes (suppression only removes points). ``suppress_in_zone: false`` is the survey's
   behaviour. Why suppression is the default: without it the last fix before a cut and the first fix after
   it are seconds and metres apart, so re-linking the fragments is trivial and the pseudonym change protects
   nothing; the price is the in-zone points (on T-Drive with 1,000 zones on a synthetic network, under 1 % of
   the points; far more with dense zones), so the survey's "Mixzone keeps almost all points" (INF) no longer
   holds exactly. Fragments with fewer than ``min_fragment_points`` (2) points are dropped and counted
   (``min_fragment_points: 1`` together with ``suppress_in_zone: false`` reproduces the survey exactly).
5. Pseudonyms: the released ``traj_id`` of the fragments is a uniformly random permutation of 1..F over the
   whole release (the code draws random ids per user); rows are ordered by it, so no input order survives.
   The fragment→object mapping stays private (``object_id`` is dropped by publication; ``source_traj_id`` is
   not published).
6. Trips that touch no zone are published whole under a new id (as the survey's code does).
"""

from mechanisms.mixzone.anonymize import (
    anonymize,
    assign_pseudonyms,
    covering_zone,
    finish,
    fragment_numbers,
    split_fragments,
)
from mechanisms.mixzone.guarantee import ROAD_NETWORK_SOURCES, guarantee
from mechanisms.mixzone.params import MixzoneParams
from mechanisms.mixzone.placement import (
    Placement,
    articulation_points,
    maximal_independent_set,
    node_graph,
    place_mix_zones,
    split_components,
)

__all__ = [
    "ROAD_NETWORK_SOURCES",
    "MixzoneParams",
    "Placement",
    "anonymize",
    "articulation_points",
    "assign_pseudonyms",
    "covering_zone",
    "finish",
    "fragment_numbers",
    "guarantee",
    "maximal_independent_set",
    "node_graph",
    "place_mix_zones",
    "split_components",
    "split_fragments",
]
