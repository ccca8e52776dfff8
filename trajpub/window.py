"""Relative release windows: ``window: {last: 7d, align: local_week}`` in a spec, resolved when a run starts.

A scheduled release of "the last week" cannot carry fixed dates. A relative window names a length and how its end
is aligned, and is resolved at the run's time ``at`` (a scheduled run's expected start, a backfill's date, now for
a manual run) in the dataset's time zone (``governance.datasets.timezone``, sql/025; UTC when unknown) to the
absolute ``[start, end)`` the snapshot reads and the release records (docs/design.md, "Relative windows"):

- ``align: none``: ``end = at``, ``start = at - last`` (an exact duration);
- ``align: local_day``: ``end`` is the local midnight at or before ``at`` (the day of ``at`` is not over yet),
  ``start`` the local midnight ``last`` days earlier;
- ``align: local_week``: ``end`` is the local start of the week (00:00 of its first day) at or before ``at``,
  ``start`` ``last`` days earlier. The week's first day is the window's ``week_starts`` (``{last: 7d, align:
  local_week, week_starts: sunday}``), else its dataset's (``governance.datasets.week_start``, sql/040), else
  Monday.

Aligned windows count local calendar days, so a day of a daylight-saving change lasts 23 or 25 hours; a local
midnight that does not exist (a change at midnight) is read as the first instant of that day.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from trajpub.errors import ParameterError

ALIGNMENTS = ("local_week", "local_day", "none")
#: What a resolved window records beside its relative form: when, in which zone, and whether a run started by hand
#: moved back to the last complete window with data (tasks/windows.py).
RESOLUTION_KEYS = ("resolved_at", "timezone", "latest_with_data")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")  # date.weekday() order
DURATION = re.compile(r"([1-9][0-9]{0,4})([wdh])")
UNIT_WORDS = {"w": "week", "d": "day", "h": "hour"}


def parse_duration(text: Any, where: str) -> timedelta:
    """``Nw``, ``Nd`` or ``Nh`` (N a positive whole number) as a duration."""
    m = DURATION.fullmatch(text) if isinstance(text, str) else None
    if not m:
        raise ParameterError(f"a duration must look like 7d, 2w or 6h, got {str(text)[:40]!r}", where)
    n, unit = int(m.group(1)), m.group(2)
    return timedelta(weeks=n) if unit == "w" else timedelta(days=n) if unit == "d" else timedelta(hours=n)


def duration_text(d: timedelta) -> str:
    """The shortest ``Nd`` or ``Nh`` of a whole number of hours (``7d``, ``36h``)."""
    hours = int(d.total_seconds() // 3600)
    return f"{hours // 24}d" if hours % 24 == 0 else f"{hours}h"


def zone(name: str | None, where: str = "governance.datasets.timezone") -> ZoneInfo:
    """The IANA zone ``name`` (UTC when None)."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ParameterError(f"{name!r} is not an IANA time zone", where) from None


def week_day(name: Any, where: str) -> str:
    """A week's first day by name (``sunday``; any case), refused in one sentence otherwise."""
    day = name.lower() if isinstance(name, str) else None
    if day not in WEEKDAYS:
        raise ParameterError(f"a week starts on one of {', '.join(WEEKDAYS)}, got {str(name)[:40]!r}", where)
    return day


def week_start_day(day: date, first: str | None) -> date:
    """The first day (``first``, Monday when None) of the week holding local ``day``."""
    return day - timedelta(days=(day.weekday() - WEEKDAYS.index(first or "monday")) % 7)


def local_midnight(day: date, tz: ZoneInfo) -> datetime:
    """The first instant of local ``day`` in ``tz``, in UTC (a midnight skipped by a clock change: the instant
    after the gap, which is what fold 0 gives for a time in a gap)."""
    return datetime.combine(day, time(0), tzinfo=tz).astimezone(UTC)


