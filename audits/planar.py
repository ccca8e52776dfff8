"""The points of a raw frame D and a release D* as the utility and attack metrics read them: checked columns,
trajectory order, metres on one plane, cells of a grid over the raw bounding box, timestamps as seconds.

Frames follow the trajectory convention of :mod:`trajpub.frame`; each ``traj_id`` is one trajectory. Points of
unknown position are left out (:func:`checked_points`), never the frame's other rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trajpub.errors import InputError
from trajpub.frame import require_columns

EARTH_RADIUS_M = 6_371_008.8


def require_rows(frame: pd.DataFrame, where: str) -> None:
    if frame.empty:
        raise InputError("the frame is empty", where)


def checked_points(frame: pd.DataFrame, label: str, columns: tuple[str, ...]) -> pd.DataFrame:
    """The frame's ``columns``, checked, without points of unknown position."""
    require_columns(frame, columns, f"{label} frame")
    points = frame.loc[:, list(columns)]
    for c in ("lon", "lat", "x", "y"):
        if c in points.columns:
            finite = np.isfinite(points[c].to_numpy(dtype=float))
            if not finite.all():  # a city's frame is copied only when it has points to drop
                points = points[finite]
    require_rows(points, f"{label} frame")
    return points


def in_order(points: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``points`` stably sorted by ``keys`` (one or two columns), returned as they are when already in that order
    (the prepared frames are: no copy of a city's points)."""
    first = points[keys[0]].to_numpy()
    ahead, tied = first[1:] > first[:-1], first[1:] == first[:-1]
    if len(keys) == 2:
        second = points[keys[1]].to_numpy()
        tied &= second[1:] >= second[:-1]
    return points if (ahead | tied).all() else points.sort_values(keys, kind="stable")


def ordered_points(raw: pd.DataFrame, release: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, tuple]:
    """Both frames' points in ``traj_id, seq`` order, and the raw bounding box (lon0, lon1, lat0, lat1) that
    TE and FFP grid over."""
    columns = ("traj_id", "seq", "lon", "lat")
    raw_pts = in_order(checked_points(raw, "raw", columns), ["traj_id", "seq"])
    rel_pts = in_order(checked_points(release, "release", columns), ["traj_id", "seq"])
    return raw_pts, rel_pts, (raw_pts["lon"].min(), raw_pts["lon"].max(), raw_pts["lat"].min(),
                              raw_pts["lat"].max())


def planar_trajectories(raw: pd.DataFrame, release: pd.DataFrame,
                        ordered: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per frame: points in metres (n x 2) and their trajectory code, grouped by ``traj_id`` (and ``seq``).

    Uses ``x``, ``y`` when both frames have them; otherwise an equirectangular projection about the raw data's
    mean latitude, the same for both frames (distance errors well under 1% within a city).
    """
    planar = all(c in f.columns for f in (raw, release) for c in ("x", "y"))
    coords = ("x", "y") if planar else ("lon", "lat")
    keys = ("traj_id", "seq") if ordered else ("traj_id",)
    frames = [in_order(checked_points(f, label, (*keys, *coords)), list(keys))
              for f, label in ((raw, "raw"), (release, "release"))]
    cos_lat0 = np.cos(np.radians(frames[0]["lat"].mean())) if not planar else 1.0
    out = []
    for f in frames:
        a, b = f[coords[0]].to_numpy(dtype=float), f[coords[1]].to_numpy(dtype=float)
        if not planar:
            a, b = EARTH_RADIUS_M * np.radians(a) * cos_lat0, EARTH_RADIUS_M * np.radians(b)
        out.append((np.column_stack([a, b]), pd.factorize(f["traj_id"])[0]))
    return out


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


def raw_box_cells(points: pd.DataFrame, box: tuple[float, float, float, float], grid_size: int) -> np.ndarray:
    """Cell ``row * grid_size + col`` of each point on the ``grid_size x grid_size`` uniform lon/lat grid over
    ``box = (lon0, lon1, lat0, lat1)`` (the raw data's bounding box, :func:`ordered_points`); points outside it
    fall in the nearest border cell. A uniform lon/lat grid is a uniform grid in the local equirectangular
    projection, which is linear in lon and lat."""
    lon0, lon1, lat0, lat1 = box
    col = _grid_index(points["lon"].to_numpy(dtype=float), lon0, lon1, grid_size)
    row = _grid_index(points["lat"].to_numpy(dtype=float), lat0, lat1, grid_size)
    return row * grid_size + col


def _grid_index(values: np.ndarray, low: float, high: float, n: int) -> np.ndarray:
    span = (high - low) or np.finfo(float).tiny
    return np.clip(np.floor((values - low) / span * n), 0, n - 1).astype(np.int64)


def epoch_seconds(t: pd.Series) -> np.ndarray:
    """Timestamps as float seconds since the epoch (any datetime resolution); NaN for NaT."""
    values = pd.to_datetime(t, utc=True, errors="coerce").dt.tz_convert(None).to_numpy()
    return (values - np.datetime64(0, "s")) / np.timedelta64(1, "s")
