"""Point-level utility: the survey's INF (Jin et al., TKDE 2023, Sec. 4.2.1) and, for truthful mechanisms, how
far released records lie from their own raw trajectories (aligned points, Hausdorff, DTW; ours, the survey does
not use them), the share of moved points and of retained points that floor the gate for truthful releases.

Errors in metres on one plane (:func:`audits.planar.planar_coordinates`); a released record is paired with the
raw trajectory of the same ``traj_id`` and ``object_id``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from audits.neighbours import has_neighbour
from audits.planar import epoch_seconds, planar_coordinates, require_rows
from trajpub.errors import InputError, ParameterError
from trajpub.frame import require_columns

MOVED_RADIUS_M = 1000.0
""":func:`moved_share` counts released points farther than this from their own raw trajectory."""
POINT_ERROR_MEASURES = ("aligned", "hausdorff", "dtw")


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
    require_rows(raw, "information_loss: raw frame")
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
        preserved[raw_ok] = has_neighbour(raw_xy[raw_ok], raw_t[raw_ok], raw_owner[raw_ok], rel_xy[rel_ok],
                                          rel_t[rel_ok], rel_owner[rel_ok], tolerance_m,
                                          tolerance_s if timed else None)
    kept = pd.Series(preserved).groupby(raw["traj_id"].to_numpy()).mean()
    return float(1.0 - kept.mean())


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
        require_rows(frame, f"point_errors: {label} frame")
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
        require_rows(frame, f"moved_share: {label} frame")
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
        near[rel_ok] = has_neighbour(rel_xy[rel_ok], np.zeros(int(rel_ok.sum())), rel_key[rel_ok],
                                     raw_xy[raw_ok], np.zeros(int(raw_ok.sum())), raw_key[raw_ok], radius_m, None)
    return float(1.0 - near[paired].mean())  # a paired point of unknown position counts as moved


def retained_share(raw: pd.DataFrame, release: pd.DataFrame) -> float:
    """Truthful releases: released points of records paired with a raw trajectory (same ``traj_id`` and
    ``object_id``) per raw point. Suppression, dropped records and coarse resampling lower it."""
    for frame, label in ((raw, "raw"), (release, "release")):
        require_columns(frame, ("object_id", "traj_id"), f"retained_share: {label} frame")
    require_rows(raw, "retained_share: raw frame")
    raw_keys = pd.MultiIndex.from_arrays([raw["object_id"].astype(str), raw["traj_id"]])
    rel_keys = pd.MultiIndex.from_arrays([release["object_id"].astype(str), release["traj_id"]])
    return float(rel_keys.isin(raw_keys).sum() / len(raw))
