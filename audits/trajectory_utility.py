"""The synthetic-trajectory metrics (the PrivTrace / LDPTrace comparison), and the city-resolution grid.

One figure per key of :data:`TRAJECTORY_METRICS` (:func:`trajectory_metrics`): JSDs in natural log on a grid
over the raw bounding box, the circle-query error of PrivTrace, the pattern F1 of :mod:`audits.patterns`, and the
share of points outside the public bounding box; speeds and durations for the benchmarks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from audits.circles import circle_counts
from audits.patterns import collapsed_cells, frequent_patterns
from audits.planar import (
    EARTH_RADIUS_M,
    checked_points,
    epoch_seconds,
    in_order,
    ordered_points,
    planar_trajectories,
    raw_box_cells,
    require_rows,
)
from audits.utility import bucket_jsd, density_jsd, jsd, length_jsd, trip_error
from trajpub.errors import InputError, ParameterError
from trajpub.frame import require_columns

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
    points = checked_points(raw, "raw", ("lon", "lat"))
    lon, lat = points["lon"].to_numpy(dtype=float), points["lat"].to_numpy(dtype=float)
    k = EARTH_RADIUS_M * np.pi / 180
    side = max((lon.max() - lon.min()) * k * np.cos(np.radians(lat.mean())), (lat.max() - lat.min()) * k)
    return int(np.clip(round(side / cell_m), 6, limit))


def transition_jsd(raw: pd.DataFrame, release: pd.DataFrame, grid_size: int = TRAJECTORY_GRID_SIZE) -> float:
    """JSD of the first-order cell transitions ``(cell_i, cell_{i+1})`` of all trajectories.

    Cells of the raw-box grid (:func:`raw_box_cells`), consecutive repeats collapsed as for the patterns of
    :func:`frequent_patterns`, so a transition is a move to another cell (a vehicle waiting in a cell makes none).
    """
    raw_pts, rel_pts, box = ordered_points(raw, release)
    pairs = []
    for points in (raw_pts, rel_pts):
        cells, offsets = collapsed_cells(points, box, grid_size)
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
    (raw_xy, raw_codes), (rel_xy, rel_codes) = planar_trajectories(raw, release, ordered=True)
    centres = raw_xy[rng.integers(0, len(raw_xy), n_queries)]
    radii = rng.uniform(radius_m[0], radius_m[1], n_queries)
    n_raw = int(raw_codes.max()) + 1
    q_raw = circle_counts(raw_xy, raw_codes, centres, radii)
    q_rel = circle_counts(rel_xy, rel_codes, centres, radii)
    return float(np.mean(np.abs(q_rel - q_raw) / np.maximum(q_raw, sanity * n_raw)))


def outside_bbox_share(release: pd.DataFrame, bbox: tuple[float, float, float, float]) -> float:
    """Share of released points (with a position) outside the public ``bbox = (min_lon, min_lat, max_lon,
    max_lat)`` (a release whose points leave the release area is useless however its JSDs look)."""
    points = checked_points(release, "release", ("lon", "lat"))
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
    (1: the raw maximum, as lengths; :func:`bucket_jsd`)."""
    durations = []
    for frame, label in ((raw, "raw"), (release, "release")):
        span = _timed(frame, label).groupby("traj_id")["t"].agg(["min", "max"])
        durations.append((span["max"] - span["min"]).dt.total_seconds().to_numpy())
    return bucket_jsd(durations[0], durations[1], n_buckets, quantile)


def segment_speeds(raw: pd.DataFrame, release: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per frame, the speed (km/h) of every segment between consecutive points of a trajectory (``seq`` order)
    with a positive time step; distances in the equirectangular projection about the raw mean latitude (as
    :func:`planar_trajectories`)."""
    out = []
    frames = [in_order(checked_points(f, label, ("traj_id", "seq", "t", "lon", "lat")), ["traj_id", "seq"])
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
    return bucket_jsd(raw_speeds, rel_speeds, n_buckets, quantile)


def _timed(frame: pd.DataFrame, label: str) -> pd.DataFrame:
    require_columns(frame, ("traj_id", "t"), f"{label} frame")
    points = frame.loc[frame["t"].notna(), ["traj_id", "t"]]
    require_rows(points, f"{label} frame (points with a timestamp)")
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
    raw_pts, rel_pts, box = ordered_points(raw, release)
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
