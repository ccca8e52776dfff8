"""Utility metrics for the steward's report: how much a release D* preserves of the raw data D.

Formulas from the survey (Jin et al., TKDE 2023, Sec. 4.2) and docs/design.md, "The attacks": the DE and TE
(Jin et al., TKDE 2023, Sec. 4.2.1, from AdaTrace, Gursoy et al. CCS'18, whose ``Evaluation.java`` fixes the
details), the density and length distributions, and the count-query relative error of Chen, Fung, Desai,
"Differentially Private Trajectory Data Publication" (arXiv:1112.2020, Def. 3.7 and Sec. V). The other figures
live beside it: the survey's INF and, for truthful mechanisms, point errors in :mod:`audits.point_utility`, FFP
in :mod:`audits.patterns`, the synthetic-trajectory comparison in :mod:`audits.trajectory_utility`; this module
also names every figure the gate reads (:data:`UTILITY_METRICS`, :data:`UTILITY_SCORES`).

Every metric is an error: 0 means D* preserves the property exactly, larger is worse; the one exception is FFP,
an F-measure (1 is best). Distribution metrics are Jensen-Shannon divergences with the natural logarithm, so they
lie in [0, ln 2]. Trajectory metrics take frames in the trajectory convention of :mod:`trajpub.frame` and treat
each ``traj_id`` as one trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import sparse
from scipy.spatial import ConvexHull
from scipy.spatial.distance import pdist
from scipy.special import rel_entr

from audits.planar import checked_points, ordered_points, planar_trajectories, raw_box_cells, require_rows
from trajpub.errors import InputError, ParameterError
from trajpub.frame import require_columns

UTILITY_METRICS = frozenset({
    "density_jsd", "length_jsd_points", "length_jsd_distance", "diameter_error", "trip_error", "count_query_re",
    "ffp_error", "information_loss", "point_error_m", "fragment_count_re_median", "outside_bbox_share",
    "moved_share", "circle_query_re",
})
"""The names under which the caller reports these error metrics to the gate (lower is better: a policy caps them
with ``max``)."""
UTILITY_SCORES = frozenset({"pattern_f1", "pattern_f1_city", "retained_share", "fragments"})
"""The names of the figures where higher is better (a policy sets a floor on them with ``min``)."""
UTILITY_MEANING = {
    "density_jsd": "where the points are differs from the raw data: JSD of point counts per grid cell, max ln 2",
    "length_jsd_points": "trajectory lengths in points differ from the raw data (JSD)",
    "length_jsd_distance": "travelled distances differ from the raw data (JSD)",
    "diameter_error": "trajectory extents differ from the raw data (JSD of diameters)",
    "trip_error": "trips from region to region differ from the raw data (JSD of start/end cells)",
    "count_query_re": "counting queries over places answer wrongly on average (relative error)",
    "circle_query_re": "range counts over circles answer worse than an empty release would (relative error > 1)",
    "ffp_error": "the raw data's frequent routes are missing (1 - F1 of the top-100 patterns)",
    "pattern_f1": "the release keeps too few of the raw data's 100 most frequent routes (F1)",
    "pattern_f1_city": "at city resolution (~1.5 km cells) the release keeps too few of the raw data's 100 most "
                       "frequent routes (F1): it is right only at coarse resolution",
    "information_loss": "raw points not reproduced within 100 m (share)",
    "point_error_m": "released records lie far from their own raw trajectories (mean Hausdorff distance, m)",
    "fragment_count_re_median": "released fragment counts are far from the exact counts (median relative error)",
    "outside_bbox_share": "released points fall outside the release's public bounding box (share)",
    "moved_share": "released points lie more than 1 km from their own raw trajectory (share)",
    "retained_share": "few raw points are released (released points of real records per raw point)",
    "fragments": "no fragment was released",
}
"""One phrase per figure: what a value beyond the gate's limit means, for the gate's reasons."""


_BRUTE_FORCE_DIAMETER = 64
_DIAMETER_PAIRS_PER_BATCH = 4_000_000  # point pairs per batch of the brute force (~100 MB)
_DIAMETER_POINTS_PER_BLOCK = 1_000_000  # points per block of the long trajectories' hulls (~50 MB)


def jsd(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    """Jensen-Shannon divergence of two histograms over the same bins, natural log (at most ln 2).

    ``JSD(P||Q) = KL(P||M)/2 + KL(Q||M)/2`` with ``M = (P+Q)/2`` and ``KL(P||Q) = sum_i P_i ln(P_i/Q_i)``
    (survey Sec. 4.2.1; AdaTrace's ``Evaluation.java`` uses the natural log). ``p`` and ``q`` are
    non-negative weights, normalised here; ``0 ln 0 = 0``.
    """
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if p.shape != q.shape or p.ndim != 1:
        raise ParameterError(f"p and q must be 1-d histograms of the same length, got {p.shape} and {q.shape}",
                             "jsd")
    for name, h in (("p", p), ("q", q)):
        if not (np.isfinite(h).all() and (h >= 0).all() and h.sum() > 0):
            raise ParameterError(f"{name} must hold finite non-negative weights with a positive sum", "jsd")
    p, q = p / p.sum(), q / q.sum()
    m = (p + q) / 2
    value = 0.5 * rel_entr(p, m).sum() + 0.5 * rel_entr(q, m).sum()
    return float(np.clip(value, 0.0, np.log(2)))


def density_jsd(raw: pd.DataFrame, release: pd.DataFrame, column: str = "cell") -> float:
    """Spatial density error: JSD of the share of points in each value of ``column`` (ours, beside the survey's).

    Every value is a bin, including the grid's -1 ("outside the grid"), so points pushed off the grid count.
    """
    for frame, label in ((raw, "raw"), (release, "release")):
        require_columns(frame, (column,), f"density_jsd: {label} frame")
        require_rows(frame, f"density_jsd: {label} frame")
    counts = pd.concat([raw[column].value_counts(), release[column].value_counts()], axis=1).fillna(0)
    return jsd(counts.iloc[:, 0].to_numpy(), counts.iloc[:, 1].to_numpy())


def length_jsd(raw: pd.DataFrame, release: pd.DataFrame, measure: Literal["points", "distance"] = "points",
               n_buckets: int = 20) -> float:
    """JSD of the trajectory-length histograms (AdaTrace's length error, Gursoy et al. CCS'18).

    ``measure="points"``: the number of points of each trajectory. ``measure="distance"``: the travelled
    distance in metres, the sum of the lengths of consecutive segments in ``seq`` order (AdaTrace's length).
    Buckets: see :func:`bucket_jsd`.
    """
    if measure not in ("points", "distance"):
        raise ParameterError(f"measure must be 'points' or 'distance', got {measure!r}", "length_jsd")
    if measure == "points":
        values = [checked_points(f, label, ("traj_id",)).groupby("traj_id").size().to_numpy()
                  for f, label in ((raw, "raw"), (release, "release"))]
        return bucket_jsd(values[0], values[1], n_buckets)
    (raw_xy, raw_codes), (rel_xy, rel_codes) = planar_trajectories(raw, release, ordered=True)
    return bucket_jsd(_travelled(raw_xy, raw_codes), _travelled(rel_xy, rel_codes), n_buckets)


def diameter_error(raw: pd.DataFrame, release: pd.DataFrame, n_buckets: int = 20) -> float:
    """DE: JSD of the histograms of trajectory diameters (survey Sec. 4.2.1 [51]).

    ``diameter = max pairwise distance between the trajectory's points`` in metres, computed on the convex
    hull. Buckets: see :func:`bucket_jsd`.
    """
    (raw_xy, raw_codes), (rel_xy, rel_codes) = planar_trajectories(raw, release, ordered=False)
    return bucket_jsd(_diameters(raw_xy, raw_codes), _diameters(rel_xy, rel_codes), n_buckets)


def trip_error(raw: pd.DataFrame, release: pd.DataFrame, grid_size: int = 6) -> float:
    """TE: JSD of the distributions of trips (start cell, end cell) (survey Sec. 4.2.1 [51]).

    Cells of a ``grid_size x grid_size`` uniform lon/lat grid over the raw data's bounding box (AdaTrace's
    default is 6 x 6); released points outside the box fall in the nearest border cell. Start and end are a
    trajectory's first and last points in ``seq`` order.
    """
    if not (isinstance(grid_size, int) and grid_size >= 1):
        raise ParameterError(f"grid_size must be a positive integer, got {grid_size!r}", "trip_error")
    raw_pts, rel_pts, box = ordered_points(raw, release)

    def trips(points: pd.DataFrame) -> np.ndarray:
        cells = pd.Series(raw_box_cells(points, box, grid_size), index=points["traj_id"].to_numpy())
        ends = cells.groupby(level=0).agg(["first", "last"])
        return ends["first"].to_numpy() * grid_size**2 + ends["last"].to_numpy()

    raw_trips, rel_trips = trips(raw_pts), trips(rel_pts)
    codes, uniques = pd.factorize(np.concatenate([raw_trips, rel_trips]))
    raw_hist = np.bincount(codes[:len(raw_trips)], minlength=len(uniques))
    rel_hist = np.bincount(codes[len(raw_trips):], minlength=len(uniques))
    return jsd(raw_hist, rel_hist)


def count_query_re(raw_seqs: Sequence[Sequence[int]], release_seqs: Sequence[Sequence[int]],
                   queries: Sequence[Sequence[int]], sanity: float = 0.001) -> float:
    """Average relative error of count queries (Chen, Fung, Desai, arXiv:1112.2020, Def. 3.7 and Sec. V).

    ``Q(D)`` = the number of trajectories of D whose location *set* contains every location of the query
    (order and repetitions ignored). ``RE = |Q(D*) - Q(D)| / max(Q(D), s)`` with the sanity bound
    ``s = sanity * |D|`` (the paper's 0.1% of |D|), so rare queries do not dominate; the result is the mean RE
    over ``queries``. Locations are non-negative integers.
    """
    if not raw_seqs:
        raise InputError("the raw data has no trajectories", "count_query_re")
    if not sanity > 0:
        raise ParameterError(f"sanity must be positive, got {sanity}", "count_query_re")
    query_sets = [np.unique(np.asarray(q, dtype=np.int64)) for q in queries]
    if not query_sets or any(len(q) == 0 for q in query_sets):
        raise ParameterError("count_query_re needs at least one query, and no empty query", "count_query_re")
    raw_seqs, release_seqs = [_int_array(s) for s in raw_seqs], [_int_array(s) for s in release_seqs]
    n_locations = 1 + max(int(a.max()) for a in (*raw_seqs, *release_seqs, *query_sets) if len(a))
    q_raw = _count_queries(raw_seqs, query_sets, n_locations)
    q_rel = _count_queries(release_seqs, query_sets, n_locations)
    return float(np.mean(np.abs(q_rel - q_raw) / np.maximum(q_raw, sanity * len(raw_seqs))))


def random_count_queries(n_locations: int, n_queries: int, max_len: int,
                         rng: np.random.Generator) -> list[np.ndarray]:
    """Chen et al.'s random query workload (arXiv:1112.2020 Sec. V; details: docs/design.md,
Prefix tree, G15).

    Each query's length is uniform on ``1..max_len``; its locations are distinct, uniform over
    ``0..n_locations-1``.
    """
    if not (1 <= max_len <= n_locations):
        raise ParameterError(f"max_len must be in [1, n_locations={n_locations}], got {max_len}",
                             "random_count_queries")
    if n_queries < 1:
        raise ParameterError(f"n_queries must be positive, got {n_queries}", "random_count_queries")
    lengths = rng.integers(1, max_len + 1, size=n_queries)
    return [rng.choice(n_locations, size=int(k), replace=False) for k in lengths]


def _travelled(xy: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Sum of consecutive segment lengths per trajectory (points sorted by trajectory, then ``seq``)."""
    steps = np.hypot(*np.diff(xy, axis=0).T)
    same = codes[1:] == codes[:-1]
    return np.bincount(codes[1:][same], weights=steps[same], minlength=codes.max() + 1)


def _diameters(xy: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Largest distance between two points of each trajectory (points grouped by trajectory).

    Trajectories of at most :data:`_BRUTE_FORCE_DIAMETER` points by brute force, batched by length (all pairs at
    once, ``sqrt(dx*dx + dy*dy)`` as ``pdist`` computes it); larger ones without repeated points (one sort for
    all of them), then on their convex hull, which holds both ends of a diameter (``QJ`` joggles degenerate input
    such as collinear points; the vertices are still input points).
    """
    bounds = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1], True])
    sizes = np.diff(bounds)
    out = np.zeros(len(sizes))
    small = np.flatnonzero((sizes > 1) & (sizes <= _BRUTE_FORCE_DIAMETER))
    for n in np.unique(sizes[small]):
        same_size = small[sizes[small] == n]
        i, j = np.triu_indices(n, 1)
        step = max(1, _DIAMETER_PAIRS_PER_BATCH // len(i))
        for first in range(0, len(same_size), step):
            batch = same_size[first:first + step]
            pts = xy[bounds[batch][:, None] + np.arange(n)]  # (trajectories, n, 2)
            d = pts[:, i] - pts[:, j]
            out[batch] = np.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]).max(axis=1)
    large = np.flatnonzero(sizes > _BRUTE_FORCE_DIAMETER)
    if len(large) == 0:
        return out
    # in blocks of about _DIAMETER_POINTS_PER_BLOCK points (whole trajectories), so that a city's frame is not
    # indexed, sorted and compared all at once
    ends = np.cumsum(sizes[large])
    cuts = np.unique(np.searchsorted(ends, np.arange(_DIAMETER_POINTS_PER_BLOCK, ends[-1],
                                                     _DIAMETER_POINTS_PER_BLOCK)) + 1)
    for block in np.split(large, cuts[cuts < len(large)]):
        rows = np.concatenate([np.arange(bounds[k], bounds[k + 1]) for k in block])
        owner = np.repeat(np.arange(len(block)), sizes[block])
        order = np.lexsort((xy[rows, 1], xy[rows, 0], owner))  # np.unique(pts, axis=0)'s order, per trajectory
        owner, pts = owner[order], xy[rows[order]]
        distinct = np.r_[True, (owner[1:] != owner[:-1]) | (pts[1:, 0] != pts[:-1, 0]) | (pts[1:, 1] != pts[:-1, 1])]
        owner, pts = owner[distinct], pts[distinct]
        for k, (lo, hi) in zip(block, pairwise(np.flatnonzero(np.r_[True, owner[1:] != owner[:-1], True])),
                               strict=True):
            hull = pts[lo:hi]
            if len(hull) > _BRUTE_FORCE_DIAMETER:
                hull = hull[ConvexHull(hull, qhull_options="QJ").vertices]
            if len(hull) > 1:
                out[k] = pdist(hull).max()
    return out


def bucket_jsd(raw_values: np.ndarray, release_values: np.ndarray, n_buckets: int, quantile: float = 1.0) -> float:
    """JSD of histograms over ``n_buckets`` equal-width buckets of ``[0, q]``, q the ``quantile`` of the raw values
    (1: their maximum).

    The edges come from the raw data alone, so every release of the same raw data is measured on the same
    buckets; values beyond q fall in the last bucket. (AdaTrace measures its 20 buckets from 0 to the maximum in
    the same way; a quantile below 1 keeps a few raw outliers, such as GPS glitches, from stretching the buckets.)
    """
    if not (isinstance(n_buckets, int) and n_buckets >= 1):
        raise ParameterError(f"n_buckets must be a positive integer, got {n_buckets!r}", "utility histogram")
    if not 0 < quantile <= 1:
        raise ParameterError(f"quantile must be in (0, 1], got {quantile!r}", "utility histogram")
    top = raw_values.max() if quantile == 1 else np.quantile(raw_values, quantile)
    width = top / n_buckets if top > 0 else np.finfo(float).tiny  # all raw values 0: any positive one is "far"

    def histogram(values: np.ndarray) -> np.ndarray:
        buckets = np.minimum(np.floor(values / width), n_buckets - 1).astype(np.int64)
        return np.bincount(buckets, minlength=n_buckets)

    return jsd(histogram(raw_values), histogram(release_values))


def _int_array(seq: Sequence[int]) -> np.ndarray:
    values = np.asarray(seq, dtype=np.int64).ravel()
    if (values < 0).any():
        raise ParameterError("locations must be non-negative integers", "count_query_re")
    return values


def _count_queries(seqs: list[np.ndarray], queries: list[np.ndarray], n_locations: int) -> np.ndarray:
    """Q(D) for every query: incidence (trajectory x location, 0/1) times query matrix (location x query);
    a trajectory answers a query when it holds all of the query's locations."""
    rows = np.repeat(np.arange(len(seqs)), [len(s) for s in seqs])
    values = np.concatenate([*seqs, np.empty(0, dtype=np.int64)])
    incidence = sparse.csr_matrix((np.ones(len(values)), (rows, values)), shape=(len(seqs), n_locations))
    incidence.data[:] = 1.0
    q_cols = np.repeat(np.arange(len(queries)), [len(q) for q in queries])
    query_matrix = sparse.csc_matrix((np.ones(len(q_cols)), (np.concatenate(queries), q_cols)),
                                     shape=(n_locations, len(queries)))
    hits = (incidence @ query_matrix).tocsc()
    lengths = np.array([len(q) for q in queries])
    entry_query = np.repeat(np.arange(len(queries)), np.diff(hits.indptr))
    return np.bincount(entry_query, weights=hits.data == lengths[entry_query], minlength=len(queries))
