"""Errors that tell the user what went wrong and where (file, line, column, expectation, table)."""

from __future__ import annotations


class TrajpubError(Exception):
    """One clear sentence, plus where it happened.

    ``where`` names the place: ``"file tdrive.csv, line 12, column latitude"``,
    ``"expectation expect_column_values_to_be_between(lat)"``, ``"table raw.points"``.
    """

    def __init__(self, message: str, where: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.message} ({self.where})" if self.where else self.message


class ParameterError(TrajpubError, ValueError):
    """An unknown or out-of-range parameter in a release spec or a mechanism's parameters."""


class InputError(TrajpubError):
    """Input data that cannot be used: malformed file, empty dataset, wrong SRID."""


class PolicyError(TrajpubError):
    """A governance policy refused the action: budget cap, quarantine share, gate threshold."""


class ReleaseBlocked(PolicyError):
    """A release that ran to its audit and was stopped there: blocked by the gate, or with nothing to audit (the
    mechanism released nothing), or a comparison none of whose candidates passed. Nothing is published. The flow
    run ends in a Prefect state named ``Blocked`` (of type Failed) carrying this error, and ``trajpub release
    run|compare`` exits with :attr:`EXIT_CODE` after printing ``outcome`` (what the flow would have returned)."""

    EXIT_CODE = 3

    def __init__(self, message: str, outcome: dict | None = None):
        super().__init__(message)
        self.outcome = outcome or {}


class ReleaseRejected(TrajpubError):
    """A release the steward rejected: nothing is published, as the steward decided. The flow run ends in a
    Prefect state named ``Rejected`` (of type Cancelled: not a success, not an error) carrying this error, and
    ``trajpub release run --wait`` prints ``outcome`` and exits 0 (the release reached its steward)."""

    def __init__(self, message: str, outcome: dict | None = None):
        super().__init__(message)
        self.outcome = outcome or {}


class PublicationFailed(TrajpubError):
    """An approved (or picked) release that could not be published for a permanent reason (the database refused
    it: the candidate changed since it was sealed): nothing is published and the release is failed. The flow run
    ends Failed carrying this error, with ``outcome`` (what the flow would have returned) for the caller."""

    def __init__(self, message: str, outcome: dict | None = None):
        super().__init__(message, "publish")
        self.outcome = outcome or {}


def one_line(exc: BaseException) -> str:
    """The first line of an error: a database error's own message (SQLAlchemy's ``orig``), without the statement
    and the hint lines the server adds; the error's type when it says nothing."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