@dataclass(frozen=True)
class RelativeWindow:
    """The last ``last`` (a duration) up to the run's time, its end aligned as ``align`` says (module docstring);
    ``week_starts``: a ``local_week`` window's first day of the week (None: its dataset's)."""

    last: timedelta
    align: str = "none"
    week_starts: str | None = None

    def __post_init__(self) -> None:
        if self.align not in ALIGNMENTS:
            raise ParameterError(f"align must be one of {', '.join(ALIGNMENTS)}, got {str(self.align)[:40]!r}",
                                 "window.align")
        if not self.last > timedelta(0):
            raise ParameterError("window.last must be positive", "window.last")
        if self.align != "none" and self.last % timedelta(days=1):
            raise ParameterError(f"a window aligned to {self.align.removeprefix('local_')}s lasts whole days, got "
                                 f"{duration_text(self.last)}", "window.last")
        if self.week_starts is not None and self.align != "local_week":
            raise ParameterError("week_starts goes with align: local_week", "window.week_starts")

    @classmethod
    def parse(cls, value: Any, where: str = "window") -> RelativeWindow:
        """From a spec's ``{last: 7d, align: local_week, week_starts: sunday}`` (``align`` defaults to ``none``,
        ``week_starts`` to the dataset's); the keys a resolved window records beside them are left out."""
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in RESOLUTION_KEYS}
        if not isinstance(value, dict) or "last" not in value or set(value) - {"last", "align", "week_starts"}:
            raise ParameterError("a relative window is a mapping {last: DURATION, align: local_week|local_day|none, "
                                 f"week_starts: DAY (local_week only)}}, got {str(value)[:80]!r}", where)
        first = value.get("week_starts")
        return cls(parse_duration(value["last"], f"{where}.last"), value.get("align", "none"),
                   None if first is None else week_day(first, f"{where}.week_starts"))

    def to_dict(self) -> dict:
        out = {"last": duration_text(self.last), "align": self.align}
        return out if self.week_starts is None else {**out, "week_starts": self.week_starts}

    def with_week_start(self, first: str | None) -> RelativeWindow:
        """A ``local_week`` window with its first day of the week settled: its own, else ``first`` (the
        dataset's), else Monday; any other window as it is."""
        if self.align != "local_week" or self.week_starts is not None:
            return self
        return RelativeWindow(self.last, self.align, first or "monday")

    def resolve(self, at: datetime, timezone: str | None) -> tuple[datetime, datetime]:
        """The absolute ``[start, end)`` (UTC) of this window for a run at ``at`` (aware) in ``timezone`` (a week
        without ``week_starts`` starts on Monday: :meth:`with_week_start` settles it first)."""
        if at.tzinfo is None:
            raise ValueError("the run's time must be timezone-aware")
        if self.align == "none":
            end = at.astimezone(UTC)
            return end - self.last, end
        tz = zone(timezone)
        day = at.astimezone(tz).date()
        if self.align == "local_week":
            day = week_start_day(day, self.week_starts)
        return local_midnight(day - timedelta(days=self.last.days), tz), local_midnight(day, tz)

    def describe(self, timezone: str | None) -> str:
        """In words: ``the last 7 days up to the local Monday 00:00 (Asia/Shanghai)``."""
        n, unit = duration_text(self.last)[:-1], UNIT_WORDS[duration_text(self.last)[-1]]
        length = f"the last {n} {unit}{'s' if n != '1' else ''}"
        if self.align == "none":
            return f"{length} up to the run's time"
        end = f"{(self.week_starts or 'monday').capitalize()} 00:00" if self.align == "local_week" else "midnight"
        return f"{length} up to the local {end} at or before the run's time ({timezone or 'UTC'})"


def window_words(start: datetime | None, end: datetime | None, record: dict | None) -> str:
    """A release's window as its review states it: the absolute ``[start, end)``, and for a relative window
    (``record``: the spec's ``window`` as :meth:`trajpub.spec.ReleaseSpec.resolved` keeps it) how it was
    resolved."""
    span = f"{start.isoformat() if start else 'open'} to {end.isoformat() if end else 'open'} (end excluded)"
    if not record:
        return span
    relative = RelativeWindow.parse(record)
    moved = (", the last complete window with data before the run (the run's own window held none)"
             if record.get("latest_with_data") else "")
    return (f"{span}: {relative.describe(record.get('timezone'))}{moved}, resolved for a run at "
            f"{record.get('resolved_at', '(not resolved)')}")


@dataclass(frozen=True)
class ReleaseWindow:
    """A release's absolute window ``[start, end)`` (UTC) and its dataset's IANA zone: a public input of a
    synthesizer, which places its timestamps inside it (:class:`trajpub.mechanism.PublicInputs`)."""

    start: datetime
    end: datetime
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        if not self.start < self.end:
            raise ParameterError("the window's start must be before its end", "window")
        zone(self.timezone)

    def local_days(self) -> list[date]:
        """The local dates (in :attr:`timezone`) the window touches, in order."""
        tz = zone(self.timezone)
        first = self.start.astimezone(tz).date()
        last = (self.end - timedelta(microseconds=1)).astimezone(tz).date()
        return [first + timedelta(days=i) for i in range((last - first).days + 1)]
