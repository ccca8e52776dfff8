"""Resolving a release spec's relative window (:mod:`trajpub.window`) in its dataset's time zone."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from trajpub.errors import TrajpubError
from trajpub.spec import ReleaseSpec


def dataset_timezone(conn: sa.Connection, dataset: str) -> str | None:
    """The dataset's IANA zone (``governance.datasets.timezone``, sql/025; None: unknown, read as UTC); refuses a
    dataset that has not been loaded."""
    row = conn.execute(sa.text("SELECT timezone FROM governance.datasets WHERE dataset = :d"), {"d": dataset}).first()
    if row is None:
        raise TrajpubError(f"dataset '{dataset}' has not been loaded", "governance.datasets")
    return row.timezone


def resolve(engine: sa.Engine, spec: ReleaseSpec, at: datetime | None = None) -> ReleaseSpec:
    """``spec`` with its relative window resolved for a run at ``at`` (now when None) in the dataset's zone; a
    spec without a relative window as it is (reads nothing)."""
    if not spec.unresolved:
        return spec
    with engine.connect() as conn:
        zone = dataset_timezone(conn, spec.dataset)
    return spec.resolved(at or datetime.now(UTC), zone)


def run_time() -> datetime:
    """The time a flow run resolves its window at: its expected start (a scheduled run's scheduled time, a
    backfilled run's date, the creation time of a manual run); now outside a flow run."""
    from prefect.runtime import flow_run

    return datetime.fromtimestamp(flow_run.scheduled_start_time.timestamp(), UTC)


def parse_resolved(engine: sa.Engine, data: dict | ReleaseSpec, at: datetime | None = None):
    """A release spec's mapping (or spec) checked as a run at ``at`` (now when None) would check it: parsed, its
    relative window resolved in the dataset's zone, then the mechanism's parameters and their fit to the spec's
    public inputs (:func:`tasks.protect.parse_params`); returns (spec, parameters)."""
    from tasks import protect

    spec = resolve(engine, data if isinstance(data, ReleaseSpec) else ReleaseSpec.from_dict(data), at)
    return spec, protect.parse_params(spec)
