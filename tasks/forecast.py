"""The budget forecast of a scheduled deployment: what is left per upcoming period, and how many more scheduled
runs the caps allow (per period, per run of w periods, over the lifetime), before any of them runs.

Each scheduled run is charged what the deployment's spec costs in the dataset's unit (the mechanism's privacy
map, :func:`tasks.governance.charge_of`) on the window its spec releases. The rule is the ledger's
(``governance.budget_refusal``, sql/031) replayed in Python (:class:`Replay`; a test holds the two to the same
answers) on the ledger as it stands plus the runs simulated before, so the first refused run is the one the
ledger would refuse if nothing else were charged.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from mechanisms.registry import mechanism
from tasks import governance
from tasks.protect import parse_params
from trajpub.errors import ParameterError
from trajpub.periods import STEP, Spend, Unit, period_start, periods_between, touched, worst_run
from trajpub.spec import ReleaseSpec

YEAR = timedelta(days=365)


def run_dates(schedule, start: datetime, end: datetime) -> list[datetime]:
    """The times (aware, UTC) a Prefect schedule (cron, interval or rrule; the client's or the server's model)
    starts runs in [start, end]: Prefect's own schedule arithmetic, time zone and daylight saving included."""
    from prefect.server.schemas import schedules

    kinds = {"CronSchedule": schedules.CronSchedule, "IntervalSchedule": schedules.IntervalSchedule,
             "RRuleSchedule": schedules.RRuleSchedule}
    kind = kinds.get(type(schedule).__name__)
    if kind is None:
        raise ParameterError(f"cannot forecast a {type(schedule).__name__}", "budget show --forecast")
    server = kind.model_validate(schedule.model_dump())
    dates = asyncio.run(server.get_dates(n=1000, start=start, end=end))
    return [datetime.fromtimestamp(d.timestamp(), UTC) for d in dates]


@dataclass
class Forecast:
    """``periods``: the next upcoming periods with what is left of the cap for a charge touching each;
    ``runs``: the scheduled runs in the horizon; ``allowed``: how many of them the caps allow in a row;
    ``stopped``: the first refused run (its time and the ledger's reason), None when all fit."""

    dataset: str
    unit: Unit
    account: str
    epsilon: float | None
    cap: float | None
    lifetime_cap: float | None
    periods: list[tuple[datetime, float]] = field(default_factory=list)
    runs: list[tuple[datetime, datetime, datetime]] = field(default_factory=list)
    allowed: int = 0
    stopped: tuple[datetime, str] | None = None

    def lines(self) -> list[str]:
        """The forecast as a steward reads it."""
        if self.epsilon is None:
            return [f"{self.dataset}: the deployment's releases spend no epsilon ({self.account}); nothing caps them"]
        out = [f"{self.dataset}: each run is charged {self.account} epsilon {self.epsilon:g} per {self.unit.words}; "
               f"cap {self.cap:g} {self.unit.cap_words}"
               + (f", lifetime cap {self.lifetime_cap:g} per object" if self.lifetime_cap is not None else "")]
        for start, left in self.periods:
            out.append(f"  {self.unit.period} from {start:%Y-%m-%d}: {left:g} left")
        total = self.allowed * self.epsilon
        out.append(f"{len(self.runs)} scheduled run(s) in the next year; the caps allow {self.allowed} more"
                   + (f" ({self.allowed} runs at epsilon {self.epsilon:g} per {self.unit.words}: epsilon "
                      f"{total:g} per object over the year)" if self.allowed else ""))
        if self.stopped:
            out.append(f"the run of {self.stopped[0]:%Y-%m-%d %H:%M} UTC would be refused: {self.stopped[1]}")
        return out

    def warning(self) -> str | None:
        """One line when the schedule would hit a cap within the horizon (None otherwise)."""
        if self.stopped is None:
            return None
        return (f"warning: the schedule would hit a cap of dataset '{self.dataset}' at its run of "
                f"{self.stopped[0]:%Y-%m-%d %H:%M} UTC after {self.allowed} more run(s): {self.stopped[1]}")


