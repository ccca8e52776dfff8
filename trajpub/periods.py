"""Units of protection per period: the periods a release's window touches, w-event sums, and the unit in words.

A dataset is accounted per object over its whole life (the default), per object and period (one object-week:
releases of disjoint periods compose in parallel, since each period's data is a disjoint part of an object's
data; McSherry 2009, Thm 4), or w-event (Kellaris et al., VLDB 2014, Def. 3: the releases touching any w
consecutive periods together spend at most the cap). Periods are aligned in the dataset's time zone: days at
local midnight, weeks from 00:00 of the dataset's first day of the week (Monday, the ISO week, unless it records
another: ``governance.datasets.week_start``, sql/040), months from the 1st at 00:00 (docs/design.md, "Units of
protection per period"). The database enforces the caps with the same alignment (``governance.period_start``,
sql/031, sql/040); this module is its arithmetic for statements and forecasts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from dateutil.relativedelta import relativedelta

from trajpub.errors import ParameterError
from trajpub.window import week_day, week_start_day

PERIODS = ("day", "week", "month")
#: How many periods a year holds, for the lifetime figure stated beside a per-period unit.
PER_YEAR = {"day": 365, "week": 52, "month": 12}
ALIGNMENT = {"day": "days from local midnight", "week": "weeks from {week_start} 00:00",
             "month": "calendar months from the 1st, 00:00"}
STEP = {"day": relativedelta(days=1), "week": relativedelta(weeks=1), "month": relativedelta(months=1)}


@dataclass(frozen=True)
class Unit:
    """A dataset's unit of protection: ``subject`` ('object' or 'record'), ``period`` (None: the dataset's whole
    life), ``w`` (the w of w-event privacy; 1: per period), the time zone that aligns the periods and the first day
    of a week."""

    subject: str = "object"
    period: str | None = None
    w: int = 1
    tz: str | None = None
    week_start: str = "monday"

    def __post_init__(self) -> None:
        object.__setattr__(self, "week_start", week_day(self.week_start, "budget unit --week-starts"))
        if self.period is None and self.w != 1:
            raise ParameterError("w-event privacy needs a period (day, week or month)", "budget unit --w-event")
        if self.period is not None:
            if self.period not in PERIODS:
                raise ParameterError(f"unknown period {self.period!r}; one of {', '.join(PERIODS)}", "budget unit --period")
            if self.subject != "object":
                raise ParameterError("a per-period unit splits one object's data by period; it needs the unit "
                                     "'object'", "budget unit")
        if not 1 <= self.w <= 366:
            raise ParameterError(f"w must be between 1 and 366, got {self.w}", "budget unit --w-event")

    @property
    def words(self) -> str:
        """The unit as a charge is stated: 'object', 'record', 'object-week'."""
        return self.subject if self.period is None else f"{self.subject}-{self.period}"

    @property
    def cap_words(self) -> str:
        """What one cap bounds: 'per object', 'per object-week', 'over any 4 consecutive weeks per object'."""
        if self.period is None:
            return f"per {self.subject}"
        if self.w == 1:
            return f"per {self.words}"
        return f"over any {self.w} consecutive {self.period}s per {self.subject} (w-event)"

    def describe(self) -> str:
        """The unit in one sentence, with the alignment of its periods."""
        if self.period is None:
            return (f"one {self.subject} over the dataset's whole life"
                    + (" (a person, a vehicle: all its records together)" if self.subject == "object" else
                       " (one trajectory record; an object with several records is protected less)"))
        alignment = ("ISO weeks from Monday 00:00" if self.period == "week" and self.week_start == "monday" else
                     ALIGNMENT[self.period].format(week_start=self.week_start.capitalize()))
        head = f"one object-{self.period} (one object's records in one {self.period}; {alignment}, {self.tz or 'UTC'})"
        if self.w == 1:
            return head + f"; releases of different {self.period}s compose in parallel"
        return head + f"; w-event privacy: the releases of any {self.w} consecutive {self.period}s together"

    def statement(self, epsilon: float | None, cap: float | None = None, lifetime_cap: float | None = None) -> str:
        """A release's charge in the unit, verbatim, with the lifetime figure beside it ('epsilon 5 per
        object-week; 52 weekly releases like this one: epsilon 260 per object over the year')."""
        if epsilon is None:
            return f"No epsilon (not DP); unit of protection: {self.describe()}."
        text = f"epsilon {epsilon:g} per {self.words}"
        if self.period is not None:
            n = PER_YEAR[self.period]
            text += (f"; {n} {self.period}ly releases like this one: epsilon {n * epsilon:g} per object over the "
                     "year (sequential composition across periods)")
        if cap is not None:
            text += f"; cap {cap:g} {self.cap_words}"
        if lifetime_cap is not None:
            text += f"; lifetime cap {lifetime_cap:g} per object"
        return text + f". Unit of protection: {self.describe()}."


def local_zone(tz: str | None) -> ZoneInfo:
    return ZoneInfo(tz or "UTC")


def period_start(t: datetime, period: str, tz: str | None, week_start: str | None = None) -> datetime:
    """The start (naive local wall time) of the period holding instant ``t`` (aware) in zone ``tz``; a week
    starts on ``week_start`` (Monday when None)."""
    local = t.astimezone(local_zone(tz)).replace(tzinfo=None)
    day = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return day
    if period == "week":
        return datetime.combine(week_start_day(day.date(), week_start), day.time())
    if period == "month":
        return day.replace(day=1)
    raise ParameterError(f"unknown period {period!r}; one of {', '.join(PERIODS)}", "period")


def touched(window_start: datetime, window_end: datetime, period: str, tz: str | None,
            week_start: str | None = None) -> tuple[datetime, datetime]:
    """The first and last period (local starts) that the window [window_start, window_end) touches."""
    if not window_start < window_end:
        raise ParameterError("window_start must be before window_end", "window")
    return (period_start(window_start, period, tz, week_start),
            period_start(window_end - timedelta(microseconds=1), period, tz, week_start))


def periods_between(first: datetime, last: datetime, period: str) -> list[datetime]:
    """Every period start from ``first`` to ``last``, both included."""
    out, p = [], first
    while p <= last:
        out.append(p)
        p = p + STEP[period]
    return out


@dataclass(frozen=True)
class Spend:
    """One ledger row as the accounting reads it: its first and last period and its ε (negative: a give-back)."""

    first: datetime
    last: datetime
    epsilon: float


def run_spend(charges: Iterable[Spend], run_start: datetime, unit: Unit) -> float:
    """What the releases touching the run of ``unit.w`` periods from ``run_start`` spent, each counted once
    (Kellaris et al. 2014, Def. 3: Σ over the w periods; a release on several of them is one mechanism)."""
    run_end = run_start + STEP[unit.period] * unit.w
    return sum(c.epsilon for c in charges if c.first < run_end and c.last >= run_start)


def worst_run(charges: list[Spend], first: datetime, last: datetime, unit: Unit) -> tuple[datetime, float]:
    """The run of w consecutive periods, among those that the periods ``first``..``last`` fall in, that has spent
    the most (its start and spend): what a new charge on those periods must fit under the cap."""
    starts = periods_between(first - STEP[unit.period] * (unit.w - 1), last, unit.period)
    return max(((s, run_spend(charges, s, unit)) for s in starts), key=lambda x: (x[1], -x[0].timestamp()))

