"""Resolving a release spec's relative window (:mod:`trajpub.window`) in its dataset's time zone and weeks, and
what the window holds: nothing (the run is skipped), or, for a run started by hand, the last complete window
that holds data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from trajpub.errors import ParameterError, TrajpubError
from trajpub.spec import ReleaseSpec
from trajpub.window import local_midnight, week_start_day, zone

SKIPPED = "skipped: no data in the window"


def dataset_calendar(conn: sa.Connection, dataset: str) -> tuple[str | None, str]:
    """The dataset's IANA zone (``governance.datasets.timezone``, sql/025; None: unknown, read as UTC) and the
    first day of its week (``week_start``, sql/040); refuses a dataset that has not been loaded."""
    row = conn.execute(sa.text("SELECT timezone, week_start FROM governance.datasets WHERE dataset = :d"),
                       {"d": dataset}).first()
    if row is None:
        raise TrajpubError(f"dataset '{dataset}' has not been loaded", "governance.datasets")
    return row.timezone, row.week_start


def dataset_timezone(conn: sa.Connection, dataset: str) -> str | None:
    """The dataset's IANA zone (:func:`dataset_calendar`)."""
    return dataset_calendar(conn, dataset)[0]


def resolve(engine: sa.Engine, spec: ReleaseSpec, at: datetime | None = None,
            latest_with_data: bool = False) -> ReleaseSpec:
    """``spec`` with its relative window resolved for a run at ``at`` (now when None) in the dataset's zone and
    weeks; a spec without a relative window as it is (reads nothing). ``latest_with_data`` (a run started by
    hand): a window that holds no point of the dataset moves back to the last complete window that does
    (:func:`latest_window_with_data`)."""
    if not spec.unresolved:
        return spec
    with engine.connect() as conn:
        timezone, week_start = dataset_calendar(conn, spec.dataset)
        resolved = spec.resolved(at or datetime.now(UTC), timezone, week_start)
        if latest_with_data and not holds_points(conn, resolved):
            return latest_window_with_data(conn, spec, resolved, timezone, week_start)
    return resolved


def holds_points(conn: sa.Connection, spec: ReleaseSpec) -> bool:
    """Whether the dataset has a raw point in the spec's window (both ends, or open sides)."""
    return conn.execute(sa.text(
        "SELECT EXISTS (SELECT 1 FROM raw.points WHERE dataset = :d AND (CAST(:s AS timestamptz) IS NULL OR t >= :s)"
        " AND (CAST(:e AS timestamptz) IS NULL OR t < :e))"),
        {"d": spec.dataset, "s": spec.window_start, "e": spec.window_end}).scalar_one()


def skipped(engine: sa.Engine, spec: ReleaseSpec) -> str | None:
    """Why a run of ``spec`` is skipped (:data:`SKIPPED`, with the window, in one sentence) when its window, both
    ends known, holds no point of the dataset: a week without data is not a failure, and nothing is planned or
    charged for it. None when the window holds points or has an open side (the snapshot decides then)."""
    if spec.window_start is None or spec.window_end is None:
        return None
    with engine.connect() as conn:
        if holds_points(conn, spec):
            return None
    return (f"{SKIPPED} {spec.window_start.isoformat()} to {spec.window_end.isoformat()} of dataset "
            f"'{spec.dataset}'; nothing was planned or charged")


def record_skip(engine: sa.Engine, spec: ReleaseSpec, reason: str, flow_run_id: str | None) -> None:
    """Record a skipped run (``governance.skipped_runs``, sql/041, append-only): its window, who asked and why;
    once per flow run (a retried run records nothing new)."""
    with engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO governance.skipped_runs (flow_run_id, dataset, window_start, window_end, requested_by, reason)"
            " VALUES (:f, :d, :s, :e, :r, :why) ON CONFLICT (flow_run_id) DO NOTHING"),
            {"f": flow_run_id, "d": spec.dataset, "s": spec.window_start, "e": spec.window_end,
             "r": spec.requested_by, "why": reason})


def next_boundary(t: datetime, align: str, timezone: str | None, week_start: str | None) -> datetime:
    """The first local midnight (``local_day``) or week start (``local_week``) after instant ``t``."""
    tz = zone(timezone)
    day = t.astimezone(tz).date()
    first = week_start_day(day, week_start) + timedelta(days=7) if align == "local_week" else day + timedelta(days=1)
    return local_midnight(first, tz)


def latest_window_with_data(conn: sa.Connection, spec: ReleaseSpec, empty: ReleaseSpec, timezone: str | None,
                            week_start: str | None) -> ReleaseSpec:
    """The spec's aligned window resolved for the last complete window before ``empty``'s end that holds the
    dataset's latest point before it (its record says so: ``latest_with_data``); refuses in one sentence when
    the dataset has no point before that end, or the window is not aligned to days or weeks."""
    latest = conn.execute(sa.text("SELECT max(t) FROM raw.points WHERE dataset = :d AND t < :e"),
                          {"d": spec.dataset, "e": empty.window_end}).scalar_one()
    where = f"window of dataset {spec.dataset}"
    if latest is None:
        raise ParameterError(f"dataset '{spec.dataset}' has no points before {empty.window_end.isoformat()}: "
                             "there is no complete window to release", where)
    relative = spec.relative_window
    if relative.align == "none":
        raise ParameterError(f"the window {empty.window_start.isoformat()} to {empty.window_end.isoformat()} holds no "
                             f"points of dataset '{spec.dataset}' (its latest point before it is at "
                             f"{latest.astimezone(UTC).isoformat()}); give window_start and window_end, or align "
                             "the window to local_day or local_week", where)
    at = next_boundary(latest, relative.align, timezone, relative.week_starts or week_start)
    found = spec.resolved(at, timezone, week_start)
    return ReleaseSpec.from_dict({**found.to_record(), "window": {**found.window, "latest_with_data": True},
                                  "seed": spec.seed})


def run_time() -> datetime:
    """The time a flow run resolves its window at: its expected start (a scheduled run's scheduled time, a
    backfilled run's date, the creation time of a manual run); now outside a flow run."""
    from prefect.runtime import flow_run

    return datetime.fromtimestamp(flow_run.scheduled_start_time.timestamp(), UTC)


def started_by_hand() -> bool:
    """Whether this flow run was started by a person (the UI's Run, the API, ``release run``), not by its
    deployment's schedule or a backfill (tagged ``backfill``, :func:`flows.deploy.run_backfill`): a run by hand
    releases the last complete window with data instead of an empty one."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    run = ctx.flow_run if ctx else None
    return run is None or not (run.auto_scheduled or "backfill" in run.tags)


def parse_resolved(engine: sa.Engine, data: dict | ReleaseSpec, at: datetime | None = None,
                   latest_with_data: bool = False):
    """A release spec's mapping (or spec) checked as a run at ``at`` (now when None) would check it: parsed, its
    relative window resolved in the dataset's zone and weeks (:func:`resolve`), then the mechanism's parameters
    and their fit to the spec's public inputs (:func:`tasks.protect.parse_params`); returns (spec, parameters)."""
    from tasks import protect

    spec = resolve(engine, data if isinstance(data, ReleaseSpec) else ReleaseSpec.from_dict(data), at,
                   latest_with_data)
    return spec, protect.parse_params(spec)
