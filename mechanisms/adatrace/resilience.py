"""AdaTrace's attack-resilience layer (Gursoy et al. CCS 2018, Sec. 3.3 and 5.2; [Ada-code]
``generateAttackResilientTrajectories``; survey ref. [50]), run on the synthetic database.

Which checks read what, and what that means for DP:

1. **Bayesian inference** (:func:`bayesian_defense`): the sensitive zone is the leaf of rank
   ``sensitive_zone_rank`` in the NOISY leaf density; the adversary's prior is the NOISY trip distribution and
   the NOISY transition distribution; the posterior is the same two distributions over the synthetic
   trajectories that cross the zone. If JSD(prior, posterior) > ϑ for either, those trajectories are replaced
   by fresh ones (up to ``max_resilience_rounds`` rounds, then dropped). Inputs: synopsis, synthetic data,
   public parameters, ``rng``: post-processing, so it keeps ε-DP. (The Java code ranks the zone and builds
   the Markov prior on the raw data; we do not.)
2. **Partial sniffing** (:func:`sniffing_failures`, through a :class:`RawOracle`): for every REAL trajectory
   that crosses the sniff region (the leaf of rank ``sniff_region_rank`` in the noisy density), the synthetic
   trajectory whose in-region part is closest in DTW to the real in-region part fails if it shares at least
   ``sniff_shared_cells`` distinct leaves with the real trajectory, or crosses the sensitive zone. It reads
   the raw data, as the paper's does: NOT post-processing.
3. **Outlier leakage** (:func:`outlier_defense`): synthetic trajectories whose start point, end point or
   travelled distance is a k-NN outlier among the synthetic ones must have plausible deniability among the
   REAL ones (≥ κ real trajectories whose distance is within β·scale of the closest real one) when the closest
   real one is within ``closest_fraction``·scale; otherwise they are dropped. It reads the raw data (as the
   paper's): NOT post-processing. The Java code's fourth, location-visit test (DTW against every real
   trajectory) is replaced by a synopsis-only rule: trajectories visiting a leaf whose noisy density is below
   ``rare_leaf_density`` are dropped (post-processing).

Dropped trajectories are replaced by fresh ones that avoid the sniff region and the sensitive zone
([Ada-code] step ix). So with ``attack_resilience = true`` the released set depends on the raw data through
checks 2 and 3 beyond the ε-DP synopsis: the output is not covered by a DP proof (see the guarantee). With
``resilience_reads_raw = false`` only the synopsis-only parts run (check 1 and the rare-cell rule of check 3,
then the top-up), which are post-processing: the output stays ε-DP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.spatial import cKDTree

from mechanisms.adatrace import synthesis
from mechanisms.adatrace.counting import Trajectories, leaf_sequences
from mechanisms.adatrace.grid import AdaptiveGrid
from mechanisms.adatrace.synopsis import Synopsis

FEATURES = ("start", "end", "length")


@dataclass(frozen=True)
class SyntheticSet:
    """Synthetic trajectories: CSR leaf sequences, their trip index, and one point (x, y) per leaf visit."""

    offsets: np.ndarray
    leaves: np.ndarray
    trip: np.ndarray
    x: np.ndarray
    y: np.ndarray

    @property
    def n(self) -> int:
        return len(self.offsets) - 1

    @property
    def owner(self) -> np.ndarray:
        return np.repeat(np.arange(self.n), np.diff(self.offsets))

    def subset(self, which: np.ndarray) -> SyntheticSet:
        which = np.asarray(which, dtype=np.int64)
        offs, leaves = synthesis.select(self.offsets, self.leaves, which)
        _, x = synthesis.select(self.offsets, self.x, which)
        _, y = synthesis.select(self.offsets, self.y, which)
        return SyntheticSet(offs, leaves, self.trip[which], x, y)

    def without(self, drop: np.ndarray) -> SyntheticSet:
        keep = np.ones(self.n, bool)
        keep[np.asarray(drop, dtype=np.int64)] = False
        return self.subset(np.flatnonzero(keep))

    def visits(self, leaf: int | np.ndarray) -> np.ndarray:
        """Boolean per trajectory: does it visit ``leaf`` (or any of the given leaves)?"""
        hit = np.isin(self.leaves, np.atleast_1d(leaf))
        return np.bincount(self.owner[hit], minlength=self.n) > 0

    @staticmethod
    def concat(a: SyntheticSet, b: SyntheticSet) -> SyntheticSet:
        lengths = np.r_[np.diff(a.offsets), np.diff(b.offsets)]
        return SyntheticSet(np.r_[0, np.cumsum(lengths)].astype(np.int64), np.r_[a.leaves, b.leaves],
                            np.r_[a.trip, b.trip], np.r_[a.x, b.x], np.r_[a.y, b.y])

    def features(self) -> dict[str, np.ndarray]:
        return trajectory_features(self.offsets, self.x, self.y)


def realise(grid: AdaptiveGrid, offsets: np.ndarray, leaves: np.ndarray, trip: np.ndarray,
            rng: np.random.Generator) -> SyntheticSet:
    """Leaf sequences to points: one uniform random point inside each visited leaf."""
    x, y = grid.sample_points(leaves, rng)
    return SyntheticSet(offsets, leaves, trip, x, y)


def fresh(syn: Synopsis, n: int, rng: np.random.Generator, avoid: np.ndarray | None = None) -> SyntheticSet:
    """``n`` new synthetic trajectories (avoiding the given leaves when ``avoid`` is not None)."""
    if avoid is None:
        offs, leaves, trip = synthesis.generate(syn, n, rng)
    else:
        offs, leaves, trip = synthesis.generate_avoiding(syn, n, avoid, rng)
    return realise(syn.grid, offs, leaves, trip, rng)


def trajectory_features(offsets: np.ndarray, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """Start point (n, 2), end point (n, 2) and travelled distance (n, 1) of CSR trajectories."""
    n = len(offsets) - 1
    if n == 0:
        return {"start": np.empty((0, 2)), "end": np.empty((0, 2)), "length": np.empty((0, 1))}
    first, last = offsets[:-1], offsets[1:] - 1
    step = np.hypot(np.diff(x), np.diff(y))
    owner = np.repeat(np.arange(n), np.diff(offsets))
    inside = owner[1:] == owner[:-1]
    travelled = np.bincount(owner[:-1][inside], weights=step[inside], minlength=n)
    return {"start": np.column_stack([x[first], y[first]]), "end": np.column_stack([x[last], y[last]]),
            "length": travelled[:, None]}


def jsd(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence with the natural log (maximum ln 2), of two normalised vectors."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    m = 0.5 * (p + q)

    def kl(a: np.ndarray) -> float:
        nz = a > 0
        return float(np.sum(a[nz] * np.log(a[nz] / m[nz])))

    return 0.5 * kl(p) + 0.5 * kl(q)


# --- 1. Bayesian inference (synopsis only) ----------------------------------------------------------------------

def posterior_divergence(syn: Synopsis, subset: SyntheticSet) -> tuple[float, float]:
    """JSD(prior, posterior) for the trip and the transition distributions; ``subset`` non-empty."""
    g = syn.grid
    trips = np.bincount(subset.trip, minlength=g.n_top ** 2).astype(float)
    owner = subset.owner
    inside = owner[1:] == owner[:-1]
    e = g.edge_index(subset.leaves[:-1][inside], subset.leaves[1:][inside])
    moves = np.bincount(e[e >= 0], minlength=len(g.edges)).astype(float)
    post_markov = moves / moves.sum() if moves.sum() > 0 else moves
    return (jsd(syn.trip_probabilities, trips / trips.sum()),
            jsd(syn.markov_prior, post_markov) if moves.sum() > 0 else 0.0)


def bayesian_defense(syn: Synopsis, synthetic: SyntheticSet, zone: int,
                     rng: np.random.Generator) -> tuple[SyntheticSet, dict]:
    """[Ada-code] Attack 1: while the zone's posterior diverges by more than ϑ, replace the trajectories that
    cross the zone by fresh ones; after ``max_resilience_rounds`` rounds drop the remaining ones."""
    p = syn.params
    report = {"zone_leaf": zone, "rounds": 0, "replaced": 0, "dropped": 0, "passed": True,
              "zone_trajectories": 0, "jsd_trip": None, "jsd_markov": None}  # JSDs: last evaluated round
    for rnd in range(p.max_resilience_rounds + 1):
        through = np.flatnonzero(synthetic.visits(zone))
        report["zone_trajectories"] = len(through)
        if len(through) == 0:
            break
        jt, jm = posterior_divergence(syn, synthetic.subset(through))
        report.update(jsd_trip=round(jt, 6), jsd_markov=round(jm, 6))
        if jt <= p.bayes_threshold and jm <= p.bayes_threshold:
            break
        if rnd == p.max_resilience_rounds:
            synthetic = synthetic.without(through)
            report["dropped"] = len(through)
            report["zone_trajectories"] = 0
            report["passed"] = False
            break
        report["rounds"] = rnd + 1
        report["replaced"] += len(through)
        synthetic = SyntheticSet.concat(synthetic.without(through), fresh(syn, len(through), rng))
    return synthetic, report


# --- 2. Partial sniffing (raw data) -------------------------------------------------------------------------------

def first_run(offsets: np.ndarray, leaves: np.ndarray, region: int) -> tuple[np.ndarray, np.ndarray]:
    """For every trajectory, the positions of its first contiguous run of points in ``region``:
    CSR ``(run_offsets, positions)`` (empty rows for trajectories that never enter the region)."""
    n = len(offsets) - 1
    inside = leaves == region
    owner = np.repeat(np.arange(n), np.diff(offsets))
    run_start = inside & np.r_[True, ~inside[:-1] | (owner[1:] != owner[:-1])]
    run_id = np.cumsum(run_start) - 1
    first_start = np.full(n, -1)
    starts = np.flatnonzero(run_start)
    # the first run start of each owner
    o = owner[starts]
    firsts = starts[np.r_[True, o[1:] != o[:-1]]] if len(starts) else starts
    first_start[owner[firsts]] = firsts
    pos = np.flatnonzero(inside)
    keep = run_id[pos] == run_id[np.maximum(first_start[owner[pos]], 0)]
    keep &= first_start[owner[pos]] >= 0
    pos = pos[keep]
    counts = np.bincount(owner[pos], minlength=n)
    return np.r_[0, np.cumsum(counts)].astype(np.int64), pos


def sniffing_failures(raw: Trajectories, grid: AdaptiveGrid, synthetic: SyntheticSet, sniff: int, zone: int,
                      shared_threshold: int) -> np.ndarray:
    """Indices of the synthetic trajectories that fail the partial-sniffing test against these REAL ones.

    A synthetic trajectory is a collapsed leaf sequence with one point per visit, so its first run in the
    sniff region is a single point p, and the DTW between the real run a₁..aₙ and [p] is Σᵢ‖aᵢ − p‖.
    """
    s_offs, s_pos = first_run(synthetic.offsets, synthetic.leaves, sniff)
    has = np.diff(s_offs) > 0
    cand = np.flatnonzero(has)
    if len(cand) == 0 or raw.n == 0:
        return np.empty(0, np.int64)
    sp = np.column_stack([synthetic.x[s_pos[s_offs[cand]]], synthetic.y[s_pos[s_offs[cand]]]])
    raw_leaf = grid.leaf_of(raw.x, raw.y)
    r_offs, r_pos = first_run(raw.offsets, raw_leaf, sniff)
    sniffed = np.flatnonzero(np.diff(r_offs) > 0)
    if len(sniffed) == 0:
        return np.empty(0, np.int64)
    l_offs, l_leaves = leaf_sequences(raw, grid)
    zone_hit = synthetic.visits(zone)
    s_owner = synthetic.owner
    fail = []
    for t in sniffed:
        pts = r_pos[r_offs[t]:r_offs[t + 1]]
        a = np.column_stack([raw.x[pts], raw.y[pts]])
        dtw = np.sqrt(((a[:, None, :] - sp[None, :, :]) ** 2).sum(-1)).sum(0)
        best = int(cand[np.argmin(dtw)])
        shared = np.intersect1d(l_leaves[l_offs[t]:l_offs[t + 1]],
                                synthetic.leaves[synthetic.offsets[best]:synthetic.offsets[best + 1]])
        if len(shared) >= shared_threshold or zone_hit[best]:
            fail.append(best)
    del s_owner
    return np.unique(np.asarray(fail, dtype=np.int64))


# --- 3. Outlier leakage (raw data for the deniability counts) --------------------------------------------------

def knn_outliers(features: np.ndarray, k: int, n_out: int) -> np.ndarray:
    """The ``n_out`` rows with the largest mean distance to their k nearest other rows ([Ada-code] kd-tree)."""
    n = len(features)
    if n <= 1 or n_out <= 0:
        return np.empty(0, np.int64)
    kk = min(k, n - 1)
    d, _ = cKDTree(features).query(features, k=kk + 1)
    score = d[:, 1:].mean(axis=1) if kk >= 1 else np.zeros(n)
    order = np.lexsort((np.arange(n), -score))
    return np.sort(order[: min(n_out, n)])


def nearest_distance(raw_features: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Distance from each query row to the closest raw row (∞ when there is no raw row)."""
    if len(raw_features) == 0:
        return np.full(len(query), np.inf)
    d, _ = cKDTree(raw_features).query(query, k=1)
    return np.asarray(d, float)


