"""Utility metrics for the steward's report: how much a release D* preserves of the raw data D.

Formulas from the survey (Jin et al., TKDE 2023, Sec. 4.2) and docs/design.md, "The attacks": the DE and TE
(Jin et al., TKDE 2023, Sec. 4.2.1, from AdaTrace, Gursoy et al. CCS'18, whose ``Evaluation.java`` fixes the
details), the density and length distributions, and the count-query relative error of Chen, Fung, Desai,
"Differentially Private Trajectory Data Publication" (arXiv:1112.2020, Def. 3.7 and Sec. V).
Also the survey's INF (:func:`information_loss`) and FFP (:func:`frequent_patterns`, with AdaTrace's support
error), and, for truthful mechanisms, point errors, which the survey does not use (:func:`point_errors`: aligned points,
Hausdorff, DTW).

Every metric is an error: 0 means D* preserves the property exactly, larger is worse; the one exception is FFP,
an F-measure (1 is best), which :func:`frequent_patterns` returns beside the support error. Distribution metrics are
Jensen-Shannon divergences with the natural logarithm, so they lie in [0, ln 2]. Trajectory metrics take frames
in the trajectory convention of :mod:`trajpub.frame` and treat each ``traj_id`` as one trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, pairwise
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import sparse
from scipy.spatial import ConvexHull, cKDTree
from scipy.spatial.distance import pdist
from scipy.special import rel_entr

from audits.circles import circle_counts
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
MOVED_RADIUS_M = 1000.0
""":func:`moved_share` counts released points farther than this from their own raw trajectory."""

EARTH_RADIUS_M = 6_371_008.8
_BRUTE_FORCE_DIAMETER = 64
_DIAMETER_PAIRS_PER_BATCH = 4_000_000  # point pairs per batch of the brute force (~100 MB)
_DIAMETER_POINTS_PER_BLOCK = 1_000_000  # points per block of the long trajectories' hulls (~50 MB)
_NEIGHBOUR_QUERY_BLOCK = 1_000_000  # points per block of :func:`_has_neighbour`'s k-d tree queries (~50 MB)


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
        _require_rows(frame, f"density_jsd: {label} frame")
    counts = pd.concat([raw[column].value_counts(), release[column].value_counts()], axis=1).fillna(0)
    return jsd(counts.iloc[:, 0].to_numpy(), counts.iloc[:, 1].to_numpy())


def length_jsd(raw: pd.DataFrame, release: pd.DataFrame, measure: Literal["points", "distance"] = "points",
               n_buckets: int = 20) -> float:
    """JSD of the trajectory-length histograms (AdaTrace's length error, Gursoy et al. CCS'18).

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
    """DE: JSD of the histograms of trajectory diameters (survey Sec. 4.2.1 [51]).

    ``diameter = max pairwise distance between the trajectory's points`` in metres, computed on the convex
    hull. Buckets: see :func:`_bucket_jsd`.
    """
    (raw_xy, raw_codes), (rel_xy, rel_codes) = _planar_trajectories(raw, release, ordered=False)
    return _bucket_jsd(_diameters(raw_xy, raw_codes), _diameters(rel_xy, rel_codes), n_buckets)


def trip_error(raw: pd.DataFrame, release: pd.DataFrame, grid_size: int = 6) -> float:
    """TE: JSD of the distributions of trips (start cell, end cell) (survey Sec. 4.2.1 [51]).

    Cells of a ``grid_size x grid_size`` uniform lon/lat grid over the raw data's bounding box (AdaTrace's
    default is 6 x 6); released points outside the box fall in the nearest border cell. Start and end are a
    trajectory's first and last points in ``seq`` order.
    """
    if not (isinstance(grid_size, int) and grid_size >= 1):
        raise ParameterError(f"grid_size must be a positive integer, got {grid_size!r}", "trip_error")
    raw_pts, rel_pts, box = _ordered_points(raw, release)

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


def _ordered_points(raw: pd.DataFrame, release: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, tuple]:
    """Both frames' points in ``traj_id, seq`` order, and the raw bounding box (lon0, lon1, lat0, lat1) that
    TE and FFP grid over."""
    columns = ("traj_id", "seq", "lon", "lat")
    raw_pts = _in_order(_frame(raw, "raw", columns), ["traj_id", "seq"])
    rel_pts = _in_order(_frame(release, "release", columns), ["traj_id", "seq"])
    return raw_pts, rel_pts, (raw_pts["lon"].min(), raw_pts["lon"].max(), raw_pts["lat"].min(),
                              raw_pts["lat"].max())


def _require_rows(frame: pd.DataFrame, where: str) -> None:
    if frame.empty:
        raise InputError("the frame is empty", where)


def _frame(frame: pd.DataFrame, label: str, columns: tuple[str, ...]) -> pd.DataFrame:
    """The frame's ``columns``, checked, without points of unknown position."""
    require_columns(frame, columns, f"{label} frame")
    points = frame.loc[:, list(columns)]
    for c in ("lon", "lat", "x", "y"):
        if c in points.columns:
            finite = np.isfinite(points[c].to_numpy(dtype=float))
            if not finite.all():  # a city's frame is copied only when it has points to drop
                points = points[finite]
    _require_rows(points, f"{label} frame")
    return points


