"""The period arithmetic of per-period units of protection: the periods a window touches in the dataset's time
zone (days at local midnight, ISO weeks from Monday, months from the 1st; daylight saving), w-event sums, the unit
in words (trajpub.periods)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from trajpub.errors import ParameterError
from trajpub.periods import Spend, Unit, period_start, periods_between, run_spend, touched, worst_run


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_periods_start_at_local_midnight_monday_and_the_first():
    t = utc(2008, 2, 3, 17, 0)  # Sunday 17:00 UTC is Monday 01:00 in Beijing
    assert period_start(t, "day", "Asia/Shanghai") == datetime(2008, 2, 4)
    assert period_start(t, "week", "Asia/Shanghai") == datetime(2008, 2, 4)
    assert period_start(t, "week", None) == datetime(2008, 1, 28)  # UTC: still the week of Monday 28 January
    assert period_start(utc(2008, 2, 29, 16, 0), "month", "Asia/Shanghai") == datetime(2008, 3, 1)


def test_a_dataset_whose_weeks_start_on_sunday_counts_one_period_for_a_sunday_to_saturday_window():
    sf = "America/Los_Angeles"  # Sunday 24 May 2026 00:00 PDT is 07:00 UTC
    start, end = utc(2026, 5, 24, 7), utc(2026, 5, 31, 7)
    assert touched(start, end, "week", sf, "sunday") == (datetime(2026, 5, 24), datetime(2026, 5, 24))
    assert touched(start, end, "week", sf) == (datetime(2026, 5, 18), datetime(2026, 5, 25))  # ISO: two weeks
    assert period_start(utc(2026, 5, 31, 6, 59), "week", sf, "saturday") == datetime(2026, 5, 30)
    unit = Unit("object", "week", 1, sf, "Sunday")
    assert unit.week_start == "sunday" and "weeks from Sunday 00:00" in unit.describe()
    assert "ISO weeks from Monday 00:00" in Unit("object", "week").describe()
    with pytest.raises(ParameterError, match="a week starts on one of"):
        Unit("object", "week", 1, sf, "sun")


def test_a_window_touches_every_period_from_its_start_to_its_last_instant():
    # the shipped weekly window, 2 to 9 February 2008 (UTC), read in Beijing: Saturday 08:00 to Saturday 08:00
    assert touched(utc(2008, 2, 2), utc(2008, 2, 9), "week", "Asia/Shanghai") == (datetime(2008, 1, 28),
                                                                                  datetime(2008, 2, 4))
    # the end is excluded: a window ending at Monday 00:00 local does not touch that Monday's week
    assert touched(utc(2008, 2, 3, 16), utc(2008, 2, 10, 16), "week", "Asia/Shanghai") == (datetime(2008, 2, 4),
                                                                                          datetime(2008, 2, 4))
    assert touched(utc(2008, 2, 3, 16), utc(2008, 2, 10, 16, 0, 0, 1), "week", "Asia/Shanghai")[1] == \
        datetime(2008, 2, 11)
    with pytest.raises(ParameterError, match="window_start must be before window_end"):
        touched(utc(2008, 2, 9), utc(2008, 2, 2), "day", None)


def test_daylight_saving_days_follow_the_local_calendar():
    # Berlin moves to summer time on 29 March 2026: that local day has 23 hours
    start, end = utc(2026, 3, 28, 23), utc(2026, 3, 29, 22)  # 29 March 00:00 CET .. 30 March 00:00 CEST
    assert touched(start, end, "day", "Europe/Berlin") == (datetime(2026, 3, 29), datetime(2026, 3, 29))
    # 24 hours from the same start reach 01:00 on 30 March: two local days
    assert touched(start, utc(2026, 3, 29, 23), "day", "Europe/Berlin") == (datetime(2026, 3, 29),
                                                                           datetime(2026, 3, 30))
    # autumn: 25 October 2026 has 25 hours; 00:00 CEST .. 00:00 CET is one day
    assert touched(utc(2026, 10, 24, 22), utc(2026, 10, 25, 23), "day", "Europe/Berlin") == (
        datetime(2026, 10, 25), datetime(2026, 10, 25))


def test_periods_between_steps_calendar_months():
    assert periods_between(datetime(2025, 11, 1), datetime(2026, 2, 1), "month") == [
        datetime(2025, 11, 1), datetime(2025, 12, 1), datetime(2026, 1, 1), datetime(2026, 2, 1)]


def test_w_event_counts_each_release_once_per_run_of_w_periods():
    """Kellaris et al. 2014, Def. 3: the releases touching any w consecutive periods, each once."""
    unit = Unit("object", "week", 2)
    w = [datetime(2008, 1, 7) + timedelta(weeks=i) for i in range(5)]  # Mondays
    spent = [Spend(w[0], w[0], 3.0), Spend(w[1], w[2], 4.0), Spend(w[3], w[3], 2.0)]
    assert run_spend(spent, w[0], unit) == 7.0  # weeks 0-1: the first and the one spanning 1-2
    assert run_spend(spent, w[1], unit) == 4.0  # weeks 1-2: the spanning one, once
    assert run_spend(spent, w[2], unit) == 6.0
    # a new charge on week 1 falls in the runs from week 0 and from week 1: the worst is week 0's
    assert worst_run(spent, w[1], w[1], unit) == (w[0], 7.0)
    assert worst_run(spent, w[4], w[4], unit) == (w[3], 2.0)
    # per period (w = 1): only the charges touching the period itself
    assert worst_run(spent, w[1], w[1], Unit("object", "week")) == (w[1], 4.0)


def test_the_unit_in_words_with_the_lifetime_figure():
    weekly = Unit("object", "week", 1, "Asia/Shanghai")
    text = weekly.statement(5.0, cap=10.0)
    assert text.startswith("epsilon 5 per object-week; 52 weekly releases like this one: epsilon 260 per object "
                           "over the year")
    assert "cap 10 per object-week" in text and "ISO weeks from Monday 00:00, Asia/Shanghai" in text
    assert "lifetime cap 100 per object" in weekly.statement(5.0, 10.0, 100.0)
    assert "over any 4 consecutive weeks per object (w-event)" in Unit("object", "week", 4).statement(1.0, 10.0)
    assert Unit().statement(5.0, 10.0).startswith("epsilon 5 per object; cap 10 per object. Unit of protection: "
                                                  "one object over the dataset's whole life")
    assert Unit().statement(None).startswith("No epsilon (not DP)")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"subject": "record", "period": "week"}, "needs the unit 'object'"),
    ({"w": 4}, "w-event privacy needs a period"),
    ({"period": "fortnight"}, "unknown period 'fortnight'"),
    ({"period": "week", "w": 0}, "w must be between 1 and 366"),
])
def test_a_unit_that_cannot_be_declared_is_refused_in_one_sentence(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        Unit(**kwargs)
