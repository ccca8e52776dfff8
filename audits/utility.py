"""Utility metrics for the steward's report: how much a release D* preserves of the raw data D.

Formulas from our survey spec (``specs/seed-002-survey.md`` Sec. 3.2, 3.3 and 6.3): the survey's DE and TE
(Jin et al., TKDE 2023, Sec. 4.2.1, from AdaTrace, Gursoy et al. CCS'18, whose ``Evaluation.java`` fixes the
details), the density and length distributions, and the count-query relative error of Chen, Fung, Desai,
"Differentially Private Trajectory Data Publication" (arXiv:1112.2020, Def. 3.7 and Sec. V; spec seed 004 §5.2).

Every metric is an error: 0 means D* preserves the property exactly, larger is worse. Distribution metrics are
Jensen-Shannon divergences with the natural logarithm, so they lie in [0, ln 2]. Trajectory metrics take frames
in the trajectory convention of :mod:`trajpub.frame` and treat each ``traj_id`` as one trajectory.
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

from trajpub.errors import InputError, ParameterError
from trajpub.frame import require_columns

UTILITY_METRICS = frozenset({
    "density_jsd", "length_jsd_points", "length_jsd_distance", "diameter_error", "trip_error", "count_query_re",
})
"""The names under which the caller reports these metrics to the gate (all: lower is better)."""

EARTH_RADIUS_M = 6_371_008.8
_BRUTE_FORCE_DIAMETER = 64


def jsd(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    """Jensen-Shannon divergence of two histograms over the same bins, natural log (at most ln 2).

    ``JSD(P||Q) = KL(P||M)/2 + KL(Q||M)/2`` with ``M = (P+Q)/2`` and ``KL(P||Q) = sum_i P_i ln(P_i/Q_i)``
    (spec seed 002 Sec. 3.2; AdaTrace's ``Evaluation.java`` uses the natural log). ``p`` and ``q`` are
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
    """Spatial density error: JSD of the share of points in each value of ``column`` (spec 3.4, 6.3).

    Every value is a bin, including the grid's -1 ("outside the grid"), so points pushed off the grid count.
    """
    for frame, label in ((raw, "raw"), (release, "release")):
        require_columns(frame, (column,), f"density_jsd: {label} frame")
        _require_rows(frame, f"density_jsd: {label} frame")
    counts = pd.concat([raw[column].value_counts(), release[column].value_counts()], axis=1).fillna(0)
    return jsd(counts.iloc[:, 0].to_numpy(), counts.iloc[:, 1].to_numpy())


def length_jsd(raw: pd.DataFrame, release: pd.DataFrame, measure: Literal["points", "distance"] = "points",
               n_buckets: int = 20) -> float:
    """JSD of the trajectory-length histograms (spec 3.2 "length error", 6.3).

    ``measure="points"``: the number of points of each trajectory. ``measure="distance"``: the travelled
    distance in metres, the sum of the lengths of consecutive segments in ``seq`` order (AdaTrace's length).
    Buckets: see :func:`_bucket_jsd`.
    """
    if measure not in ("points", "distance"):
        raise ParameterError(f"measure must be 'points' or 'distance', got {measure!r}", "length_jsd")
    if measure == "points":
        values = [_frame(f, label, ("traj_id",)).groupby("traj_id").size().to_numpy()
                  for f, label in ((raw, "raw"), (release, "release"))]
        return _bucket_jsd(values[0], values[1], n_buckets)
    (raw_xy, raw_codes), (rel_xy, rel_codes) = _planar_trajectories(raw, release, ordered=True)
    return _bucket_jsd(_travelled(raw_xy, raw_codes), _travelled(rel_xy, rel_codes), n_buckets)


def diameter_error(raw: pd.DataFrame, release: pd.DataFrame, n_buckets: int = 20) -> float:
    """DE: JSD of the histograms of trajectory diameters (survey Sec. 4.2.1 [51]; spec 3.2).

    ``diameter = max pairwise distance between the trajectory's points`` in metres, computed on the convex
    hull. Buckets: see :func:`_bucket_jsd`.
    """
    (raw_xy, raw_codes), (rel_xy, rel_codes) = _planar_trajectories(raw, release, ordered=False)
    return _bucket_jsd(_diameters(raw_xy, raw_codes), _diameters(rel_xy, rel_codes), n_buckets)


def trip_error(raw: pd.DataFrame, release: pd.DataFrame, grid_size: int = 6) -> float:
    """TE: JSD of the distributions of trips (start cell, end cell) (survey Sec. 4.2.1 [51]; spec 3.2).

    Cells of a ``grid_size x grid_size`` uniform lon/lat grid over the raw data's bounding box (AdaTrace's
    default is 6 x 6); released points outside the box fall in the nearest border cell. Start and end are a
    trajectory's first and last points in ``seq`` order.
    """
    if not (isinstance(grid_size, int) and grid_size >= 1):
        raise ParameterError(f"grid_size must be a positive integer, got {grid_size!r}", "trip_error")
    columns = ("traj_id", "seq", "lon", "lat")
    raw_pts = _frame(raw, "raw", columns).sort_values(["traj_id", "seq"], kind="stable")
    rel_pts = _frame(release, "release", columns).sort_values(["traj_id", "seq"], kind="stable")
    lon0, lon1 = raw_pts["lon"].min(), raw_pts["lon"].max()
    lat0, lat1 = raw_pts["lat"].min(), raw_pts["lat"].max()

    def trips(points: pd.DataFrame) -> np.ndarray:
        col = _grid_index(points["lon"].to_numpy(), lon0, lon1, grid_size)
        row = _grid_index(points["lat"].to_numpy(), lat0, lat1, grid_size)
        cells = pd.Series(row * grid_size + col, index=points["traj_id"].to_numpy())
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
    """Chen et al.'s random query workload (arXiv:1112.2020 Sec. V; spec seed 004 G15).

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


def _require_rows(frame: pd.DataFrame, where: str) -> None:
    if frame.empty:
        raise InputError("the frame is empty", where)


def _frame(frame: pd.DataFrame, label: str, columns: tuple[str, ...]) -> pd.DataFrame:
    """The frame's ``columns``, checked, without points of unknown position."""
    require_columns(frame, columns, f"{label} frame")
    points = frame.loc[:, list(columns)]
    for c in ("lon", "lat", "x", "y"):
        if c in points.columns:
            points = points[np.isfinite(points[c].to_numpy(dtype=float))]
    _require_rows(points, f"{label} frame")
    return points


def _planar_trajectories(raw: pd.DataFrame, release: pd.DataFrame,
                         ordered: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per frame: points in metres (n x 2) and their trajectory code, grouped by ``traj_id`` (and ``seq``).

    Uses ``x``, ``y`` when both frames have them; otherwise an equirectangular projection about the raw data's
    mean latitude, the same for both frames (distance errors well under 1% within a city).
    """
    planar = all(c in f.columns for f in (raw, release) for c in ("x", "y"))
    coords = ("x", "y") if planar else ("lon", "lat")
    keys = ("traj_id", "seq") if ordered else ("traj_id",)
    frames = [_frame(f, label, (*keys, *coords)).sort_values(list(keys), kind="stable")
              for f, label in ((raw, "raw"), (release, "release"))]
    cos_lat0 = np.cos(np.radians(frames[0]["lat"].mean())) if not planar else 1.0
    out = []
    for f in frames:
        a, b = f[coords[0]].to_numpy(dtype=float), f[coords[1]].to_numpy(dtype=float)
        if not planar:
            a, b = EARTH_RADIUS_M * np.radians(a) * cos_lat0, EARTH_RADIUS_M * np.radians(b)
        out.append((np.column_stack([a, b]), pd.factorize(f["traj_id"])[0]))
    return out


def _travelled(xy: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Sum of consecutive segment lengths per trajectory (points sorted by trajectory, then ``seq``)."""
    steps = np.hypot(*np.diff(xy, axis=0).T)
    same = codes[1:] == codes[:-1]
    return np.bincount(codes[1:][same], weights=steps[same], minlength=codes.max() + 1)


def _diameters(xy: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Largest distance between two points of each trajectory (points grouped by trajectory).

    Small trajectories by brute force; larger ones on their convex hull, which holds both ends of a diameter
    (``QJ`` joggles degenerate input such as collinear points; the vertices are still input points).
    """
    bounds = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1], True])
    out = np.zeros(len(bounds) - 1)
    for i, (lo, hi) in enumerate(pairwise(bounds)):
        pts = xy[lo:hi]
        if len(pts) > _BRUTE_FORCE_DIAMETER:
            pts = np.unique(pts, axis=0)
        if len(pts) > _BRUTE_FORCE_DIAMETER:
            pts = pts[ConvexHull(pts, qhull_options="QJ").vertices]
        if len(pts) > 1:
            out[i] = pdist(pts).max()
    return out


def _bucket_jsd(raw_values: np.ndarray, release_values: np.ndarray, n_buckets: int) -> float:
    """JSD of histograms over ``n_buckets`` equal-width buckets of ``[0, max(raw_values)]``.

    The edges come from the raw data alone, so every release of the same raw data is measured on the same
    buckets; released values beyond the raw maximum fall in the last bucket. (AdaTrace measures its 20 buckets
    from 0 in the same way.)
    """
    if not (isinstance(n_buckets, int) and n_buckets >= 1):
        raise ParameterError(f"n_buckets must be a positive integer, got {n_buckets!r}", "utility histogram")
    top = raw_values.max()
    width = top / n_buckets if top > 0 else np.finfo(float).tiny  # all raw values 0: any positive one is "far"

    def histogram(values: np.ndarray) -> np.ndarray:
        buckets = np.minimum(np.floor(values / width), n_buckets - 1).astype(np.int64)
        return np.bincount(buckets, minlength=n_buckets)

    return jsd(histogram(raw_values), histogram(release_values))


def _grid_index(values: np.ndarray, low: float, high: float, n: int) -> np.ndarray:
    span = (high - low) or np.finfo(float).tiny
    return np.clip(np.floor((values - low) / span * n), 0, n - 1).astype(np.int64)


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
