"""Transient database errors are retried (whole transactions), permanent ones are not."""

import psycopg
import pytest
import sqlalchemy as sa

from tasks.db import is_transient, with_retries
from trajpub.errors import TrajpubError


def dbapi_error(orig: Exception) -> sa.exc.DBAPIError:
    return sa.exc.DBAPIError("SELECT 1", {}, orig)


class Flaky:
    """Fails ``failures`` times with ``error``, then returns 42."""

    def __init__(self, failures: int, error: Exception):
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return 42


@pytest.mark.parametrize("error", [
    dbapi_error(psycopg.OperationalError("connection refused")),
    dbapi_error(psycopg.errors.AdminShutdown("terminating connection due to administrator command")),
    dbapi_error(psycopg.errors.SerializationFailure("could not serialize access")),
    dbapi_error(psycopg.errors.DeadlockDetected("deadlock detected")),
])
def test_transient_errors_are_retried_until_the_call_succeeds(error):
    assert is_transient(error)
    flaky = Flaky(3, error)
    assert with_retries(flaky, "test", first_delay_s=0.0) == 42 and flaky.calls == 4


@pytest.mark.parametrize("error", [
    dbapi_error(psycopg.errors.UniqueViolation("duplicate key")),
    dbapi_error(psycopg.errors.InsufficientPrivilege("permission denied")),
    dbapi_error(psycopg.errors.SyntaxError("syntax error")),
    dbapi_error(psycopg.errors.QueryCanceled("canceling statement due to statement timeout")),
    ValueError("not a database error"),
])
def test_permanent_errors_are_raised_at_once(error):
    assert not is_transient(error)
    flaky = Flaky(1, error)
    with pytest.raises(type(error)):
        with_retries(flaky, "test", first_delay_s=0.0)
    assert flaky.calls == 1


def test_a_transient_error_that_lasts_is_raised_after_the_last_attempt():
    error = dbapi_error(psycopg.OperationalError("connection refused"))
    flaky = Flaky(100, error)
    with pytest.raises(sa.exc.DBAPIError):
        with_retries(flaky, "test", attempts=4, first_delay_s=0.0)
    assert flaky.calls == 4


@pytest.mark.parametrize(("setting", "calls"), [(None, 6), ("0", 1), ("2", 3)])
def test_the_operator_sets_how_often_a_transaction_is_retried(monkeypatch, setting, calls):
    if setting is None:
        monkeypatch.delenv("TRAJPUB_DB_RETRIES", raising=False)
    else:
        monkeypatch.setenv("TRAJPUB_DB_RETRIES", setting)
    flaky = Flaky(100, dbapi_error(psycopg.OperationalError("connection refused")))
    with pytest.raises(sa.exc.DBAPIError):
        with_retries(flaky, "test", first_delay_s=0.0)
    assert flaky.calls == calls


@pytest.mark.parametrize("setting", ["-1", "many", "1.5"])
def test_a_retry_setting_that_is_not_a_count_is_one_sentence(monkeypatch, setting):
    monkeypatch.setenv("TRAJPUB_DB_RETRIES", setting)
    with pytest.raises(TrajpubError, match="TRAJPUB_DB_RETRIES must be a whole number of retries"):
        with_retries(lambda: 42, "test")
