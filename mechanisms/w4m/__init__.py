"""W4M, "Wait for Me": (k,δ)-anonymity of moving objects by EDR clustering and space translation.

Paper: O. Abul, F. Bonchi, M. Nanni, "Anonymization of moving objects databases by clustering and perturbation",
Information Systems 35(8):884-910, 2010 (extending "Never Walk Alone", ICDE 2008). Survey: Jin et al., "A Survey and
Experimental Study on Privacy-Preserving Trajectory Data Publishing", TKDE 2023 (Sec. 3.1.1; settings, Sec. 5.1:
k = 5, δ = 500 m; Table 4: LA 0.847, INF 0.285 on T-Drive). EDR: Chen, Özsu, Oria, SIGMOD 2005. Pure numpy /
pandas / scipy.

Public surface, in pipeline order:

- :class:`W4MParams` (``from_dict``/``to_dict``) and :func:`guarantee`.
- :func:`from_frame` → :class:`Trajectories` (flat arrays); :func:`candidate_pairs` (exact
  spatio-temporal pruning) → :func:`edr_batch` (vectorised EDR of many pairs) → :func:`normalised`;
  :func:`greedy_clusters` → :class:`Clustering`; :func:`translate_clusters` (editing + translation) →
  :func:`publish` (random set and trajectory ids) and :func:`summarise`. :func:`anonymize` runs all of it on one
  frame; the Dask adapter (``mechanisms/w4m/adapter.py``) runs the same steps in blocks.
- Checks: :func:`is_k_delta_anonymous`, :func:`set_diameters`; single-pair :func:`edr`, :func:`edr_matrix`,
  :func:`alignment`.

Decisions where the paper or the survey is silent, or where this code deviates (and why):

1. Matching (EDR): per-axis spatial threshold ``match_m`` (Chen et al.'s ε; default 250 m = δ/2) AND a time
   tolerance ``time_tolerance_s`` (default 300 s, T-Drive's median sampling interval). W4M's distance is
   time-tolerant; a time-free EDR would match taxis on different days and cannot be pruned.
2. Distance for clustering: EDR / max(n, m) (raw EDR favours short trajectories).
3. Pruning is exact, not approximate: a pair with no matchable point pair has EDR = max(n, m), the maximum
   (proof in :mod:`mechanisms.w4m.edr`); candidates are pairs sharing neighbouring match_m × match_m ×
   time_tolerance buckets. On 300 T-Drive taxis 0.4% of the pairs are computed.
4. Clustering (:mod:`mechanisms.w4m.clustering`): random first seed, farthest-first next seeds (k-member
   clustering), nearest k−1 by EDR with ties (most pairs on taxi data) broken by a translation-cost estimate,
   then a random rank; k DISTINCT objects per set by default (``distinct_objects``; W4M assumes one trajectory
   per object, our trajectories are day/trip segments); outliers = (k−1)-th nearest other object at EDR ≥
   ``outlier_edr``, trashed worst-first up to ``floor(trash_max · n)`` (default 10%); leftovers join the
   nearest seed's cluster unless they are outliers and the trash has room. Trashed trajectories are
   suppressed and counted.
5. Centre and time grid: the cluster's medoid (least translation cost) is its pivot; all members are published
   at the pivot's timestamps (so every timestamp is shared by the whole set). ``centre="pivot"`` (default, the
   survey's "edited towards its pivot") keeps the pivot unmoved; ``"mean"`` (NWA's central trajectory) centres
   the cylinder on the members' mean.
6. Editing (:mod:`mechanisms.w4m.translate`): member fixes EDR-matched to a pivot point are kept and re-timed
   to the pivot's timestamp; between matches (where EDR's substitutions are arbitrary) each pivot point takes
   the member's time-nearest unused fix within the time tolerance; other member fixes are deleted
   (counted); pivot timestamps without a member fix get an inserted point interpolated on the member's own
   track (clamped to its first/last fix outside its span), i.e. the member "waits". Then each point farther
   than δ/2 from the centre moves radially onto the circle of radius δ/2 (least displacement); points inside
   stay exactly as they were.
7. Published ids: ``set_id`` and ``traj_id`` are random permutations (they reveal neither the input order nor
   which member is the pivot); ``object_id`` is carried for the audit. Fixes repeating a timestamp within a
   trajectory are dropped before anything else (counted).

Known weakness (measured, see the adapter's metadata): on T-Drive day-trajectories few pairs share any matched
point, so most published points are interpolated and moved kilometres; the survey's "W4M keeps ~70% of points"
is not reproduced with time-synchronous co-localisation (we keep ~6% unchanged on 300 taxis).
"""

from mechanisms.w4m.clustering import Clustering, greedy_clusters
from mechanisms.w4m.edr import alignment, candidate_pairs, edr, edr_batch, edr_matrix, matches, normalised
from mechanisms.w4m.guarantee import guarantee
from mechanisms.w4m.mechanism import PUBLISHED, W4MRelease, anonymize, pairwise_distances, publish, summarise
from mechanisms.w4m.metrics import is_k_delta_anonymous, set_diameters
from mechanisms.w4m.params import CENTRES, W4MParams
from mechanisms.w4m.trajectories import PositionIndex, from_frame
from mechanisms.w4m.translate import INSERTED, KEPT, MOVED, time_pairs, translate_cluster, translate_clusters
from trajpub.trajectories import Trajectories

__all__ = [
    "CENTRES", "INSERTED", "KEPT", "MOVED", "PUBLISHED", "Clustering", "PositionIndex", "Trajectories", "W4MParams", "W4MRelease",
    "alignment", "anonymize", "candidate_pairs", "edr", "edr_batch", "edr_matrix", "from_frame",
    "greedy_clusters", "guarantee", "is_k_delta_anonymous", "matches", "normalised", "pairwise_distances",
    "publish", "set_diameters", "summarise", "time_pairs", "translate_cluster", "translate_clusters",
]