def count_within(raw_features: np.ndarray, query: np.ndarray, centre: np.ndarray, tol: float) -> np.ndarray:
    """For each query row, the number of raw rows at a distance d with |d − centre| ≤ tol."""
    if len(raw_features) == 0 or len(query) == 0:
        return np.zeros(len(query), np.int64)
    tree = cKDTree(raw_features)
    outer = tree.query_ball_point(query, centre + tol, return_length=True)
    inner_r = centre - tol
    inner = np.zeros(len(query), np.int64)
    pos = inner_r > 0
    if pos.any():
        inner[pos] = tree.query_ball_point(query[pos], np.nextafter(inner_r[pos], 0), return_length=True)
    return np.asarray(outer, np.int64) - inner


class RawOracle(Protocol):
    """The raw-data questions the sniffing and outlier checks ask (answered next to the data)."""

    def sniffing_failures(self, grid: AdaptiveGrid, synthetic: SyntheticSet, sniff: int, zone: int,
                          shared_threshold: int) -> np.ndarray: ...
    def nearest(self, feature: str, query: np.ndarray) -> np.ndarray: ...
    def count_within(self, feature: str, query: np.ndarray, centre: np.ndarray, tol: float) -> np.ndarray: ...


class LocalOracle:
    """:class:`RawOracle` over in-memory trajectories (tests, notebooks)."""

    def __init__(self, raw: Trajectories):
        self.raw = raw
        self.features = trajectory_features(raw.offsets, raw.x, raw.y)

    def sniffing_failures(self, grid, synthetic, sniff, zone, shared_threshold):
        return sniffing_failures(self.raw, grid, synthetic, sniff, zone, shared_threshold)

    def nearest(self, feature, query):
        return nearest_distance(self.features[feature], query)

    def count_within(self, feature, query, centre, tol):
        return count_within(self.features[feature], query, centre, tol)


