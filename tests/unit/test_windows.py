"""Relative release windows: resolution in the dataset's time zone (alignment, daylight saving), the spec's key,
the review's words, and a backfill's run times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from flows.deploy import backfill_spec, backfill_times, local_time
from trajpub.errors import ParameterError
from trajpub.spec import ReleaseSpec
from trajpub.window import RelativeWindow, ReleaseWindow, window_words

SHANGHAI, NEW_YORK = "Asia/Shanghai", "America/New_York"
BBOX = [115.4, 39.4, 117.6, 41.1]


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def local(zone: str, *args) -> datetime:
    return datetime(*args, tzinfo=ZoneInfo(zone))


def test_a_weekly_run_on_monday_morning_in_beijing_releases_the_last_local_week():
    week = RelativeWindow.parse({"last": "7d", "align": "local_week"})
    # the deployment's cron: Mondays 03:00 Beijing time = Sunday 19:00 UTC
    start, end = week.resolve(local(SHANGHAI, 2008, 2, 11, 3), SHANGHAI)
    assert (start, end) == (utc(2008, 2, 3, 16), utc(2008, 2, 10, 16))  # Mon 4 Feb 00:00 .. Mon 11 Feb 00:00 local
    # the same instant read in UTC would be a Sunday: the week would end a week earlier
    assert week.resolve(local(SHANGHAI, 2008, 2, 11, 3), None) == (utc(2008, 1, 28), utc(2008, 2, 4))
    # any time of that week, up to and including the next Monday's midnight, resolves to the week before it
    assert week.resolve(local(SHANGHAI, 2008, 2, 17, 23, 59), SHANGHAI) == (start, end)
    assert week.resolve(local(SHANGHAI, 2008, 2, 18), SHANGHAI) == (end, end + timedelta(days=7))


def test_a_week_that_starts_on_sunday_ends_on_the_local_sunday_midnight():
    """San Francisco counts its weeks from Sunday: a run on Monday 1 June 2026 releases Sunday 24 to Saturday 30
    May, whole, not a one-day "week" and a Monday-to-Saturday one; the window's own first day wins over the
    dataset's, and the dataset's over Monday."""
    sf = "America/Los_Angeles"
    week = RelativeWindow.parse({"last": "7d", "align": "local_week", "week_starts": "Sunday"})
    start, end = week.resolve(local(sf, 2026, 6, 1, 3), sf)
    assert (start, end) == (local(sf, 2026, 5, 24), local(sf, 2026, 5, 31))
    assert week.resolve(local(sf, 2026, 5, 31), sf) == (start, end)  # Sunday 00:00 itself: the week just ended
    assert week.resolve(local(sf, 2026, 5, 30, 23, 59), sf) == (start - timedelta(days=7), start)
    plain = ReleaseSpec.from_dict({"dataset": "d", "bbox": BBOX, "window": {"last": "7d", "align": "local_week"}})
    assert plain.resolved(local(sf, 2026, 6, 1, 3), sf, "sunday").window_end == end  # the dataset's first day
    assert plain.resolved(local(sf, 2026, 6, 1, 3), sf).window_end == local(sf, 2026, 6, 1)  # Monday by default
    own = ReleaseSpec.from_dict({"dataset": "d", "bbox": BBOX, "window": week.to_dict()})
    assert own.resolved(local(sf, 2026, 6, 1, 3), sf, "monday").window_end == end
    assert "up to the local Sunday 00:00" in week.describe(sf)
    for bad, says in (({"last": "7d", "align": "local_week", "week_starts": "sun"}, "a week starts on one of"),
                      ({"last": "7d", "align": "local_day", "week_starts": "sunday"}, "goes with align: local_week")):
        with pytest.raises(ParameterError, match=says):
            RelativeWindow.parse(bad)


def test_aligned_days_are_local_calendar_days_across_daylight_saving():
    two_days = RelativeWindow.parse({"last": "2d", "align": "local_day"})
    # New York springs forward on Sunday 14 March 2021: 13 and 14 March last 24 + 23 hours
    start, end = two_days.resolve(local(NEW_YORK, 2021, 3, 15, 3), NEW_YORK)
    assert (start, end) == (utc(2021, 3, 13, 5), utc(2021, 3, 15, 4))  # EST midnight .. EDT midnight
    assert end - start == timedelta(hours=47)
    # and falls back on Sunday 7 November: that day lasts 25 hours
    start, end = RelativeWindow.parse({"last": "1d", "align": "local_day"}).resolve(local(NEW_YORK, 2021, 11, 8, 9),
                                                                                   NEW_YORK)
    assert (start, end, end - start) == (utc(2021, 11, 7, 4), utc(2021, 11, 8, 5), timedelta(hours=25))


def test_a_local_midnight_skipped_by_a_clock_change_starts_the_day_after_the_gap():
    # Chile moved its clocks from 00:00 to 01:00 on 11 September 2022: that day starts at 01:00 -03
    start, end = RelativeWindow.parse({"last": "1d", "align": "local_day"}).resolve(
        local("America/Santiago", 2022, 9, 12, 12), "America/Santiago")
    assert (start, end) == (utc(2022, 9, 11, 4), utc(2022, 9, 12, 3))


def test_an_unaligned_window_is_an_exact_duration_up_to_the_run():
    at = local(NEW_YORK, 2021, 3, 14, 12)  # noon EDT on the day of the change: 36 hours back are 37 on the clock
    assert RelativeWindow.parse({"last": "36h"}).resolve(at, NEW_YORK) == (utc(2021, 3, 13, 4), utc(2021, 3, 14, 16))
    assert RelativeWindow.parse({"last": "2w", "align": "none"}).last == timedelta(days=14)


@pytest.mark.parametrize(("value", "where"), [
    ({"last": "6h", "align": "local_day"}, "window.last"),  # an aligned window lasts whole days
    ({"last": "7 days"}, "window.last"),
    ({"last": "0d"}, "window.last"),
    ({"last": "7d", "align": "local_month"}, "window.align"),
    ({"last": "7d", "from": "monday"}, "window"),
    ("last 7 days", "window"),
])
def test_a_bad_relative_window_is_refused_naming_the_key(value, where):
    with pytest.raises(ParameterError) as err:
        RelativeWindow.parse(value)
    assert err.value.where == where


def test_a_spec_has_a_relative_window_or_fixed_ends_not_both():
    with pytest.raises(ParameterError, match="not both") as err:
        ReleaseSpec.from_dict({"dataset": "d", "bbox": BBOX, "window": {"last": "7d"}, "window_start": "2008-02-02"})
    assert err.value.where == "window"


def test_a_resolved_spec_records_the_relative_window_with_its_time_and_zone():
    spec = ReleaseSpec.from_dict({"dataset": "d", "bbox": BBOX, "window": {"last": "7d", "align": "local_week"}})
    assert spec.unresolved and spec.window == {"last": "7d", "align": "local_week"}
    at = local(SHANGHAI, 2008, 2, 11, 3)
    resolved = spec.resolved(at, SHANGHAI)
    assert (resolved.window_start, resolved.window_end) == (utc(2008, 2, 3, 16), utc(2008, 2, 10, 16))
    assert not resolved.unresolved and resolved.resolved(utc(2030, 1, 1), SHANGHAI) is resolved
    record = resolved.to_record()
    assert record["window"] == {"last": "7d", "align": "local_week", "week_starts": "monday",
                                "resolved_at": "2008-02-10T19:00:00+00:00", "timezone": SHANGHAI}
    assert ReleaseSpec.from_dict(record) == resolved  # a recorded spec reads back as it ran
    assert (record["window_start"], record["window_end"]) == ("2008-02-03T16:00:00+00:00", "2008-02-10T16:00:00+00:00")
    words = window_words(resolved.window_start, resolved.window_end, record["window"])
    assert words == ("2008-02-03T16:00:00+00:00 to 2008-02-10T16:00:00+00:00 (end excluded): the last 7 days up to "
                     "the local Monday 00:00 at or before the run's time (Asia/Shanghai), resolved for a run at "
                     "2008-02-10T19:00:00+00:00")


def test_the_release_window_lists_the_local_days_it_touches():
    week = ReleaseWindow(utc(2008, 2, 2), utc(2008, 2, 9), SHANGHAI)  # 08:00 on 2 Feb to 08:00 on 9 Feb, local
    assert [d.day for d in week.local_days()] == [2, 3, 4, 5, 6, 7, 8, 9]
    aligned = ReleaseWindow(utc(2008, 2, 3, 16), utc(2008, 2, 10, 16), SHANGHAI)
    assert [d.day for d in aligned.local_days()] == [4, 5, 6, 7, 8, 9, 10]


def test_backfill_run_times_end_each_local_step():
    start, end = local_time("2021-03-13", NEW_YORK, "--start"), local_time("2021-03-16", NEW_YORK, "--end")
    times = backfill_times(start, end, timedelta(days=1))
    # local midnights, however long the day of the clock change is
    assert [t.astimezone(UTC) for t in times] == [utc(2021, 3, 14, 5), utc(2021, 3, 15, 4), utc(2021, 3, 16, 4)]
    # steps of hours are exact: 00:00 EST + 3 h is 04:00 EDT, and 00:00 to 07:00 on the local clock are 6 hours
    hours = backfill_times(local_time("2021-03-14T00:00", NEW_YORK, "--start"),
                           local_time("2021-03-14T07:00", NEW_YORK, "--end"), timedelta(hours=3))
    assert [t.astimezone(UTC) for t in hours] == [utc(2021, 3, 14, 8), utc(2021, 3, 14, 11)]
    with pytest.raises(ParameterError, match="whole number"):  # 00:00 to 06:00 local: 5 hours
        backfill_times(local_time("2021-03-14T00:00", NEW_YORK, "--start"),
                       local_time("2021-03-14T06:00", NEW_YORK, "--end"), timedelta(hours=3))
    with pytest.raises(ParameterError, match="whole number"):
        backfill_times(start, end, timedelta(days=2))
    with pytest.raises(ParameterError, match="before its end"):
        backfill_times(end, start, timedelta(days=1))


def test_a_backfill_of_a_fixed_window_deployment_releases_one_step_per_run():
    fixed = {"dataset": "d", "bbox": BBOX, "window_start": "2008-02-02", "window_end": "2008-02-09"}
    assert backfill_spec(fixed, timedelta(days=1)) == {"dataset": "d", "bbox": BBOX,
                                                       "window": {"last": "1d", "align": "local_day"}}
    assert backfill_spec(fixed, timedelta(hours=6))["window"] == {"last": "6h", "align": "none"}
    relative = {"dataset": "d", "bbox": BBOX, "window": {"last": "7d", "align": "local_week"}}
    assert backfill_spec(relative, timedelta(days=7)) == relative


def test_a_backfill_bill_lists_a_window_without_data_in_its_place_uncharged():
    from types import SimpleNamespace

    from flows.deploy import Backfill

    runs = [(None, SimpleNamespace(label=w)) for w in ("week 1", "week 2", "week 3")]
    bill = SimpleNamespace(lines=lambda: ["- week 1: epsilon 5", "- week 3: epsilon 5", "TOTAL: epsilon 10"])
    assert Backfill("release/d", {}, runs, bill, frozenset({"week 2"})).lines() == [
        "- week 1: epsilon 5", "- week 2: no data in the window; its run is skipped, charged nothing",
        "- week 3: epsilon 5", "TOTAL: epsilon 10"]
    assert Backfill("release/d", {}, runs[1:2], None, frozenset({"week 2"})).lines() == [
        "- week 2: no data in the window; its run is skipped, charged nothing"]