def run_windows(spec: ReleaseSpec, timezone: str | None, dates: list[datetime],
                week_start: str | None = None) -> list[tuple[datetime, datetime | None, datetime | None]]:
    """(run time, window start, window end) of each scheduled run: the deployment's spec window as the flow
    resolves it at that run (a relative window in the dataset's ``timezone`` and weeks, :meth:`ReleaseSpec.resolved`;
    a fixed one as it is, a side left open staying open, which a per-period unit refuses)."""
    return [(at, (run := spec.resolved(at, timezone, week_start)).window_start, run.window_end) for at in dates]


def forecast(conn: sa.Connection, spec: dict, schedule, now: datetime, n_periods: int = 8,
             horizon: timedelta = YEAR) -> Forecast:
    """The forecast of a deployment (its default ``spec`` and its Prefect ``schedule``) from ``now``."""
    parsed = ReleaseSpec.from_dict(spec)
    unit = governance.unit_of(conn, parsed.dataset)
    # checked as a run now would be: a relative window resolved first (a mechanism may need the window's ends)
    params = parse_params(parsed.resolved(now, unit.tz, unit.week_start))
    guarantee = mechanism(parsed.mechanism).guarantee(params)
    charge = governance.charge_of(conn, parsed.dataset, guarantee)
    acc = governance.accounts(conn, parsed.dataset)[charge.account]
    epsilon = charge.epsilon if charge.bounded else None
    result = Forecast(parsed.dataset, unit, charge.account, epsilon, acc.cap, acc.lifetime_cap)
    result.runs = run_windows(parsed, unit.tz, run_dates(schedule, now, now + horizon), unit.week_start)
    if epsilon is None or acc.cap is None:
        result.allowed = len(result.runs)
        return result
    replay = Replay.read(conn, parsed.dataset, charge.account)
    if unit.period is not None:
        first = period_start(now, unit.period, unit.tz, unit.week_start)
        last = first + STEP[unit.period] * (n_periods - 1)
        result.periods = [(p, acc.cap - worst_run(replay.spent, p, p, unit)[1])
                          for p in periods_between(first, last, unit.period)]
    for at, ws, we in result.runs:
        if reason := replay.refusal(ws, we, epsilon):
            result.stopped = (at, reason)
            break
        replay.charge(ws, we, epsilon)
        result.allowed += 1
    return result


def past_periods(conn: sa.Connection, dataset: str, n_periods: int) -> list[str]:
    """What each of the last ``n_periods`` periods up to the latest one its ledger charged (or a run skipped, sql/041)
    used of a per-period dataset's capped accounts: the epsilon charged to the period (give-backs netted), the
    releases charged to it, what is left of the cap there (under w-event, over the worst run of w periods holding
    it), and the runs skipped in it for want of data, as a steward reads it; periods between charged ones are
    listed too (nothing spent)."""
    unit = governance.unit_of(conn, dataset)
    if unit.period is None:
        return [f"{dataset}: accounted per {unit.subject} over its whole life (no periods); see trajpub budget show"]
    skips = [touched(r.window_start, r.window_end, unit.period, unit.tz, unit.week_start) for r in conn.execute(
        sa.text("SELECT window_start, window_end FROM governance.skipped_runs WHERE dataset = :d"), {"d": dataset})]
    charged = conn.execute(sa.text("SELECT max(period_last) FROM governance.budget_ledger WHERE dataset = :d"),
                           {"d": dataset}).scalar_one()
    ends = [t for t in (charged, *(end for _, end in skips)) if t is not None]
    if not ends:
        return [f"{dataset}: no charge yet ({unit.describe()})"]
    last = max(ends)
    starts = periods_between(last - STEP[unit.period] * (n_periods - 1), last, unit.period)
    out = [f"{dataset}: {unit.describe()}"]
    for account, acc in governance.accounts(conn, dataset).items():
        if acc.cap is None:
            continue
        rows = conn.execute(sa.text(
            "SELECT release_id, entry_kind, unit_epsilon, period_first, period_last FROM governance.budget_ledger"
            " WHERE dataset = :d AND account = :a AND period_first IS NOT NULL AND unit_epsilon IS NOT NULL"),
            {"d": dataset, "a": account}).all()
        if not rows:
            out.append(f" {account}: nothing charged")
            continue
        spends = [Spend(r.period_first, r.period_last, float(r.unit_epsilon)) for r in rows]
        table = []
        for start in starts:
            on = [r for r in rows if r.period_first <= start <= r.period_last]
            charged = {r.release_id for r in on if r.entry_kind == "charge"} - {
                r.release_id for r in on if r.entry_kind == "release"}
            used = sum(float(r.unit_epsilon) for r in on)
            run = worst_run(spends, start, start, unit)[1] if unit.w > 1 else used
            table.append(f"  {unit.period} from {start:%Y-%m-%d}: epsilon {used:g} spent by "
                         f"{len(charged)} release(s)" + (f" ({', '.join(map(str, sorted(charged)))})" if charged else "")
                         + f"; {acc.cap - run:g} of the cap {acc.cap:g} {acc.cap_words} left")
        out += [f" {account}:", *table]
    skipped = [(start, n) for start in starts if (n := sum(first <= start <= end for first, end in skips))]
    if skipped:
        out.append(" runs skipped, no data in the window (nothing charged): " + ", ".join(
            f"{unit.period} from {start:%Y-%m-%d} ({n})" for start, n in skipped))
    return out


