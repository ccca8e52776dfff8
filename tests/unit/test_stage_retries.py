"""Each stage task's retry policy (tasks/stages.py): only ingest and validate is retried, and only after a transient
database error; a stage that charges the budget or runs the mechanism is never run twice."""

import psycopg
import pytest
import sqlalchemy as sa
from prefect.states import Failed

from tasks import stages
from trajpub.errors import InputError, ParameterError, PolicyError, TrajpubError


def failed(exc: Exception):
    """The state Prefect's task engine hands to ``retry_condition_fn`` when the task raised ``exc``."""
    return Failed(data=exc, message=f"Task run encountered unexpected exception: {exc!r}")


def retried(task, exc: Exception) -> bool:
    """Whether Prefect would retry ``task`` (with retries left) after ``exc``: no condition means always."""
    condition = task.retry_condition_fn
    return task.retries > 0 and (condition is None or condition(task, None, failed(exc)))


TRANSIENT = [
    sa.exc.OperationalError("SELECT 1", {}, psycopg.OperationalError("server closed the connection unexpectedly")),
    psycopg.OperationalError("connection refused"),  # raised on a Dask worker reading the snapshot
    sa.exc.DBAPIError("SELECT 1", {}, psycopg.errors.AdminShutdown("terminating connection")),
]
PERMANENT = [
    TrajpubError("no trajectory is left after preparation", "prepare"),
    PolicyError("40 of 100 points failed validation", "expectation x"),
    ParameterError("bbox must be four numbers", "bbox"),
    InputError("empty dataset", "raw.points"),
    sa.exc.IntegrityError("INSERT", {}, psycopg.errors.UniqueViolation("duplicate key")),
    sa.exc.ProgrammingError("SELECT", {}, psycopg.errors.UndefinedTable("no such table")),
    ValueError("a bug"),
]


@pytest.mark.parametrize("exc", TRANSIENT, ids=lambda e: type(e).__name__)
def test_ingest_and_validate_is_retried_after_a_transient_database_error(exc):
    assert stages.ingest_and_validate.retries == 2
    assert retried(stages.ingest_and_validate, exc)


@pytest.mark.parametrize("exc", PERMANENT, ids=lambda e: type(e).__name__)
def test_ingest_and_validate_is_not_retried_after_a_refusal_or_a_permanent_error(exc):
    assert not retried(stages.ingest_and_validate, exc)


@pytest.mark.parametrize("task", [stages.plan, stages.prepare_and_protect, stages.audit_and_gate],
                         ids=lambda t: t.name)
@pytest.mark.parametrize("exc", TRANSIENT + PERMANENT, ids=lambda e: type(e).__name__)
def test_stages_that_charge_or_spend_the_budget_are_never_retried(task, exc):
    assert not retried(task, exc)


def test_a_transient_error_wrapped_in_a_trajpub_error_is_not_retried():
    """A TrajpubError is an answer (the same again), even when it tells of a database error."""
    wrapped = TrajpubError("the database did not answer", "publish")
    wrapped.__cause__ = TRANSIENT[0]
    assert not stages.transient_database_error(stages.ingest_and_validate, None, failed(wrapped))
