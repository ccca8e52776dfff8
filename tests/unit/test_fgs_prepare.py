"""Preparation into daily slot series (docs/design.md, FGS-Pufferfish): interpolation, local days, left-out days."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mechanisms.fgs_pufferfish import FgsParams, days_in_window, prepare, slot_times
from trajpub.errors import InputError
from trajpub.grid import GridSpec

GRID = GridSpec((116.0, 39.6, 116.8, 40.2), 1000.0)
TZ = "Asia/Shanghai"


def track(object_id, local_day: str, minutes: np.ndarray, x0: float = 0.0) -> pd.DataFrame:
    """Fixes at the given local minutes of the day, moving linearly in the grid's metric CRS:
    x = x0 + 10 m/min, y = −5 m/min."""
    minutes = np.asarray(minutes, dtype=float)
    lon, lat = GRID.unproject(x0 + 10.0 * minutes, -5.0 * minutes)
    local = pd.Timestamp(local_day, tz=TZ) + pd.to_timedelta(minutes, unit="min")
    return pd.DataFrame({"object_id": object_id, "t": local.tz_convert("UTC"), "lon": lon, "lat": lat})


def params(**kw):
    return FgsParams(n_slots=48, day_timezone=TZ, location_std_m=100.0, **kw)


def test_linear_motion_is_interpolated_exactly_and_held_at_the_ends():
    minutes = np.arange(20, 1430, 7.0)  # first fix 00:20, last 23:43 local
    points = pd.concat([track("a", "2008-02-03", minutes), track("a", "2008-02-04", minutes, x0=500.0)])
    prep = prepare(points, GRID, params())
    assert prep.object_id.tolist() == ["a", "a"]
    assert prep.day.tolist() == [np.datetime64("2008-02-03"), np.datetime64("2008-02-04")]
    centres = (np.arange(48) + 0.5) * 30.0
    held = np.clip(centres, minutes[0], minutes[-1])
    assert prep.slots[0, :, 0] == pytest.approx(10.0 * held, abs=1e-3)
    assert prep.slots[0, :, 1] == pytest.approx(-5.0 * held, abs=1e-3)
    assert prep.slots[1, :, 0] == pytest.approx(500.0 + 10.0 * held, abs=1e-3)
    assert prep.slots[0, 0, 0] == pytest.approx(200.0, abs=1e-3)  # 00:15 held at the 00:20 fix
    assert prep.left_out.empty
    [(oid, dates, days)] = list(prep.objects())
    assert oid == "a" and days.shape == (2, 48, 2) and len(dates) == 2


def test_days_are_local_days_of_the_time_zone():
    # 23:50 local on 02-03 is 15:50 UTC: it belongs to local day 02-03 (the last slot), not to UTC day 02-03's end.
    minutes = np.r_[np.arange(0, 1440, 10.0)]
    points = pd.concat([track("a", "2008-02-03", minutes), track("a", "2008-02-04", minutes)])
    prep = prepare(points, GRID, params())
    assert prep.day.tolist() == [np.datetime64("2008-02-03"), np.datetime64("2008-02-04")]
    times = slot_times(prep.day, 48, TZ)
    assert pd.Timestamp(times[0, 0]) == pd.Timestamp("2008-02-02 16:15")
    assert pd.Timestamp(times[0, 47]) == pd.Timestamp("2008-02-03 15:45")


def test_slot_times_on_a_dst_day_divide_the_real_day():
    # 2024-03-31 in Berlin lasts 23 hours: τ = 23 h / 48.
    times = slot_times(np.array(["2024-03-31"], dtype="datetime64[D]"), 48, "Europe/Berlin")[0]
    tau = pd.Timedelta(hours=23) / 48
    assert pd.Timestamp(times[0]) == pd.Timestamp("2024-03-30 23:00") + tau / 2
    assert pd.Timestamp(times[1]) - pd.Timestamp(times[0]) == tau


def test_days_with_too_little_data_are_left_out_and_reported():
    good = np.arange(0, 1440, 15.0)
    gap = np.r_[np.arange(0, 600, 15.0), np.arange(800, 1440, 15.0)]  # a 200-minute hole
    points = pd.concat([
        track("a", "2008-02-03", good),
        track("a", "2008-02-04", good[:8]),  # 8 fixes < 12
        track("a", "2008-02-05", gap),
        track("a", "2008-02-06", good),
        track("b", "2008-02-03", good),  # one valid day only
        track("b", "2008-02-04", gap),
    ])
    prep = prepare(points, GRID, params())
    assert prep.object_id.tolist() == ["a", "a"]
    assert prep.day.tolist() == [np.datetime64("2008-02-03"), np.datetime64("2008-02-06")]
    report = prep.left_out.set_index(["object_id", "day"])
    assert report.loc[("a", np.datetime64("2008-02-04")), "reason"] == "too_few_fixes"
    assert report.loc[("a", np.datetime64("2008-02-04")), "n_fixes"] == 8
    assert report.loc[("a", np.datetime64("2008-02-05")), "reason"] == "gap"
    assert report.loc[("a", np.datetime64("2008-02-05")), "max_gap_minutes"] == pytest.approx(215.0)
    assert report.loc[("b", np.datetime64("2008-02-03")), "reason"] == "too_few_days"
    assert report.loc[("b", np.datetime64("2008-02-04")), "reason"] == "gap"
    summary = prep.summary()
    json.dumps(summary)
    assert summary["left_out_by_reason"] == {"gap": 2, "too_few_fixes": 1, "too_few_days": 1}
    assert summary["n_objects"] == 1 and summary["n_object_days"] == 2
    # A looser gap rule keeps the holed day (and with it object b's two days).
    loose = prepare(points, GRID, params(max_gap_minutes=240.0))
    assert loose.object_id.tolist() == ["a", "a", "a", "b", "b"]


def test_edges_of_the_day_count_as_gaps():
    late_start = np.arange(180, 1440, 10.0)  # nothing before 03:00
    points = pd.concat([track("a", "2008-02-03", late_start), track("a", "2008-02-04", late_start)])
    assert prepare(points, GRID, params()).left_out["reason"].tolist() == ["gap", "gap"]
    assert len(prepare(points, GRID, params(max_gap_minutes=181.0)).object_id) == 2


def test_points_outside_the_public_bbox_and_duplicates_are_dropped():
    minutes = np.arange(0, 1440, 10.0)
    points = pd.concat([track("a", "2008-02-03", minutes), track("a", "2008-02-04", minutes)])
    outlier = points.iloc[[5]].assign(lon=0.0, lat=0.0)
    duplicate = points.iloc[[7]]
    prep = prepare(pd.concat([points, outlier, duplicate]), GRID, params())
    reference = prepare(points, GRID, params())
    assert prep.n_points_outside_bbox == 1
    assert np.array_equal(prep.slots, reference.slots)


def test_empty_and_malformed_input():
    empty = prepare(pd.DataFrame({"object_id": [], "t": pd.to_datetime([], utc=True), "lon": [], "lat": []}),
                    GRID, params())
    assert empty.slots.shape == (0, 48, 2) and list(empty.objects()) == []
    with pytest.raises(InputError, match="lat"):
        prepare(pd.DataFrame({"object_id": [1], "t": [pd.Timestamp("2020-01-01", tz="UTC")], "lon": [116.2]}),
                GRID, params())


@pytest.mark.parametrize(("start", "end", "n_days"), [
    ("2008-02-04 10:00", "2008-02-04 10:15", 0),  # a quarter of an hour
    ("2008-02-04 01:50", "2008-02-04 22:10", 1),  # local times; both ends within 120 min of a midnight
    ("2008-02-04 02:10", "2008-02-05 22:10", 1),  # the first day starts 130 min after its midnight
    ("2008-02-03 23:00", "2008-02-06 01:00", 2),  # two whole days and two partial ones
    ("2008-02-02 00:00", "2008-02-09 00:00", 7),  # a local week
])
def test_days_in_window_is_what_prepare_keeps_from_a_fully_covered_window(start, end, n_days):
    """The plan-time count (public inputs only) is the rule's count, and it equals the days that prepare keeps
    when an object has a fix every 10 minutes of the whole window, the most a window can give."""
    ws, we = pd.Timestamp(start, tz=TZ).tz_convert("UTC"), pd.Timestamp(end, tz=TZ).tz_convert("UTC")
    p = params(min_days=1)
    t = pd.date_range(ws, we, freq="10min", inclusive="left")
    local = t.tz_convert(TZ)
    minutes = ((local - local.normalize()).total_seconds() / 60).to_numpy()
    days = [track("a", str(day.date()), minutes[local.normalize() == day]) for day in local.normalize().unique()]
    kept = prepare(pd.concat(days, ignore_index=True), GRID, p)
    assert days_in_window(p, ws, we) == len(kept.day) == n_days


def test_days_in_window_is_unknown_for_an_open_window():
    assert days_in_window(params(), None, pd.Timestamp("2008-02-04", tz="UTC")) is None