def deniability_drops(synthetic: SyntheticSet, feature: str, scale: float, n_out: int, oracle: RawOracle,
                      params) -> np.ndarray:
    """Outliers (by ``feature``) that are close to a real trajectory without κ plausible alternatives."""
    f = synthetic.features()[feature]
    out = knn_outliers(f, params.outlier_neighbours, n_out)
    if len(out) == 0 or scale <= 0:
        return np.empty(0, np.int64)
    q = f[out]
    d_min = oracle.nearest(feature, q)
    close = d_min <= params.closest_fraction * scale
    if not close.any():
        return np.empty(0, np.int64)
    counts = oracle.count_within(feature, q[close], d_min[close], params.deniability_beta * scale)
    return out[close][counts < params.deniability_kappa]


def outlier_defense(syn: Synopsis, synthetic: SyntheticSet,
                    oracle: RawOracle | None) -> tuple[SyntheticSet, dict]:
    """[Ada-code] Attack 3 (i)-(viii): start, end and length outliers without plausible deniability (only with
    an ``oracle`` on the raw data), then location-visit outliers (leaves with noisy density <
    ``rare_leaf_density``), are dropped."""
    p = syn.params
    report = {"dropped_start_outliers": 0, "dropped_end_outliers": 0, "dropped_length_outliers": 0}
    for feature, n_out in (("start", p.n_outliers), ("end", p.n_outliers), ("length", p.n_outliers // 2)):
        if oracle is None:
            break
        if feature == "length":
            lengths = synthetic.features()["length"][:, 0]
            scale = float(lengths.max() - lengths.min()) if len(lengths) else 0.0
        else:
            scale = syn.grid.diagonal
        drop = deniability_drops(synthetic, feature, scale, n_out, oracle, p)
        report[f"dropped_{feature}_outliers"] = len(drop)
        synthetic = synthetic.without(drop)
    rare = np.flatnonzero(syn.noisy_leaf < p.rare_leaf_density)
    visit = np.flatnonzero(synthetic.visits(rare)) if len(rare) else np.empty(0, np.int64)
    report["dropped_location_outliers"] = len(visit)
    return synthetic.without(visit), report


def apply_resilience(syn: Synopsis, synthetic: SyntheticSet, oracle: RawOracle | None, target: int,
                     rng: np.random.Generator) -> tuple[SyntheticSet, dict]:
    """The three defenses in the Java code's order, then top-up to ``target`` trajectories with fresh ones
    that avoid the sniff region and the sensitive zone. Without an ``oracle`` only the synopsis-only parts run
    (Bayesian inference, rare-cell location outliers): pure post-processing."""
    p = syn.params
    zone = syn.leaf_rank(p.sensitive_zone_rank)
    sniff = syn.leaf_rank(p.sniff_region_rank)
    synthetic, bayes = bayesian_defense(syn, synthetic, zone, rng)
    if oracle is not None:
        fails = oracle.sniffing_failures(syn.grid, synthetic, sniff, zone, p.sniff_shared_cells)
    else:
        fails = np.empty(0, np.int64)
    synthetic = synthetic.without(fails)
    synthetic, outliers = outlier_defense(syn, synthetic, oracle)
    need = max(target - synthetic.n, 0)
    topped = 0
    if need:
        extra = fresh(syn, need, rng, avoid=np.array([zone, sniff]))
        topped = extra.n
        synthetic = SyntheticSet.concat(synthetic, extra)
    report = {"bayesian": bayes, "sniff_leaf": sniff, "raw_checks": oracle is not None,
              "sniffing_failures": len(fails), **outliers,
              "replacements": topped, "shortfall": int(max(target - synthetic.n, 0))}
    return synthetic, report