@dataclass
class Replay:
    """One capped account's ledger as a forecast (or any bill of several releases on different windows) replays
    it: the rule of ``governance.budget_refusal`` (sql/031) for epsilon, on the ledger's rows plus the charges
    simulated so far. (Delta is left to the ledger's own check at each charge.)"""

    unit: Unit
    cap: float
    lifetime_cap: float | None
    spent: list[Spend]
    lifetime: float

    @classmethod
    def read(cls, conn: sa.Connection, dataset: str, account: str) -> Replay:
        """The account as the ledger holds it now (refused for an account without a cap: heuristic)."""
        acc = governance.accounts(conn, dataset)[account]
        if acc.cap is None:
            raise ParameterError(f"the {account} account is counted, not capped: nothing to replay", "forecast")
        return cls(governance.unit_of(conn, dataset), acc.cap, acc.lifetime_cap,
                   governance.spends(conn, dataset, account), acc.spent)

    def refusal(self, ws: datetime | None, we: datetime | None, epsilon: float) -> str | None:
        """Why the ledger would refuse a charge of ``epsilon`` by a release on [ws, we), or None."""
        unit, cap = self.unit, self.cap
        if unit.period is None:
            if self.lifetime + epsilon > cap + 1e-12:
                return f"only {cap - self.lifetime:g} of the cap {cap:g} per {unit.subject} left"
        else:
            if ws is None or we is None:
                return f"a release needs a window with both ends to know the {unit.period}s it reads"
            first, last = touched(ws, we, unit.period, unit.tz, unit.week_start)
            run_start, used = worst_run(self.spent, first, last, unit)
            if used + epsilon > cap + 1e-12:
                where = (f"in the {unit.period} from {run_start:%Y-%m-%d}" if unit.w == 1 else
                         f"over the {unit.w} {unit.period}s from {run_start:%Y-%m-%d} (w-event)")
                return f"only {cap - used:g} of the cap {cap:g} per {unit.words} left {where}"
        if self.lifetime_cap is not None and self.lifetime + epsilon > self.lifetime_cap + 1e-12:
            return f"only {self.lifetime_cap - self.lifetime:g} of the lifetime cap {self.lifetime_cap:g} per object left"
        return None

    def charge(self, ws: datetime | None, we: datetime | None, epsilon: float) -> None:
        """Add a simulated charge (one that :meth:`refusal` let through)."""
        if self.unit.period is not None:
            self.spent.append(Spend(*touched(ws, we, self.unit.period, self.unit.tz, self.unit.week_start), epsilon))
        self.lifetime += epsilon
