"""The forecast's own arithmetic: a schedule's run times (Prefect's cron, daylight saving included), each run's
window, and the ledger's rule replayed on simulated charges (tasks.forecast)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prefect.client.schemas.schedules import CronSchedule, IntervalSchedule

from tasks.forecast import Replay, run_dates, run_windows
from trajpub.periods import Spend, Unit
from trajpub.spec import ReleaseSpec


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_cron_runs_keep_their_local_hour_across_daylight_saving():
    dates = run_dates(CronSchedule(cron="0 3 * * 1", timezone="Europe/Berlin"), utc(2026, 3, 20), utc(2026, 4, 7))
    assert dates == [utc(2026, 3, 23, 2), utc(2026, 3, 30, 1), utc(2026, 4, 6, 1)]  # 03:00 CET, then CEST


def test_interval_schedules_are_forecast_too():
    schedule = IntervalSchedule(interval=timedelta(days=7), anchor_date=utc(2026, 1, 5, 3), timezone="UTC")
    assert run_dates(schedule, utc(2026, 1, 1), utc(2026, 1, 20)) == [utc(2026, 1, 5, 3), utc(2026, 1, 12, 3),
                                                                      utc(2026, 1, 19, 3)]


def spec_with(**window) -> ReleaseSpec:
    return ReleaseSpec.from_dict({"dataset": "d", "bbox": [116.0, 39.6, 116.8, 40.2], "mechanism": "objtrace",
                                  "requested_by": "r", **window})


def test_a_run_releases_the_specs_window_or_no_window():
    at = [utc(2026, 1, 5, 3), utc(2026, 1, 12, 3)]
    fixed = (utc(2008, 2, 2), utc(2008, 2, 9))
    spec = spec_with(window_start=fixed[0].isoformat(), window_end=fixed[1].isoformat())
    assert run_windows(spec, "Asia/Shanghai", at) == [(at[0], *fixed), (at[1], *fixed)]
    open_start = spec_with(window_end=fixed[1].isoformat())
    assert run_windows(open_start, "Asia/Shanghai", at)[0] == (at[0], None, fixed[1])


def test_a_relative_window_moves_with_each_run_in_the_datasets_zone():
    at = [utc(2026, 1, 5, 3), utc(2026, 1, 12, 3)]  # Mondays 11:00 in Beijing
    weekly = spec_with(window={"last": "7d", "align": "local_week"})
    runs = run_windows(weekly, "Asia/Shanghai", at)
    assert [(s, e) for _, s, e in runs] == [(utc(2025, 12, 28, 16), utc(2026, 1, 4, 16)),
                                          (utc(2026, 1, 4, 16), utc(2026, 1, 11, 16))]  # the last whole local weeks


def test_a_sunday_week_dataset_forecasts_one_period_per_weekly_run():
    """Sunday weeks (the dataset's week start): each Sunday-morning run releases the Sunday-to-Sunday week before
    it, one object-week each, so a cap of 10 allows every run at epsilon 5 twice over (ISO weeks would charge each
    window to two weeks and stop after one run per week pair)."""
    la = "America/Los_Angeles"
    at = [utc(2026, 6, 7, 10), utc(2026, 6, 14, 10)]  # Sundays 03:00 in San Francisco
    runs = run_windows(spec_with(window={"last": "7d", "align": "local_week"}), la, at, "sunday")
    assert [(s, e) for _, s, e in runs] == [(utc(2026, 5, 31, 7), utc(2026, 6, 7, 7)),
                                          (utc(2026, 6, 7, 7), utc(2026, 6, 14, 7))]
    sunday, iso = Unit("object", "week", 1, la, "sunday"), Unit("object", "week", 1, la)
    for unit, allowed in ((sunday, 4), (iso, 2)):
        replay = Replay(unit, 10.0, None, [], 0.0)
        fits = 0
        for _, s, e in runs + runs:  # each week charged twice at epsilon 5
            if replay.refusal(s, e, 5.0) is None:
                replay.charge(s, e, 5.0)
                fits += 1
        assert fits == allowed, unit


def test_the_replayed_rule_refuses_where_the_ledger_would():
    weekly = Unit("object", "week", 1, "Asia/Shanghai")
    monday = datetime(2008, 2, 4)
    week = (utc(2008, 2, 3, 16), utc(2008, 2, 10, 16))  # Monday to Monday, Beijing

    def replay(unit: Unit, lifetime_cap: float | None = None) -> Replay:
        return Replay(unit, 10.0, lifetime_cap, [Spend(monday, monday, 5.0)], 5.0)

    assert replay(weekly).refusal(*week, 5.0) is None
    assert replay(weekly).refusal(*week, 5.5) == "only 5 of the cap 10 per object-week left in the week from 2008-02-04"
    assert replay(weekly, 8.0).refusal(*week, 5.0) == "only 3 of the lifetime cap 8 per object left"
    assert "window with both ends" in replay(weekly).refusal(None, None, 1.0)
    two_weeks_on = (week[0] + timedelta(weeks=2), week[1] + timedelta(weeks=2))
    assert replay(Unit("object", "week", 3, "Asia/Shanghai")).refusal(*two_weeks_on, 6.0) == (
        "only 5 of the cap 10 per object-week left over the 3 weeks from 2008-02-04 (w-event)")
    lifetime = Replay(Unit(), 10.0, None, [], 9.0)
    assert lifetime.refusal(None, None, 1.0) is None  # the lifetime unit needs no window
    assert lifetime.refusal(None, None, 1.5) == "only 1 of the cap 10 per object left"


def test_simulated_charges_count_like_the_ledgers():
    weekly = Replay(Unit("object", "week", 1, "Asia/Shanghai"), 10.0, 12.0, [], 0.0)
    week = (utc(2008, 2, 3, 16), utc(2008, 2, 10, 16))
    weekly.charge(*week, 6.0)
    assert weekly.refusal(*week, 4.5) == "only 4 of the cap 10 per object-week left in the week from 2008-02-04"
    next_week = (week[1], week[1] + timedelta(weeks=1))
    weekly.charge(*next_week, 6.0)  # another week: parallel; the lifetime sum is 12
    assert weekly.refusal(week[1] + timedelta(weeks=1), week[1] + timedelta(weeks=2), 0.5) == (
        "only 0 of the lifetime cap 12 per object left")
