"""Deployments: serve the release flow with a cron schedule and default parameters; backfill past windows.

The served deployment is what the Prefect UI's "Run" button (or ``run_deployment``) starts, with the default
spec or with parameters changed in the form; the schedule starts it with the defaults.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from prefect.client.schemas.schedules import CronSchedule
from prefect.schedules import Cron

from flows.release import release_flow
from tasks import db, governance
from tasks.forecast import forecast
from tasks.protect import parse_spec
from trajpub.errors import ParameterError
from trajpub.spec import read_spec_file


def serve(spec_path: Path, name: str, cron: str, timezone: str, say=print) -> None:
    """Register ``release/<name>`` with the schedule and serve its runs (blocks until interrupted); ``say`` a
    warning first when the schedule would hit a budget cap within a year (:mod:`tasks.forecast`)."""
    spec = read_spec_file(spec_path)
    parsed, _ = parse_spec(spec)  # a deployment with a broken default spec would fail at every scheduled run
    with db.engine().connect() as conn:  # and so would one whose requester is not registered
        governance.check_requester(conn, parsed.requested_by)
    try:
        schedule = Cron(cron, timezone=timezone)
    except ValueError as exc:
        raise ParameterError(f"invalid schedule: {exc}", f"--cron {cron!r} --timezone {timezone!r}") from None
    with db.engine().connect() as conn:
        found = forecast(conn, spec, CronSchedule(cron=cron, timezone=timezone), datetime.now(UTC))
    if warning := found.warning():
        say(warning)
    release_flow.serve(name=name, schedules=[schedule], parameters={"spec": spec},
                       description=f"Governed release of {spec['dataset']} ({spec_path.name})",
                       tags=["trajpub", spec["dataset"]])


def backfill_windows(start: datetime, end: datetime, every: timedelta) -> list[tuple[datetime, datetime]]:
    """Consecutive windows ``[t, t + every)`` from ``start`` up to ``end`` (the last one cut at ``end``)."""
    if not every > timedelta(0):
        raise ParameterError("the backfill step must be positive", "backfill --every")
    if not start < end:
        raise ParameterError("the backfill start must be before its end", "backfill --start/--end")
    windows, t = [], start
    while t < end:
        windows.append((t, min(t + every, end)))
        t += every
    return windows


def backfill(deployment: str, start: datetime, end: datetime, every: timedelta,
             overrides: dict | None = None) -> list[tuple[str, datetime, datetime]]:
    """Start one run of ``deployment`` (``release/<name>``) per past window, with the deployment's default spec
    and its window replaced (plus ``overrides``); returns (flow run id, window start, window end). Each run is a
    governed release of its own: validated, audited, charged to the budget and reviewed. Runs of one dataset
    compute one at a time (the flow's dataset lock)."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            spec = dict(client.read_deployment_by_name(deployment).parameters["spec"])
        except ObjectNotFound:
            raise ParameterError(f"deployment '{deployment}' does not exist", "backfill DEPLOYMENT") from None
    spec.update(overrides or {})
    started = []
    for ws, we in backfill_windows(start, end, every):
        window_spec = {**spec, "window_start": ws.isoformat(), "window_end": we.isoformat()}
        parse_spec(window_spec)  # refuse the whole backfill before starting anything
        started.append((window_spec, ws, we))
    runs = []
    for window_spec, ws, we in started:
        run = run_deployment(deployment, parameters={"spec": window_spec}, timeout=0,
                             flow_run_name=f"backfill-{ws:%Y%m%dT%H%M}", tags=["backfill"])
        runs.append((str(run.id), ws, we))
    return runs
