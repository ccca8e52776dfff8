"""Preparation for FGS: each object's points resampled to daily series of N equally spaced slots, in metres.

The paper interpolates its real data "with a constant time interval" to 48 slots a day and says nothing more
(Ou et al. 2018, §VIII-A.2b). Our choice (docs/design.md, FGS-Pufferfish): linear interpolation in time per
coordinate onto the slot centres, holding the nearest fix before the first and after the last one. Days are
local days of ``params.day_timezone``; slot n of a day is centred at its local midnight + (n + ½)·τ with
τ = (day length)/N (τ = 30 min for N = 48 on a 24-hour day). Coordinates are projected to the grid's local
metric CRS first. A day with fewer than ``min_fixes_per_day`` fixes, or with a stretch of more than
``max_gap_minutes`` without a fix (counting the stretches before the first and after the last fix), is left out
and reported, never invented; so are the days of an object that keeps fewer than ``min_days`` days.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms.fgs_pufferfish.params import FgsParams
from trajpub.frame import require_columns
from trajpub.grid import GridSpec

LEFT_OUT_COLUMNS = ("object_id", "day", "n_fixes", "max_gap_minutes", "reason")


@dataclass(frozen=True, eq=False)
class PreparedDays:
    """The object-days that can be released, sorted by object then day, and the ones left out.

    object_id: (R,) the object of each row; day: (R,) its local date (datetime64[D]); slots: (R, N, 2) the
    x, y of each slot in metres (grid CRS); left_out: one row per object-day left out (``LEFT_OUT_COLUMNS``;
    reasons "too_few_fixes", "gap", "too_few_days"); n_points_outside_bbox: points dropped before resampling
    because they lie outside the grid's public bounding box.
    """

    object_id: np.ndarray
    day: np.ndarray
    slots: np.ndarray
    timezone: str
    left_out: pd.DataFrame
    n_points_outside_bbox: int

    def objects(self) -> Iterator[tuple[object, np.ndarray, np.ndarray]]:
        """(object_id, local dates (D,), slot series (D, N, 2)) for every object, in order."""
        if len(self.object_id) == 0:
            return
        starts = np.flatnonzero(np.r_[True, self.object_id[1:] != self.object_id[:-1]])
        for start, stop in zip(starts, np.r_[starts[1:], len(self.object_id)], strict=True):
            yield self.object_id[start], self.day[start:stop], self.slots[start:stop]

    def summary(self) -> dict:
        """JSON-safe counts for lineage: object-days kept and left out (by reason), objects kept."""
        reasons = self.left_out["reason"].value_counts() if len(self.left_out) else pd.Series(dtype=int)
        return {
            "n_objects": len(np.unique(self.object_id)) if len(self.object_id) else 0,
            "n_object_days": len(self.object_id),
            "n_object_days_left_out": len(self.left_out),
            "left_out_by_reason": {str(k): int(v) for k, v in reasons.items()},
            "n_points_outside_bbox": int(self.n_points_outside_bbox),
            "n_slots": int(self.slots.shape[1]),
            "day_timezone": self.timezone,
        }


def day_bounds(dates: np.ndarray, timezone: str) -> tuple[pd.DatetimeIndex, pd.DatetimeIndex]:
    """UTC instants of the local midnights that start and end each local date (23 or 25 hours on DST days)."""
    local = pd.DatetimeIndex(pd.to_datetime(np.asarray(dates, dtype="datetime64[D]")))
    start = local.tz_localize(timezone, ambiguous=True, nonexistent="shift_forward").tz_convert("UTC")
    end = (local + pd.Timedelta(days=1)).tz_localize(timezone, ambiguous=True, nonexistent="shift_forward")
    return start, end.tz_convert("UTC")


def days_in_window(params: FgsParams, window_start: pd.Timestamp | None,
                   window_end: pd.Timestamp | None) -> int | None:
    """How many local days of a snapshot window ``[window_start, window_end)`` (UTC) can pass the day rules of
    :func:`prepare` at all: a day needs a fix within ``max_gap_minutes`` of its starting midnight and of its
    ending one, so the window must reach that close to both. Public inputs only (no data is read); None for a
    window open on either side."""
    if window_start is None or window_end is None:
        return None
    ws, we = pd.Timestamp(window_start), pd.Timestamp(window_end)
    first, last = (t.tz_convert(params.day_timezone).tz_localize(None).normalize() for t in (ws, we))
    start, end = day_bounds(pd.date_range(first - pd.Timedelta(days=1), last).to_numpy(), params.day_timezone)
    gap = pd.Timedelta(minutes=params.max_gap_minutes)
    return int(((start + gap >= ws) & (end - gap < we)).sum())


def slot_times(dates: np.ndarray, n_slots: int, timezone: str) -> np.ndarray:
    """(D, N) UTC slot centres (datetime64[ns]) of the given local dates: midnight + (n + ½)·τ."""
    start, end = day_bounds(dates, timezone)
    start_ns = start.as_unit("ns").asi8.astype(np.float64)
    tau = (end.as_unit("ns").asi8 - start.as_unit("ns").asi8) / n_slots
    centres = start_ns[:, None] + (np.arange(n_slots) + 0.5) * tau[:, None]
    return np.round(centres).astype("int64").astype("datetime64[ns]")


def prepare(points: pd.DataFrame, grid: GridSpec, params: FgsParams) -> PreparedDays:
    """Daily slot series of every object in ``points`` (columns object_id, t (UTC), lon, lat; EPSG:4326).

    All points of an object must be in ``points`` (a partition by object suffices): the day rules and the
    ``min_days`` rule look at one object at a time, never across objects.
    """
    require_columns(points, ("object_id", "t", "lon", "lat"), "fgs_pufferfish.prepare")
    n_slots, tz = params.n_slots, params.day_timezone
    df = points[["object_id", "t", "lon", "lat"]].dropna()
    min_lon, min_lat, max_lon, max_lat = grid.bbox
    inside = df["lon"].between(min_lon, max_lon) & df["lat"].between(min_lat, max_lat)
    n_outside = int((~inside).sum())
    df = df[inside].copy()
    df["t"] = pd.to_datetime(df["t"], utc=True).dt.as_unit("ns")
    df["date"] = df["t"].dt.tz_convert(tz).dt.tz_localize(None).dt.normalize()
    df = df.sort_values(["object_id", "date", "t"], kind="stable").drop_duplicates(["object_id", "t"])
    df = df.reset_index(drop=True)
    if df.empty:
        return _empty(n_slots, tz, n_outside)
    x, y = grid.project(df["lon"].to_numpy(), df["lat"].to_numpy())
    group = df.groupby(["object_id", "date"], sort=False).ngroup().to_numpy()
    first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    stop = np.r_[first[1:], len(group)]
    g_object = df["object_id"].to_numpy()[first]
    g_date = df["date"].to_numpy()[first].astype("datetime64[D]")
    start, end = day_bounds(g_date, tz)
    # time in seconds since the group's local midnight
    t_rel = (pd.DatetimeIndex(df["t"]).asi8 - np.repeat(start.as_unit("ns").asi8, stop - first)) / 1e9
    day_len = (end.as_unit("ns").asi8 - start.as_unit("ns").asi8) / 1e9
    n_fixes = stop - first
    inner_gap = np.zeros(len(first))
    steps = np.diff(t_rel)
    same = group[1:] == group[:-1]
    np.maximum.at(inner_gap, group[1:][same], steps[same])
    max_gap = np.maximum.reduce([t_rel[first], day_len - t_rel[stop - 1], inner_gap]) / 60.0
    reason = np.where(n_fixes < params.min_fixes_per_day, "too_few_fixes",
                      np.where(max_gap > params.max_gap_minutes, "gap", ""))
    valid = reason == ""
    days_per_object = pd.Series(valid).groupby(g_object).transform("sum").to_numpy()
    reason = np.where(valid & (days_per_object < params.min_days), "too_few_days", reason)
    keep = reason == ""
    left_out = pd.DataFrame({"object_id": g_object, "day": g_date, "n_fixes": n_fixes,
                             "max_gap_minutes": max_gap, "reason": reason})[~keep].reset_index(drop=True)
    rows = np.flatnonzero(np.repeat(keep, n_fixes))
    slots = _interpolate(t_rel[rows], x[rows], y[rows], n_fixes[keep], day_len[keep], n_slots)
    return PreparedDays(g_object[keep], g_date[keep], slots, tz, left_out, n_outside)


def _interpolate(t_rel: np.ndarray, x: np.ndarray, y: np.ndarray, n_fixes: np.ndarray, day_len: np.ndarray,
                 n_slots: int) -> np.ndarray:
    """Linear interpolation of every group (contiguous, time-sorted fixes) at its slot centres in one
    ``np.interp`` call: group g's times are shifted by g·(2 days) and its queries clipped to [first fix, last
    fix] (the ends hold), so no query falls between two groups."""
    n_groups = len(n_fixes)
    if n_groups == 0:
        return np.empty((0, n_slots, 2))
    first = np.r_[0, np.cumsum(n_fixes)[:-1]].astype(np.int64)
    last = first + n_fixes - 1
    shift = 2.0 * 86400.0 * np.arange(n_groups)
    t_all = t_rel + np.repeat(shift, n_fixes)
    centres = (np.arange(n_slots) + 0.5) / n_slots * day_len[:, None]
    query = np.clip(centres, t_rel[first][:, None], t_rel[last][:, None]) + shift[:, None]
    out = np.empty((n_groups, n_slots, 2))
    out[..., 0] = np.interp(query, t_all, x)
    out[..., 1] = np.interp(query, t_all, y)
    return out


def _empty(n_slots: int, tz: str, n_outside: int) -> PreparedDays:
    return PreparedDays(np.empty(0, dtype=object), np.empty(0, dtype="datetime64[D]"), np.empty((0, n_slots, 2)),
                        tz, pd.DataFrame(columns=list(LEFT_OUT_COLUMNS)), n_outside)
