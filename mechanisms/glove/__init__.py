"""GLOVE: k-anonymity of mobile traffic fingerprints by specialised generalisation. Gramaglia, M. and Fiore, M.,
"Hiding mobile traffic fingerprints with GLOVE", ACM CoNEXT 2015; as re-implemented and evaluated by the survey
(Jin et al., TKDE 2023, Sec. 3.1.1 and 5; its [S-code], ``uqwhua/TrjPrivacy`` ``models/glove``). numpy/pandas/scipy,
and numba for the row minima of the stretch matrix (:mod:`mechanisms.glove.nearest`).

Every fix becomes a generalised sample (a rectangle and a time span). The stretch effort of two samples is how much
each must grow to their union (paper Eq. 1-9), normalised by 20 km and 24 h and weighted 0.5/0.5; the trajectory-
wise merge cost is, for each sample of the longer fingerprint, the least effort to a sample of the shorter one,
averaged (Eq. 10). The cheapest pair of groups is merged repeatedly; a group that reaches k objects is finished.

Public surface: :class:`GloveParams`, :func:`guarantee`; :func:`build_fingerprints` → :func:`candidate_pairs` →
:func:`pair_costs` (blocks; Dask in the adapter) → :func:`greedy_merge` → :func:`release`; :func:`anonymize` for an
in-memory frame; :func:`stretch_matrix`, :func:`merge_cost`, :func:`merge_samples` (the formulas);
:func:`region_coverage`, :func:`identical_within_sets` (checks of the defining property).

Decisions where the paper/survey is silent, and deviations:

- Unit: ``unit="trajectory"`` (default) follows the survey's trajectory-wise GLOVE; a group never holds two
  trajectories of one object, so "k fingerprints" means k distinct objects. ``unit="object"`` is the paper's
  per-user fingerprint.
- Space in metres (local AEQD CRS), not the [S-code]'s degrees divided by "20 km" (a unit slip); MAX_MINUTE = 24 h
  (the [S-code]'s constant; its comment suggests 8 h for taxis). Each normalised term is capped at 1, as there.
- Merging follows the [S-code]'s ``Merge.mergeTrace``: the longer fingerprint's samples join their least-cost
  sample of the shorter one, then the shorter one's unmatched samples join their least-cost merged sample; the
  result has at most the shorter one's length. Weights n_A, n_B are the groups' fingerprint counts (Eq. 2-7); in
  the second pass the merged samples weigh n_A + n_B. The [S-code]'s ``reshaping`` (trimming overlapping time
  spans) is NOT applied, because trimming can leave original fixes outside every published span; published
  samples are sorted by start time and their spans may overlap.
- Locality pruning (survey [91], "orders of magnitude faster"): a fingerprint's locality key is its mean sample
  centre (x, y, t) scaled like the cost; costs are computed only to the ``candidates`` (12) nearest fingerprints
  of other objects by that key (k-d tree, L1), and for a new group to the active groups of the fingerprints
  nearest to its key. When a group has lost all its candidates, the search widens 4x at a time up to all
  fingerprints. Effect on optimality: each step merges the cheapest pair *among computed pairs*; a cheaper pair
  whose keys are far apart (e.g. two long trips with different means but matching portions) is never considered,
  so groups can be more generalised than exhaustive greedy GLOVE (which is itself a heuristic; optimal
  k-anonymity is NP-hard). ``candidates=None`` gives the exhaustive greedy algorithm (a test checks it equals a
  naive implementation). Measured on 100 T-Drive taxis (1,750 trajectories): candidates 4 / 12 / 32 / 100 gave
  median region (width + height) 26.0 / 26.3 / 29.9 / 32.5 km and 5.4k / 13.8k / 35.6k / 110k merge costs, i.e.
  a wider search did not give smaller regions (greedy cheapest-first leaves harder leftovers), so 12 is the
  default.
- Leftovers (< k at the end): merged into the finished group of least merge cost that shares no object with
  them (``on_leftover="merge_nearest"``, default), or suppressed (``"suppress"``); with fewer than k objects in
  total everything is suppressed. A group < k is never published.
- Published records: every member of a group gets a record (new random ``traj_id``) equal to the group's
  generalised fingerprint, with its own ``object_id`` (truthful) and the group's random ``set_id``. Degree
  bounds are tracked through the merges alongside the metric ones, so the published degree box covers the
  original fixes exactly; times are floored/ceiled to whole seconds (outwards).
"""

from mechanisms.glove.guarantee import guarantee
from mechanisms.glove.mechanism import (
    RELEASE_COLUMNS,
    Fingerprints,
    Group,
    MergeResult,
    anonymize,
    build_fingerprints,
    candidate_pairs,
    greedy_merge,
    locality_keys,
    release,
    summary,
)
from mechanisms.glove.metrics import identical_within_sets, region_coverage
from mechanisms.glove.params import GloveParams
from mechanisms.glove.stretch import (
    COLUMNS,
    locality_key,
    merge_cost,
    merge_samples,
    pair_costs,
    point_samples,
    stretch_matrix,
)

__all__ = [
    "COLUMNS",
    "RELEASE_COLUMNS",
    "Fingerprints",
    "GloveParams",
    "Group",
    "MergeResult",
    "anonymize",
    "build_fingerprints",
    "candidate_pairs",
    "greedy_merge",
    "guarantee",
    "identical_within_sets",
    "locality_key",
    "locality_keys",
    "merge_cost",
    "merge_samples",
    "pair_costs",
    "point_samples",
    "region_coverage",
    "release",
    "stretch_matrix",
    "summary",
]