def _in_order(points: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``points`` stably sorted by ``keys`` (one or two columns), returned as they are when already in that order
    (the prepared frames are: no copy of a city's points)."""
    first = points[keys[0]].to_numpy()
    ahead, tied = first[1:] > first[:-1], first[1:] == first[:-1]
    if len(keys) == 2:
        second = points[keys[1]].to_numpy()
        tied &= second[1:] >= second[:-1]
    return points if (ahead | tied).all() else points.sort_values(keys, kind="stable")


def _planar_trajectories(raw: pd.DataFrame, release: pd.DataFrame,
                         ordered: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per frame: points in metres (n x 2) and their trajectory code, grouped by ``traj_id`` (and ``seq``).

    Uses ``x``, ``y`` when both frames have them; otherwise an equirectangular projection about the raw data's
    mean latitude, the same for both frames (distance errors well under 1% within a city).
    """
    planar = all(c in f.columns for f in (raw, release) for c in ("x", "y"))
    coords = ("x", "y") if planar else ("lon", "lat")
    keys = ("traj_id", "seq") if ordered else ("traj_id",)
    frames = [_in_order(_frame(f, label, (*keys, *coords)), list(keys))
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


def _bucket_jsd(raw_values: np.ndarray, release_values: np.ndarray, n_buckets: int, quantile: float = 1.0) -> float:
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


def raw_box_cells(points: pd.DataFrame, box: tuple[float, float, float, float], grid_size: int) -> np.ndarray:
    """Cell ``row * grid_size + col`` of each point on the ``grid_size x grid_size`` uniform lon/lat grid over
    ``box = (lon0, lon1, lat0, lat1)`` (the raw data's bounding box, :func:`_ordered_points`); points outside it
    fall in the nearest border cell. A uniform lon/lat grid is a uniform grid in the local equirectangular
    projection, which is linear in lon and lat."""
    lon0, lon1, lat0, lat1 = box
    col = _grid_index(points["lon"].to_numpy(dtype=float), lon0, lon1, grid_size)
    row = _grid_index(points["lat"].to_numpy(dtype=float), lat0, lat1, grid_size)
    return row * grid_size + col


def _collapsed_cells(points: pd.DataFrame, box: tuple, grid_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Each trajectory's cells on the raw-box grid with consecutive repeats collapsed, as CSR ``(cells, offsets)``
    (points in ``traj_id, seq`` order)."""
    cells, traj = raw_box_cells(points, box, grid_size), points["traj_id"].to_numpy()
    keep = np.r_[True, (traj[1:] != traj[:-1]) | (cells[1:] != cells[:-1])] if len(cells) else np.zeros(0, bool)
    cells, traj = cells[keep], traj[keep]
    starts = np.flatnonzero(np.r_[True, traj[1:] != traj[:-1]]) if len(cells) else np.zeros(0, np.int64)
    return cells, np.r_[starts, len(cells)].astype(np.int64)


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


# --- survey metrics for truthful and pattern utility (Jin et al., TKDE 2023, Sec. 4.2) -----------------------

POINT_ERROR_MEASURES = ("aligned", "hausdorff", "dtw")


def planar_coordinates(raw: pd.DataFrame, release: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Both frames' points in metres on one plane: ``(n, 2)`` arrays, NaN where a position is unknown.

    The convention of :func:`length_jsd`: ``x``, ``y`` when both frames have them (the grid's local projection);
    otherwise an equirectangular projection of ``lon``, ``lat`` about the raw data's mean latitude, the same for
    both frames (distance errors well under 1% within a city).
    """
    if all(c in f.columns for f in (raw, release) for c in ("x", "y")):
        return tuple(f[["x", "y"]].to_numpy(dtype=float) for f in (raw, release))  # type: ignore[return-value]
    for frame, label in ((raw, "raw"), (release, "release")):
        require_columns(frame, ("lon", "lat"), f"{label} frame (no x, y columns)")
    lat = raw["lat"].to_numpy(dtype=float)
    lat = lat[np.isfinite(lat)]
    if len(lat) == 0:
        raise InputError("the raw frame has no finite latitude", "raw frame")
    cos_lat0 = np.cos(np.radians(lat.mean()))
    out = []
    for f in (raw, release):
        lon_r, lat_r = np.radians(f["lon"].to_numpy(dtype=float)), np.radians(f["lat"].to_numpy(dtype=float))
        out.append(np.column_stack([EARTH_RADIUS_M * lon_r * cos_lat0, EARTH_RADIUS_M * lat_r]))
    return out[0], out[1]


def pattern_codes(cells: np.ndarray, offsets: np.ndarray, lengths: Sequence[int]) -> dict[int, tuple[np.ndarray,
                                                                                                  np.ndarray]]:
    """Every contiguous window of each length in ``lengths`` of CSR sequences, as one exact integer per window.

    ``cells`` are the concatenated sequences, ``offsets`` their CSR bounds. Returns ``{length: (sequence index of
    each window, code of each window)}``; within one call two windows of the same length have the same code if
    and only if they hold the same cells in the same order (codes of different lengths are unrelated). Built by
    repeated factorisation, ``code_l(i) = id(code_{l-1}(i), cell(i + l - 1))``, so it is exact (no hashing) and
    linear in the number of windows.
    """
    cells = np.asarray(cells, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    wanted = sorted({int(length) for length in lengths})
    if not wanted or wanted[0] < 1:
        raise ParameterError(f"lengths must be positive integers, got {list(lengths)}", "pattern_codes")
    seq_of = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    remaining = offsets[1:][seq_of] - np.arange(len(cells))  # cells from each position to its sequence's end
    base, uniques = pd.factorize(cells)
    n_base = max(len(uniques), 1)
    code = base.astype(np.int64)
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for length in range(1, wanted[-1] + 1):
        if length > 1:
            starts = np.flatnonzero(remaining >= length)
            keys = code[starts] * n_base + base[starts + length - 1]
            code = np.full(len(cells), -1, dtype=np.int64)
            code[starts] = pd.factorize(keys)[0]
        if length in wanted:
            starts = np.flatnonzero(remaining >= length)
            out[length] = (seq_of[starts], code[starts])
    return out


def information_loss(raw: pd.DataFrame, release: pd.DataFrame, tolerance_m: float = 0.0,
                     tolerance_s: float | None = 0.0, match: Literal["owner", "any"] = "owner") -> float:
    """INF, the share of raw points a release does not preserve (survey Sec. 4.2.1, [114]).

    ``INF = 1 - (1/|D|) sum_{tau in D} |tau ∩ tau*| / |tau|`` over the raw trajectories ``tau`` (``traj_id``).
    Our convention for ``|tau ∩ tau*|`` (the survey leaves it open): a raw point is preserved when a released
    point lies within ``tolerance_m`` metres and, unless ``tolerance_s`` is None, within ``tolerance_s`` seconds
    (a released point without a timestamp then never matches). With both tolerances 0 a point must be released
    unchanged. ``match="owner"``: only the released points of the same ``object_id`` count (tau* is the
    anonymised trajectory of the same user, a truthful release). The survey's INF is undefined for synthetic
    data; ``match="any"`` is our explicit convention for it: any released point counts, so INF is the share of
    raw points no released point reproduces. A raw object absent from the release loses all its points.
    """
    if match not in ("owner", "any"):
        raise ParameterError(f"match must be 'owner' or 'any', got {match!r}", "information_loss")
    if not (np.isfinite(tolerance_m) and tolerance_m >= 0):
        raise ParameterError(f"tolerance_m must be a finite number >= 0, got {tolerance_m}", "information_loss")
    if tolerance_s is not None and not (np.isfinite(tolerance_s) and tolerance_s >= 0):
        raise ParameterError(f"tolerance_s must be None or a number >= 0, got {tolerance_s}", "information_loss")
    timed = tolerance_s is not None
    columns = ("object_id", "traj_id", "lon", "lat", *(("t",) if timed else ()))
    require_columns(raw, columns, "information_loss: raw frame")
    require_columns(release, ("lon", "lat", *(("object_id",) if match == "owner" else ()), *(("t",) if timed else ())),
                    "information_loss: release frame")
    _require_rows(raw, "information_loss: raw frame")
    raw_xy, rel_xy = planar_coordinates(raw, release)
    if match == "owner":
        owners = pd.factorize(pd.concat([raw["object_id"].astype(str), release["object_id"].astype(str)],
                                        ignore_index=True))[0]
        raw_owner, rel_owner = owners[:len(raw)], owners[len(raw):]
    else:
        raw_owner, rel_owner = np.zeros(len(raw), np.int64), np.zeros(len(release), np.int64)
    raw_t = epoch_seconds(raw["t"]) if timed else np.zeros(len(raw))
    rel_t = epoch_seconds(release["t"]) if timed else np.zeros(len(release))
    rel_ok = np.isfinite(rel_xy).all(axis=1) & np.isfinite(rel_t)
    raw_ok = np.isfinite(raw_xy).all(axis=1) & np.isfinite(raw_t)
    preserved = np.zeros(len(raw), dtype=bool)
    if rel_ok.any() and raw_ok.any():
        raw_ok, rel_ok = (ok if not ok.all() else slice(None) for ok in (raw_ok, rel_ok))  # views, not copies
        preserved[raw_ok] = _has_neighbour(raw_xy[raw_ok], raw_t[raw_ok], raw_owner[raw_ok], rel_xy[rel_ok],
                                           rel_t[rel_ok], rel_owner[rel_ok], tolerance_m,
                                           tolerance_s if timed else None)
    kept = pd.Series(preserved).groupby(raw["traj_id"].to_numpy()).mean()
    return float(1.0 - kept.mean())


def frequent_patterns(raw: pd.DataFrame, release: pd.DataFrame, grid_size: int = 6, min_length: int = 2,
                      max_length: int = 8, top_k: int = 100) -> dict[str, float]:
    """FFP, the F-measure of the top-k frequent patterns, and the patterns' support error (survey Sec. 4.2.2).

    AdaTrace's ``Evaluation.patternMiningF1Error`` and ``patternMiningSupport`` (Gursoy et al., CCS'18), the
    survey's FFP [119]: each trajectory (``traj_id`` in ``seq`` order) becomes its sequence of cells of a
    ``grid_size x grid_size`` uniform lon/lat grid over the raw bounding box (released points outside it fall in
    the nearest border cell, as in :func:`trip_error`), with consecutive repeats collapsed; a pattern is a
    contiguous sub-sequence of ``min_length..max_length`` cells; its support is its number of occurrences.
    ``FP(k, D)`` = the k patterns of largest support (ties at the k-th broken by shorter length, then by first
    occurrence in traj_id/seq order: AdaTrace's order is a hash map's). Returns

    - ``"ffp"``: ``F1 = 2PR/(P+R)`` with ``P = |FP(k,D) ∩ FP(k,D*)| / |FP(k,D*)|`` and ``R = ... / |FP(k,D)|``
      (0 when no pattern is shared). Higher is better, in [0, 1]; the survey's Table 4 reports it.
    - ``"support_error"``: ``(1/k) sum_{P in FP(k,D)} |s(D,P) - s(D*,P)| / s(D,P)`` (the absolute value is
      AdaTrace's; the survey prints the formula without it). Lower is better.

    AdaTrace also interpolates cells between non-adjacent grid cells before mining; we do not (a documented
    deviation: on a 6 x 6 grid consecutive samples are almost always in the same or an adjacent cell).
    """
    for name, value, low in (("grid_size", grid_size, 1), ("min_length", min_length, 1),
                             ("max_length", max_length, min_length), ("top_k", top_k, 1)):
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= low):
            raise ParameterError(f"{name} must be an integer >= {low}, got {value!r}", "frequent_patterns")
    raw_pts, rel_pts, box = _ordered_points(raw, release)
    corpora = [_collapsed_cells(points, box, grid_size) for points in (raw_pts, rel_pts)]
    n_raw_seqs = len(corpora[0][1]) - 1
    cells = np.concatenate([corpora[0][0], corpora[1][0]])
    offsets = np.concatenate([corpora[0][1], corpora[1][1][1:] + len(corpora[0][0])])
    parts = []
    for length, (seq, code) in pattern_codes(cells, offsets, range(min_length, max_length + 1)).items():
        parts.append(pd.DataFrame({"length": length, "code": code, "raw": seq < n_raw_seqs,
                                   "order": np.arange(len(code))}))
    windows = pd.concat(parts, ignore_index=True)
    support = windows.groupby(["length", "code"], sort=False).agg(
        raw=("raw", "sum"), total=("raw", "size"), first=("order", "min"))
    support["release"] = support["total"] - support["raw"]

    def top(column: str) -> pd.Index:
        ranked = support[support[column] > 0].reset_index()
        ranked = ranked.sort_values([column, "length", "first"], ascending=[False, True, True], kind="stable")
        return pd.MultiIndex.from_frame(ranked[["length", "code"]].head(top_k))

    top_raw, top_rel = top("raw"), top("release")
    shared = len(top_raw.intersection(top_rel))
    ffp = 0.0 if shared == 0 else 2 * shared / (len(top_raw) + len(top_rel))
    freq = support.loc[top_raw]
    support_error = float((np.abs(freq["raw"] - freq["release"]) / freq["raw"]).mean()) if len(freq) else 0.0
    return {"ffp": float(ffp), "support_error": support_error}


def point_errors(raw: pd.DataFrame, release: pd.DataFrame,
                 measure: Literal["aligned", "hausdorff", "dtw"] = "hausdorff", max_records: int | None = None,
                 rng: np.random.Generator | None = None) -> pd.Series:
    """Distance in metres between each released record and its own raw trajectory (truthful mechanisms; ours).

    A released record (``traj_id``) is paired with the raw trajectory of the same ``traj_id`` and the same
    ``object_id``; records without such a raw trajectory (dummies, re-segmented output) are left out. Measures:

    - ``"aligned"``: point-to-point error, the mean distance between the points of equal ``seq``;
    - ``"hausdorff"``: ``H(A,B) = max(max_a min_b d(a,b), max_b min_a d(a,b))`` (nearest neighbours by k-d
      tree, O((n + m) log(n + m)) per pair);
    - ``"dtw"``: dynamic time warping, ``DTW(i,j) = d(a_i,b_j) + min(DTW(i-1,j), DTW(i,j-1), DTW(i-1,j-1))``
      with ``DTW(0,0) = 0`` and infinity on the other borders, the sum of distances along the best warping path
      (AdaTrace's ``Evaluation.calculateDTW``); cost O(n m) per pair (about 0.07 s for 1,500 x 1,700 points),
      so for many long records pass ``max_records`` (sampled pairs).

    ``max_records``: evaluate at most this many paired records, drawn with ``rng`` (required then). Returns a
    Series indexed by the released ``traj_id``.
    """
    if max_records is not None and (not isinstance(max_records, int) or max_records < 1 or rng is None):
        raise ParameterError("max_records must be a positive integer, given with an rng", "point_errors")
    if measure not in POINT_ERROR_MEASURES:
        raise ParameterError(f"measure must be one of {', '.join(POINT_ERROR_MEASURES)}, got {measure!r}",
                             "point_errors")
    for frame, label in ((raw, "raw"), (release, "release")):
        require_columns(frame, ("object_id", "traj_id", "seq"), f"point_errors: {label} frame")
        _require_rows(frame, f"point_errors: {label} frame")
    raw_xy, rel_xy = planar_coordinates(raw, release)
    parts = []
    for side, (frame, xy) in enumerate(((raw, raw_xy), (release, rel_xy))):
        part = pd.DataFrame({"side": side, "object_id": frame["object_id"].astype(str).to_numpy(),
                             "traj_id": frame["traj_id"].to_numpy(), "seq": frame["seq"].to_numpy(),
                             "x": xy[:, 0], "y": xy[:, 1]})
        parts.append(part[np.isfinite(xy).all(axis=1)])
    both = pd.concat(parts, ignore_index=True)
    traj_codes, trajs = pd.factorize(both["traj_id"])
    obj_codes = pd.factorize(both["object_id"])[0]
    both["key"] = traj_codes.astype(np.int64) * (int(obj_codes.max()) + 1) + obj_codes
    both = both.sort_values(["side", "key", "seq"], kind="stable", ignore_index=True)
    if measure == "aligned":
        pairs = both[both["side"] == 0].merge(both[both["side"] == 1], on=["key", "seq"], suffixes=("_r", "_d"))
        dist = pd.Series(np.hypot(pairs["x_r"] - pairs["x_d"], pairs["y_r"] - pairs["y_d"]).to_numpy())
        per_key = dist.groupby(pairs["key"].to_numpy()).mean()
        if max_records is not None and len(per_key) > max_records:
            per_key = per_key.iloc[np.sort(rng.choice(len(per_key), max_records, replace=False))]  # type: ignore
        errors = dict(zip(np.asarray(trajs)[per_key.index.to_numpy() // (int(obj_codes.max()) + 1)],
                          per_key.to_numpy(dtype=float), strict=True))
    else:
        side, key = both["side"].to_numpy(), both["key"].to_numpy()
        xy = both[["x", "y"]].to_numpy()
        n_raw = int(np.searchsorted(side, 1))
        shared = np.intersect1d(key[:n_raw], key[n_raw:])
        if max_records is not None and len(shared) > max_records:
            shared = np.sort(rng.choice(shared, max_records, replace=False))  # type: ignore[union-attr]
        r_lo, r_hi = np.searchsorted(key[:n_raw], shared), np.searchsorted(key[:n_raw], shared, side="right")
        d_lo = n_raw + np.searchsorted(key[n_raw:], shared)
        d_hi = n_raw + np.searchsorted(key[n_raw:], shared, side="right")
        errors = {}
        for k, a0, a1, b0, b1 in zip(shared, r_lo, r_hi, d_lo, d_hi, strict=True):
            a, b = xy[a0:a1], xy[b0:b1]
            value = (max(cKDTree(b).query(a)[0].max(), cKDTree(a).query(b)[0].max()) if measure == "hausdorff"
                     else dtw_distance(a, b))
            errors[np.asarray(trajs)[k // (int(obj_codes.max()) + 1)]] = float(value)
    if not errors:
        raise InputError("no released record shares traj_id and object_id with a raw trajectory: point errors "
                         "need a truthful release that keeps its records' ids", "point_errors")
    out = pd.Series(errors, name=f"point_error_{measure}_m").rename_axis("traj_id")
    return out.sort_index()


def point_error(raw: pd.DataFrame, release: pd.DataFrame,
                measure: Literal["aligned", "hausdorff", "dtw"] = "hausdorff", max_records: int | None = None,
                rng: np.random.Generator | None = None) -> float:
    """The mean of :func:`point_errors` over the paired records, in metres (lower is better)."""
    return float(point_errors(raw, release, measure, max_records, rng).mean())


def dtw_distance(a: np.ndarray, b: np.ndarray) -> float:
    """DTW of two point sequences (``(n, 2)`` and ``(m, 2)``, metres) with Euclidean point distances.

    The recurrence of :func:`point_errors`, evaluated one anti-diagonal ``i + j = d`` at a time: every cell of a
    diagonal depends only on the two previous diagonals, so each diagonal is one vectorised step. Diagonals are
    stored indexed by ``i``, so the three predecessors are contiguous slices (no fancy indexing).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        raise InputError("DTW needs two non-empty sequences", "dtw_distance")
    b_rev = b[::-1]  # b[j - 1] for j = d - i, i ascending, is a contiguous slice of the reversed b
    prev2 = np.full(n + 1, np.inf)  # diagonal d - 2, indexed by i
    prev = np.full(n + 1, np.inf)  # diagonal d - 1
    prev2[0] = 0.0  # DTW(0, 0), on diagonal 0
    for d in range(2, n + m + 1):
        lo, hi = max(1, d - m), min(n, d - 1)
        # b[j - 1] with j = d - i runs from b[d - lo - 1] down to b[d - hi - 1]: b_rev[m - d + lo : m - d + hi + 1]
        bj = b_rev[m - d + lo:m - d + hi + 1]
        cost = np.hypot(a[lo - 1:hi, 0] - bj[:, 0], a[lo - 1:hi, 1] - bj[:, 1])
        best = np.minimum(np.minimum(prev[lo - 1:hi], prev[lo:hi + 1]), prev2[lo - 1:hi])
        current = np.full(n + 1, np.inf)
        current[lo:hi + 1] = cost + best
        prev2, prev = prev, current
    return float(prev[n])


def epoch_seconds(t: pd.Series) -> np.ndarray:
    """Timestamps as float seconds since the epoch (any datetime resolution); NaN for NaT."""
    values = pd.to_datetime(t, utc=True, errors="coerce").dt.tz_convert(None).to_numpy()
    return (values - np.datetime64(0, "s")) / np.timedelta64(1, "s")


def _has_neighbour(xy: np.ndarray, t: np.ndarray, owner: np.ndarray, other_xy: np.ndarray, other_t: np.ndarray,
                   other_owner: np.ndarray, radius_m: float, radius_s: float | None) -> np.ndarray:
    """For each point: is there a point of ``other`` with the same owner within ``radius_m`` (and ``radius_s``)?

    Exact matches (both radii 0) are found by a join; otherwise by a k-d tree over (x, y, scaled t, owner) with the
    Chebyshev metric (a box), refined by the Euclidean distance in the plane. Owners are kept apart by an offset
    larger than any distance in the data.
    """
    timed = radius_s is not None
    if radius_m == 0 and (not timed or radius_s == 0):
        keys = ["x", "y", "owner", *(["t"] if timed else [])]
        left = pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1], "owner": owner, "t": t}, columns=["x", "y", "owner", "t"])
        right = pd.DataFrame({"x": other_xy[:, 0], "y": other_xy[:, 1], "owner": other_owner, "t": other_t},
                             columns=["x", "y", "owner", "t"])[keys].drop_duplicates()
        right["hit"] = True
        return left[keys].merge(right, on=keys, how="left")["hit"].fillna(False).to_numpy(dtype=bool)
    box = max(radius_m, 1e-6)  # a zero radius (equal positions, or equal times) as a micrometre / microsecond
    scale = box / max(radius_s, 1e-6) if timed else 0.0  # seconds -> metres, so the box is radius_s wide in time
    sides = [side for side in ((xy, t), (other_xy, other_t)) if len(side[0])]  # no copy of a city's points
    t0 = min(float(tt.min()) for _, tt in sides) if timed else 0.0
    t1 = max(float(tt.max()) for _, tt in sides)
    reach = max(max(-float(p.min()), float(p.max())) for p, _ in sides)
    offset = 4 * (reach + box) + 4 * scale * (t1 - t0) + 1.0

    def embed(p: np.ndarray, tt: np.ndarray, o: np.ndarray) -> np.ndarray:
        return np.column_stack([p, (tt - t0) * scale, o * offset])

    tree = cKDTree(embed(other_xy, other_t, other_owner))
    bound = box * (1 + 1e-9)

    def near(query: np.ndarray, candidate: np.ndarray) -> np.ndarray:
        ok = np.hypot(other_xy[candidate, 0] - xy[query, 0], other_xy[candidate, 1] - xy[query, 1]) <= radius_m
        if timed:
            ok &= np.abs(other_t[candidate] - t[query]) <= radius_s
        return ok

    # The nearest point in the box decides almost every point with constant memory; only points whose nearest
    # box neighbour is outside the disc (a box corner) have their whole box listed, so the answer stays exact.
    # The points are queried in blocks, so that the embedded queries of a city (10^7 points) are never all held.
    found = np.zeros(len(xy), dtype=bool)
    for first in range(0, len(xy), _NEIGHBOUR_QUERY_BLOCK):
        block = np.arange(first, min(first + _NEIGHBOUR_QUERY_BLOCK, len(xy)))
        queries = embed(xy[block], t[block], owner[block])
        dist, nearest = tree.query(queries, k=1, p=np.inf, distance_upper_bound=bound)
        in_box = np.flatnonzero(np.isfinite(dist))
        found[block[in_box]] = near(block[in_box], nearest[in_box])
        undecided = in_box[~found[block[in_box]]]
        if len(undecided):
            query, candidate = flatten_hits(tree.query_ball_point(queries[undecided], r=bound, p=np.inf,
                                                                  return_sorted=False))
            hit = near(block[undecided[query]], candidate)
            found[block[undecided]] = np.bincount(query[hit], minlength=len(undecided)) > 0
    return found


def flatten_hits(hits: np.ndarray | list) -> tuple[np.ndarray, np.ndarray]:
    """The lists of ``cKDTree.query_ball_point`` as two aligned arrays: query index, hit index."""
    counts = np.fromiter((len(h) for h in hits), dtype=np.int64, count=len(hits))
    flat = np.fromiter(chain.from_iterable(hits), dtype=np.int64, count=int(counts.sum()))
    return np.repeat(np.arange(len(hits)), counts), flat


# --- the synthetic-trajectory metrics (the PrivTrace / LDPTrace comparison) ------------------------------

TRAJECTORY_GRID_SIZE = 32
"""The comparison's grid: 32 x 32 uniform cells over the raw data's bounding box."""

TRAJECTORY_METRICS = ("density", "query", "trip", "length", "pattern_f1", "transition", "outside_bbox_share",
                      "start_hour_jsd", "duration_jsd")
"""The keys of :func:`trajectory_metrics` (pattern_f1: higher is better; every other: lower is better)."""


CITY_CELL_M = 1500.0
"""The cell side of city-resolution figures: a planner's question (a district, a few blocks), not 6 km."""


def city_grid_size(raw: pd.DataFrame, cell_m: float = CITY_CELL_M, limit: int = 256) -> int:
    """The number of cells per side of a grid over the raw data's bounding box (as :func:`raw_box_cells`)
    whose cells are about ``cell_m`` on the longer side (at least 6, at most ``limit``): 128 for T-Drive's
    Beijing box at 1.5 km."""
    points = _frame(raw, "raw", ("lon", "lat"))
    lon, lat = points["lon"].to_numpy(dtype=float), points["lat"].to_numpy(dtype=float)
    k = EARTH_RADIUS_M * np.pi / 180
    side = max((lon.max() - lon.min()) * k * np.cos(np.radians(lat.mean())), (lat.max() - lat.min()) * k)
    return int(np.clip(round(side / cell_m), 6, limit))


def transition_jsd(raw: pd.DataFrame, release: pd.DataFrame, grid_size: int = TRAJECTORY_GRID_SIZE) -> float:
    """JSD of the first-order cell transitions ``(cell_i, cell_{i+1})`` of all trajectories.

    Cells of the raw-box grid (:func:`raw_box_cells`), consecutive repeats collapsed as for the patterns of
    :func:`frequent_patterns`, so a transition is a move to another cell (a vehicle waiting in a cell makes none).
    """
    raw_pts, rel_pts, box = _ordered_points(raw, release)
    pairs = []
    for points in (raw_pts, rel_pts):
        cells, offsets = _collapsed_cells(points, box, grid_size)
        inner = np.ones(len(cells), dtype=bool)
        inner[offsets[1:] - 1] = False  # a trajectory's last cell has no successor
        idx = np.flatnonzero(inner)
        pairs.append(cells[idx] * grid_size**2 + cells[idx + 1])
    if len(pairs[0]) == 0:
        raise InputError("the raw trajectories never change cell", "transition_jsd")
    if len(pairs[1]) == 0:
        return float(np.log(2))  # no released transition: disjoint from the raw distribution
    codes, uniques = pd.factorize(np.concatenate(pairs))
    return jsd(np.bincount(codes[:len(pairs[0])], minlength=len(uniques)),
               np.bincount(codes[len(pairs[0]):], minlength=len(uniques)))


def circle_query_re(raw: pd.DataFrame, release: pd.DataFrame, rng: np.random.Generator, n_queries: int = 200,
                    radius_m: tuple[float, float] = (500.0, 3000.0), sanity: float = 0.01) -> float:
    """Mean relative error of range-count queries over circles (PrivTrace's query error).

    Each query is a circle centred on a raw point drawn uniformly with ``rng``, of radius ``U(radius_m)``; its
    answer is the number of trajectories with a point or a segment (consecutive points in ``seq`` order) within
    the circle. ``RE = |Q(D*) - Q(D)| / max(Q(D), sanity * |D|)`` with |D| the number of raw trajectories; the
    synthetic counts are not rescaled. Planar coordinates as :func:`planar_coordinates`.
    """
    if n_queries < 1 or not sanity > 0 or not 0 < radius_m[0] <= radius_m[1]:
        raise ParameterError("n_queries must be >= 1, sanity > 0 and 0 < radius_m[0] <= radius_m[1]",
                             "circle_query_re")
    (raw_xy, raw_codes), (rel_xy, rel_codes) = _planar_trajectories(raw, release, ordered=True)
    centres = raw_xy[rng.integers(0, len(raw_xy), n_queries)]
    radii = rng.uniform(radius_m[0], radius_m[1], n_queries)
    n_raw = int(raw_codes.max()) + 1
    q_raw = circle_counts(raw_xy, raw_codes, centres, radii)
    q_rel = circle_counts(rel_xy, rel_codes, centres, radii)
    return float(np.mean(np.abs(q_rel - q_raw) / np.maximum(q_raw, sanity * n_raw)))


def outside_bbox_share(release: pd.DataFrame, bbox: tuple[float, float, float, float]) -> float:
    """Share of released points (with a position) outside the public ``bbox = (min_lon, min_lat, max_lon,
    max_lat)`` (a release whose points leave the release area is useless however its JSDs look)."""
    points = _frame(release, "release", ("lon", "lat"))
    inside = points["lon"].between(bbox[0], bbox[2]) & points["lat"].between(bbox[1], bbox[3])
    return float(1.0 - inside.mean())


def start_hour_jsd(raw: pd.DataFrame, release: pd.DataFrame) -> float:
    """JSD of the trajectories' start hour of day (24 bins, UTC): the hour of each ``traj_id``'s earliest t."""
    hours = []
    for frame, label in ((raw, "raw"), (release, "release")):
        start = _timed(frame, label).groupby("traj_id")["t"].min()
        hours.append(np.bincount(start.dt.hour.to_numpy(), minlength=24))
    return jsd(hours[0], hours[1])


def duration_jsd(raw: pd.DataFrame, release: pd.DataFrame, n_buckets: int = 20, quantile: float = 1.0) -> float:
    """JSD of trajectory durations (last t - first t, seconds), ``n_buckets`` over [0, the raw ``quantile``]
    (1: the raw maximum, as lengths; :func:`_bucket_jsd`)."""
    durations = []
    for frame, label in ((raw, "raw"), (release, "release")):
        span = _timed(frame, label).groupby("traj_id")["t"].agg(["min", "max"])
        durations.append((span["max"] - span["min"]).dt.total_seconds().to_numpy())
    return _bucket_jsd(durations[0], durations[1], n_buckets, quantile)


def segment_speeds(raw: pd.DataFrame, release: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per frame, the speed (km/h) of every segment between consecutive points of a trajectory (``seq`` order)
    with a positive time step; distances in the equirectangular projection about the raw mean latitude (as
    :func:`_planar_trajectories`)."""
    out = []
    frames = [_in_order(_frame(f, label, ("traj_id", "seq", "t", "lon", "lat")), ["traj_id", "seq"])
              for f, label in ((raw, "raw"), (release, "release"))]
    cos_lat0 = np.cos(np.radians(frames[0]["lat"].mean()))
    for f in frames:
        x = EARTH_RADIUS_M * np.radians(f["lon"].to_numpy(dtype=float)) * cos_lat0
        y = EARTH_RADIUS_M * np.radians(f["lat"].to_numpy(dtype=float))
        t, traj = epoch_seconds(f["t"]), f["traj_id"].to_numpy()
        dt = np.diff(t)
        ok = (traj[1:] == traj[:-1]) & (dt > 0)
        out.append(np.hypot(np.diff(x), np.diff(y))[ok] / dt[ok] * 3.6)
    return out[0], out[1]


def speed_jsd(raw: pd.DataFrame, release: pd.DataFrame, n_buckets: int = 20, quantile: float = 0.99) -> float:
    """JSD of segment speeds (:func:`segment_speeds`), ``n_buckets`` over [0, the raw ``quantile``]; the raw
    data's GPS glitches (T-Drive's p99.9 is ~800 km/h) would otherwise stretch the buckets."""
    raw_speeds, rel_speeds = segment_speeds(raw, release)
    if len(raw_speeds) == 0:
        raise InputError("the raw trajectories have no segment with a positive time step", "speed_jsd")
    if len(rel_speeds) == 0:
        return float(np.log(2))
    return _bucket_jsd(raw_speeds, rel_speeds, n_buckets, quantile)


def _timed(frame: pd.DataFrame, label: str) -> pd.DataFrame:
    require_columns(frame, ("traj_id", "t"), f"{label} frame")
    points = frame.loc[frame["t"].notna(), ["traj_id", "t"]]
    _require_rows(points, f"{label} frame (points with a timestamp)")
    return points.assign(t=pd.to_datetime(points["t"], utc=True))


def trajectory_metrics(raw: pd.DataFrame, release: pd.DataFrame, bbox: tuple[float, float, float, float],
                       rng_seed: int, grid_size: int = TRAJECTORY_GRID_SIZE) -> dict[str, float | None]:
    """The utility of a synthetic trajectory release, one figure per key of :data:`TRAJECTORY_METRICS`.

    Frames: ``traj_id, lon, lat`` and ``t`` where present (points in trajectory order: ``seq`` if given, else
    the frame's row order, then ``t``). On the ``grid_size`` x ``grid_size`` grid over the raw bounding box
    (32 by default; query and length are grid-free), JSD in natural log:
    density (:func:`density_jsd` of point cells), query (:func:`circle_query_re`, 200 circles drawn with
    ``rng_seed``), trip (:func:`trip_error`), length (:func:`length_jsd` of travelled distance, 20 buckets),
    pattern_f1 (:func:`frequent_patterns`, top 100 patterns of 2-5 cells, higher is better), transition
    (:func:`transition_jsd`); outside_bbox_share (:func:`outside_bbox_share` of the public ``bbox``);
    start_hour_jsd and duration_jsd (None when either frame has no timestamp).
    """
    raw, release = _with_seq(raw, "raw"), _with_seq(release, "release")
    raw_pts, rel_pts, box = _ordered_points(raw, release)
    cells = {"raw": raw_box_cells(raw_pts, box, grid_size), "release": raw_box_cells(rel_pts, box, grid_size)}
    timed = all("t" in f.columns and f["t"].notna().any() for f in (raw, release))
    return {
        "density": density_jsd(pd.DataFrame({"cell": cells["raw"]}), pd.DataFrame({"cell": cells["release"]})),
        "query": circle_query_re(raw, release, np.random.default_rng(rng_seed)),
        "trip": trip_error(raw, release, grid_size),
        "length": length_jsd(raw, release, "distance"),
        "pattern_f1": frequent_patterns(raw, release, grid_size, 2, 5, 100)["ffp"],
        "transition": transition_jsd(raw, release, grid_size),
        "outside_bbox_share": outside_bbox_share(release, bbox),
        "start_hour_jsd": start_hour_jsd(raw, release) if timed else None,
        "duration_jsd": duration_jsd(raw, release) if timed else None,
    }


def _with_seq(frame: pd.DataFrame, label: str) -> pd.DataFrame:
    """The frame with ``seq`` (kept if present; else the order of ``t`` within each trajectory, then row order),
    and without ``x``, ``y`` (so every metric projects both frames the same way from lon/lat)."""
    require_columns(frame, ("traj_id", "lon", "lat"), f"{label} frame")
    frame = frame.drop(columns=[c for c in ("x", "y") if c in frame.columns])
    if "seq" in frame.columns:
        return frame
    order = frame.sort_values(["traj_id", "t"] if "t" in frame.columns else ["traj_id"], kind="stable")
    return order.assign(seq=order.groupby("traj_id").cumcount())


# --- the gate's utility floor for truthful releases ---------------------------------------------------

def moved_share(raw: pd.DataFrame, release: pd.DataFrame, radius_m: float = MOVED_RADIUS_M) -> float:
    """Truthful releases: the share of the released points of paired records that lie farther than ``radius_m``
    from every point of their own raw trajectory (a lower bound on how far each point was moved; resampling
    mechanisms such as W4M keep no point-to-point alignment, so the distance is to the whole raw trajectory).

    A released record is paired with the raw trajectory of the same ``traj_id`` and ``object_id``, as in
    :func:`point_errors`; records without one are left out. Raises :class:`InputError` when no record pairs.
    """
    if not (np.isfinite(radius_m) and radius_m >= 0):
        raise ParameterError(f"radius_m must be a finite number >= 0, got {radius_m}", "moved_share")
    for frame, label in ((raw, "raw"), (release, "release")):
        require_columns(frame, ("object_id", "traj_id"), f"moved_share: {label} frame")
        _require_rows(frame, f"moved_share: {label} frame")
    raw_xy, rel_xy = planar_coordinates(raw, release)
    keys = pd.factorize(pd.concat([raw["object_id"].astype(str) + "\x1f" + raw["traj_id"].astype(str),
                                   release["object_id"].astype(str) + "\x1f" + release["traj_id"].astype(str)],
                                  ignore_index=True))[0]
    raw_key, rel_key = keys[:len(raw)], keys[len(raw):]
    raw_ok = np.isfinite(raw_xy).all(axis=1)
    paired = np.isin(rel_key, raw_key[raw_ok])
    if not paired.any():
        raise InputError("no released record shares traj_id and object_id with a raw trajectory", "moved_share")
    rel_ok = paired & np.isfinite(rel_xy).all(axis=1)
    near = np.zeros(len(release), dtype=bool)
    if rel_ok.any():
        near[rel_ok] = _has_neighbour(rel_xy[rel_ok], np.zeros(int(rel_ok.sum())), rel_key[rel_ok],
                                      raw_xy[raw_ok], np.zeros(int(raw_ok.sum())), raw_key[raw_ok], radius_m, None)
    return float(1.0 - near[paired].mean())  # a paired point of unknown position counts as moved


def retained_share(raw: pd.DataFrame, release: pd.DataFrame) -> float:
    """Truthful releases: released points of records paired with a raw trajectory (same ``traj_id`` and
    ``object_id``) per raw point. Suppression, dropped records and coarse resampling lower it."""
    for frame, label in ((raw, "raw"), (release, "release")):
        require_columns(frame, ("object_id", "traj_id"), f"retained_share: {label} frame")
    _require_rows(raw, "retained_share: raw frame")
    raw_keys = pd.MultiIndex.from_arrays([raw["object_id"].astype(str), raw["traj_id"]])
    rel_keys = pd.MultiIndex.from_arrays([release["object_id"].astype(str), release["traj_id"]])
    return float(rel_keys.isin(raw_keys).sum() / len(raw))
