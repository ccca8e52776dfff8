"""Deployments: serve the release flow with a cron schedule and default parameters; backfill past windows.

The served deployment is what the Prefect UI's "Run" button (or ``run_deployment``) starts, with the default
spec or with parameters changed in the form; the schedule starts it with the defaults.

A backfill replays the schedule for past dates (docs/operations.md, "Backfill"): every date's window is resolved
and the whole backfill priced as one bill before anything starts (:func:`plan_backfill`, refused over a cap with
nothing started and no data read), then the windows run one after another (:func:`run_backfill`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prefect.client.schemas.schedules import CronSchedule
from prefect.schedules import Cron
from pydantic import ValidationError

from flows.release import release_flow
from mechanisms import registry
from tasks import compare, db, governance, policies, public_inputs, windows
from tasks.forecast import forecast
from trajpub.errors import ParameterError, TrajpubError
from trajpub.spec import ReleaseSpec, read_spec_file
from trajpub.window import duration_text, zone


def serve(spec_path: Path, name: str, cron: str, timezone: str, say=print) -> None:
    """Register ``release/<name>`` with the schedule and serve its runs (blocks until interrupted); ``say`` a
    warning first when the schedule would hit a budget cap within a year (:mod:`tasks.forecast`)."""
    spec = read_spec_file(spec_path)
    # a deployment with a broken default spec would fail at every scheduled run (checked as a run now would be)
    parsed, _ = windows.parse_resolved(db.engine(), spec)
    # and so would one whose requester is not registered
    db.transaction(lambda conn: governance.check_requester(conn, parsed.requested_by), "check the requester")
    try:  # Cron takes any time zone; CronSchedule checks it (an unknown one was a traceback)
        schedule, cron_schedule = Cron(cron, timezone=timezone), CronSchedule(cron=cron, timezone=timezone)
    except ValueError as exc:
        said = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise ParameterError(f"invalid schedule: {said}", f"--cron {cron!r} --timezone {timezone!r}") from None
    found = db.transaction(lambda conn: forecast(conn, spec, cron_schedule, datetime.now(UTC)),
                           "forecast the budget")
    if warning := found.warning():
        say(warning)
    say(f"serving deployment release/{name} ({cron}, {timezone}); Ctrl-C to stop")
    release_flow.serve(name=name, schedules=[schedule], parameters={"spec": spec},
                       description=f"Governed release of {spec['dataset']} ({spec_path.name})",
                       tags=["trajpub", spec["dataset"]])


def local_time(text: str, timezone: str | None, where: str) -> datetime:
    """An ISO date or time; without an offset, a local time of the dataset's zone."""
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise ParameterError(f"{text!r} is not an ISO date or time", where) from None
    return t.replace(tzinfo=zone(timezone)) if t.tzinfo is None else t


def backfill_times(start: datetime, end: datetime, every: timedelta) -> list[datetime]:
    """The run times of a backfill from ``start`` to ``end`` (aware): the end of each step ``[t, t + every)``, as
    the schedule would have run just after it. A step of whole days counts local calendar days (``start``'s zone:
    a day of a clock change is still one day); ``end - start`` must be a whole number of steps."""
    if not every > timedelta(0):
        raise ParameterError("the backfill step must be positive", "backfill --every")
    if not start < end:
        raise ParameterError("the backfill start must be before its end", "backfill --start/--end")
    whole_days = every % timedelta(days=1) == timedelta(0)
    times, t = [], start
    while t < end:
        # aware arithmetic within one zone is wall-clock arithmetic: local days; exact hours in UTC
        t = t + every if whole_days else (t.astimezone(UTC) + every).astimezone(start.tzinfo)
        times.append(t)
    if t != end:
        raise ParameterError(f"from {start.isoformat()} to {end.isoformat()} is not a whole number of "
                             f"{duration_text(every)} steps", "backfill --start/--end/--every")
    return times


def backfill_spec(spec: dict, every: timedelta) -> dict:
    """The spec each backfilled run gets: the deployment's relative window as it is; a fixed window (or none)
    replaced by one step, ``{last: EVERY, align: local_day}`` (``none`` for a step of hours)."""
    if spec.get("window") is not None:
        return spec
    align = "local_day" if every % timedelta(days=1) == timedelta(0) else "none"
    out = {k: v for k, v in spec.items() if k not in ("window_start", "window_end")}
    return {**out, "window": {"last": duration_text(every), "align": align}}


@dataclass(frozen=True)
class Backfill:
    """A priced backfill: the deployment, the spec every run gets, each run's time with its resolved release, the
    bill of those whose window holds data (:class:`tasks.compare.Bill`; None when none does) and the labels of the
    windows without data, which their runs skip (:func:`tasks.windows.skipped`: nothing planned or charged)."""

    deployment: str
    spec: dict
    runs: list[tuple[datetime, compare.Planned]]
    bill: compare.Bill | None
    empty: frozenset[str] = frozenset()

    def lines(self) -> list[str]:
        """The bill as the steward reads it before confirming, a line per window without data."""
        billed = self.bill.lines() if self.bill else []
        charges, totals = iter(billed[:len(self.runs) - len(self.empty)]), billed[len(self.runs) - len(self.empty):]
        return [f"- {p.label}: no data in the window; its run is skipped, charged nothing" if p.label in self.empty
                else next(charges) for _, p in self.runs] + totals


