"""W4M's greedy k-member clustering on the time-tolerant EDR, with a bounded trash of outliers.

Abul, Bonchi, Nanni (2010) cluster greedily around pivots under EDR and "trash" at most ``trash_max`` of the
trajectories as outliers (suppressed, never published). The paper leaves the details open; the choices made
here (also listed in the package docstring):

1. Distance: normalised EDR ``EDR / max(n, m)`` in [0, 1]; raw EDR would make short trajectories close to
   everything. Pairs pruned by :func:`mechanisms.w4m.edr.candidate_pairs` have exactly 1 (no match).
2. Ties, the rule on sparse taxi data (most pairs share no matchable point, distance 1), are broken by the
   translation cost (:func:`translation_cost`: the mean distance, at up to :data:`COST_SAMPLES` of the pivot's
   timestamps, between the pivot and the other trajectory's interpolated position, plus ``match_m /
   time_tolerance_s`` metres per second the other trajectory's time span misses that timestamp by), then by a
   random rank from the caller's generator.
3. Outliers first: a trajectory whose (k−1)-th nearest trajectory of another object is at distance
   ≥ ``outlier_edr`` is an outlier; the worst (largest such distance, then the random rank) are trashed, at
   most ``floor(trash_max · n)``.
4. Greedy: the first seed is random; its k−1 nearest remaining trajectories (of k−1 distinct other objects
   when ``distinct_objects``) form a cluster; the next seed is the remaining trajectory farthest from the last
   seed (EDR, then centroid distance; k-member clustering, Byun et al. 2007); until too few remain.
5. Leftovers: each is trashed if it is an outlier and the trash still has room, otherwise it joins the cluster
   whose seed is nearest (EDR, then the translation cost measured at the leftover's timestamps). So every cluster has at least k members (k distinct objects when
   ``distinct_objects``) and the trash never exceeds ``floor(trash_max · n)``, except when not even one
   cluster can be formed (fewer than k objects): then everything is trashed and the release is empty.
6. Pivot: the cluster's published pivot (centre of the cylinder and time grid) is its medoid under the
   translation cost (least total cost to the other members; ties to the longer trajectory), not the seed:
   farthest-first seeds are the most outlying trajectories, the worst possible centres.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from mechanisms.w4m.params import W4MParams
from mechanisms.w4m.trajectories import PositionIndex, Trajectories

#: Pivot timestamps (evenly spread) at which the translation cost is evaluated.
COST_SAMPLES = 12


@dataclass(frozen=True)
class Clustering:
    """``labels[i]``: cluster of trajectory ``i`` (``-1`` = trashed); ``pivots[c]``: the pivot (centre) of
    cluster ``c``; ``seeds[c]``: the trajectory it was grown from; ``outlier_distance[i]``: distance to the
    (k−1)-th nearest trajectory of another object; ``infeasible``: not even one cluster could be formed."""

    labels: np.ndarray
    pivots: np.ndarray
    seeds: np.ndarray
    outlier_distance: np.ndarray
    infeasible: bool = False

    @property
    def n_clusters(self) -> int:
        return len(self.pivots)

    @property
    def trashed(self) -> np.ndarray:
        return np.flatnonzero(self.labels < 0)


class _Distances:
    """Normalised EDR of every pair, stored sparsely as the similarity ``1 − distance`` (absent = distance 1)."""

    def __init__(self, n: int, pairs: np.ndarray, dist: np.ndarray) -> None:
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        dist = np.asarray(dist, dtype=np.float64)
        keep = dist < 1.0
        i, j, s = pairs[keep, 0], pairs[keep, 1], 1.0 - dist[keep]
        self.n = n
        self.m = sparse.csr_matrix((np.r_[s, s], (np.r_[i, j], np.r_[j, i])), shape=(n, n))
        self.m.sum_duplicates()

    def row(self, i: int) -> np.ndarray:
        out = np.ones(self.n)
        a, b = self.m.indptr[i], self.m.indptr[i + 1]
        out[self.m.indices[a:b]] = 1.0 - self.m.data[a:b]
        out[i] = 0.0
        return out

    def kth_other_object(self, owners: np.ndarray, k_minus_1: int) -> np.ndarray:
        """Per trajectory, the (k−1)-th smallest distance to trajectories of other objects (1 when fewer than
        k−1 of them are closer than 1; inf when fewer than k−1 other objects exist)."""
        out = np.ones(self.n)
        for i in range(self.n):
            a, b = self.m.indptr[i], self.m.indptr[i + 1]
            cols, vals = self.m.indices[a:b], self.m.data[a:b]
            vals = 1.0 - vals[owners[cols] != owners[i]]
            if len(vals) >= k_minus_1:
                out[i] = np.partition(vals, k_minus_1 - 1)[k_minus_1 - 1]
        if len(np.unique(owners)) - 1 < k_minus_1:
            out[:] = np.inf
        return out


def translation_cost(index: PositionIndex, pivot: int, others: np.ndarray, params: W4MParams) -> np.ndarray:
    """The tie-break of the clustering (module docstring, 2.): per trajectory in ``others``, the mean over up
    to :data:`COST_SAMPLES` of ``pivot``'s timestamps of the distance from the pivot to its interpolated
    position, plus ``match_m / time_tolerance_s`` metres per second of the gap between the timestamp and its
    time span."""
    traj = index.traj
    tp, xp, yp = traj.points(pivot)
    pick = np.unique(np.linspace(0, len(tp) - 1, min(COST_SAMPLES, len(tp))).round().astype(np.int64))
    tp, xp, yp = tp[pick], xp[pick], yp[pick]
    qx, qy = index.at(others, tp)
    start, end = traj.t[traj.offsets[others]], traj.t[traj.offsets[others + 1] - 1]
    gap = np.maximum(start[:, None] - tp[None, :], 0.0) + np.maximum(tp[None, :] - end[:, None], 0.0)
    speed = params.match_m / params.time_tolerance_s
    return (np.hypot(qx - xp[None, :], qy - yp[None, :]) + speed * gap).mean(axis=1)


def greedy_clusters(traj: Trajectories, pairs: np.ndarray, dist: np.ndarray, params: W4MParams,
                    rng: np.random.Generator) -> Clustering:
    """Cluster ``traj`` given the normalised EDR ``dist`` of candidate ``pairs`` (all other pairs at 1); see
    the module docstring for the algorithm and its tie-breaking."""
    n, k = traj.n, params.k
    empty = np.zeros(0, np.int64)
    if n == 0:
        return Clustering(empty, empty, empty, np.zeros(0), infeasible=True)
    owners = traj.owner_codes() if params.distinct_objects else np.arange(n, dtype=np.int64)
    dm = _Distances(n, pairs, dist)
    index = PositionIndex(traj)
    rank = rng.permutation(n).astype(np.float64)  # the random tie-break
    cx, cy = traj.centroids()
    kth = dm.kth_other_object(owners, k - 1)
    if len(np.unique(owners)) < k:
        return Clustering(np.full(n, -1, np.int64), empty, empty, kth, infeasible=True)
    labels = np.full(n, -2, dtype=np.int64)  # -2 unassigned, -1 trashed

    budget = int(np.floor(params.trash_max * n))
    outliers = np.flatnonzero(kth >= params.outlier_edr)
    worst = outliers[np.lexsort((rank[outliers], -kth[outliers]))][:budget]
    labels[worst] = -1
    budget -= len(worst)

    seeds: list[int] = []
    remaining = np.flatnonzero(labels == -2)
    seed = int(remaining[np.argmin(rank[remaining])]) if len(remaining) else -1
    while seed >= 0:
        cand = remaining[(remaining != seed) & (owners[remaining] != owners[seed])]
        if len(np.unique(owners[cand])) < k - 1:
            break
        ordered = cand[np.lexsort((rank[cand], translation_cost(index, seed, cand, params), dm.row(seed)[cand]))]
        _, first = np.unique(owners[ordered], return_index=True)  # nearest trajectory of each other object
        members = ordered[np.sort(first)[: k - 1]]
        labels[seed] = labels[members] = len(seeds)
        seeds.append(seed)
        remaining = np.flatnonzero(labels == -2)
        if len(remaining) == 0:
            break
        far = np.lexsort((rank[remaining], -np.hypot(cx[remaining] - cx[seed], cy[remaining] - cy[seed]),
                          -dm.row(seed)[remaining]))
        seed = int(remaining[far[0]])

    if not seeds:
        return Clustering(np.full(n, -1, np.int64), empty, empty, kth, infeasible=True)
    seed_arr = np.asarray(seeds, dtype=np.int64)
    for i in np.flatnonzero(labels == -2):
        if kth[i] >= params.outlier_edr and budget > 0:
            labels[i] = -1
            budget -= 1
            continue
        cost = translation_cost(index, int(i), seed_arr, params)  # at the leftover's own timestamps
        labels[i] = int(np.lexsort((cost, dm.row(i)[seed_arr]))[0])
    pivots = np.array([_medoid(index, np.flatnonzero(labels == c), params) for c in range(len(seeds))],
                      dtype=np.int64)
    return Clustering(labels, pivots, seed_arr, kth)


def _medoid(index: PositionIndex, members: np.ndarray, params: W4MParams) -> int:
    """The member with the least total translation cost to the others (ties: more points, then lower index)."""
    total = np.array([translation_cost(index, int(m), members, params).sum() for m in members])
    order = np.lexsort((members, -index.traj.lengths[members], total))
    return int(members[order[0]])
