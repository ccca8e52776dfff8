"""The serving log keeps tracebacks for errors only (flows/engine_log.py): Prefect's engine report of a run that
ended in one of trajpub's own final states (Blocked, Refused, Rejected: a TrajpubError as the state's data) is
dropped, a task's report of a trajpub error keeps its line without the traceback, and any other error keeps its
traceback."""

from __future__ import annotations

import logging
import sys

from flows.engine_log import ENGINE_MESSAGE, LOGGERS, quiet_expected_endings, sentence_only
from trajpub.errors import PolicyError, ReleaseBlocked


def record(message: str, error: BaseException | None) -> logging.LogRecord:
    exc_info = None
    if error is not None:
        try:
            raise error
        except BaseException:  # noqa: BLE001 (the record carries what the engine caught)
            exc_info = sys.exc_info()
    return logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1, message, None, exc_info)


def test_the_engines_report_of_a_trajpub_outcome_is_dropped_and_a_tasks_loses_its_traceback():
    assert not sentence_only(record(ENGINE_MESSAGE, ReleaseBlocked("release 7 is blocked by the audit gate")))
    task = record("Task run failed with exception: PolicyError('over the cap')", PolicyError("over the cap"))
    assert sentence_only(task) and task.exc_info is None
    other = record(ENGINE_MESSAGE, RuntimeError("a real error"))
    assert sentence_only(other) and other.exc_info is not None
    assert sentence_only(record("Finished in state Completed()", None))


def test_the_filter_is_installed_once_on_prefects_run_loggers(caplog):
    quiet_expected_endings()
    quiet_expected_endings()
    assert [logging.getLogger(name).filters.count(sentence_only) for name in LOGGERS] == [1, 1]
    logger = logging.getLogger("tests.engine_log")  # the same filter, on a logger with no API handler
    logger.addFilter(sentence_only)
    with caplog.at_level(logging.ERROR, logger="tests.engine_log"):
        for rec in (record(ENGINE_MESSAGE, ReleaseBlocked("blocked")), record(ENGINE_MESSAGE, RuntimeError("boom")),
                    record("Task run failed", PolicyError("refused"))):
            logger.handle(rec)
    assert [(r.getMessage(), r.exc_info is not None) for r in caplog.records] == [
        (ENGINE_MESSAGE, True), ("Task run failed", False)]