def plan_backfill(deployment: str, start: str, end: str, every: timedelta, overrides: dict | None = None) -> Backfill:
    """Resolve the window of every past run time (:func:`backfill_times`; dates without an offset in the dataset's
    zone) and price all of them as one bill against the budget; refuses (one sentence, nothing started, no data
    read) a bad spec, a date not yet past, two dates of the same window, a stricter gate policy than allowed, an
    unregistered requester, and a backfill whose windows would together pass a cap."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            spec = dict(client.read_deployment_by_name(deployment).parameters["spec"])
        except ObjectNotFound:
            raise ParameterError(f"deployment '{deployment}' does not exist", "backfill DEPLOYMENT") from None
    spec = backfill_spec({**spec, **(overrides or {})}, every)
    first = ReleaseSpec.from_dict(spec)
    eng = db.engine()
    timezone, _ = db.transaction(lambda conn: (windows.dataset_timezone(conn, first.dataset),
                                               governance.check_requester(conn, first.requested_by)),
                                 "read the dataset's time zone", eng)
    times = backfill_times(local_time(start, timezone, "backfill --start"), local_time(end, timezone, "backfill --end"),
                           every)
    if times[-1] > datetime.now(UTC):
        raise ParameterError(f"the backfill's last run time {times[-1].isoformat()} is not past yet; the schedule "
                             "runs it", "backfill --end")
    runs, seen = [], {}
    for at in times:
        resolved, params = windows.parse_resolved(eng, first, at)
        window = (resolved.window_start, resolved.window_end)
        if window in seen:
            raise ParameterError(f"the run times {seen[window].isoformat()} and {at.isoformat()} resolve to the same "
                                 f"window {window[0].isoformat()} to {window[1].isoformat()}; make --every at least "
                                 f"the window's {first.window['last']}", "backfill --every")
        seen[window] = at
        mech = registry.mechanism(resolved.mechanism)
        params, inputs = public_inputs.resolve(eng, mech, params, resolved.grid, resolved)
        label = " to ".join(t.astimezone(zone(timezone)).isoformat() for t in window)  # the dataset's local times
        runs.append((at, compare.Planned(label, resolved, mech, params, inputs)))
    policies.check(runs[0][1].spec)
    empty = db.transaction(lambda conn: frozenset(p.label for _, p in runs if not windows.holds_points(conn, p.spec)),
                           "find the windows without data", eng)
    charged = [p for _, p in runs if p.label not in empty]
    bill = charged and db.transaction(lambda conn: compare.bill(conn, charged, item="window"), "price the backfill",
                                      eng)
    return Backfill(deployment, spec, runs, bill or None, empty)


def run_backfill(plan: Backfill, say: Callable[[str], None], timeout_s: float = 3600.0) -> list[dict]:
    """Start the priced windows one at a time, oldest first, each a governed release of the deployment at its run
    time (its expected start, at which the flow resolves the same window); the next starts when the previous has
    reached the steward or ended (its flow run paused for the steward, or final). Returns one outcome per window
    started: run time, flow run id, release id and status (None when refused before a release existed; then the
    flow run's state name: ``skipped`` for a window without data), and the flow run's state message. Refuses (one sentence) when a run does not get there within ``timeout_s``: the
    windows after it are not started."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    outcomes = []
    for at, planned in plan.runs:
        run = run_deployment(plan.deployment, parameters={"spec": plan.spec}, scheduled_time=at, timeout=0,
                             flow_run_name=f"backfill-{at.astimezone(UTC):%Y%m%dT%H%M}", tags=["backfill"])
        say(f"window {planned.label}: flow run {run.id} started")
        deadline = time.monotonic() + timeout_s
        with get_client(sync_client=True) as client:
            while True:
                state = client.read_flow_run(run.id).state
                if state is not None and (state.is_final() or state.is_paused()):
                    break
                if time.monotonic() > deadline:
                    raise TrajpubError(f"flow run {run.id} (window {planned.label}) did not reach the steward within "
                                       f"{timeout_s:g} s (is a worker polling the deployment's pool?); the later "
                                       "windows were not started", "backfill")
                time.sleep(2)
        release = db.transaction(lambda conn, run_id=str(run.id): governance.release_of_flow_run(conn, run_id),
                                 "find the window's release")
        outcomes.append({"at": at, "window": planned.label, "flow_run_id": str(run.id),
                         "release_id": release["release_id"] if release else None,
                         "status": release["status"] if release else state.name.lower(), "message": state.message})
    return outcomes
