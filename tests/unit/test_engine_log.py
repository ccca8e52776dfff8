"""The serving log keeps tracebacks for errors only: Prefect's engine report of a run that ended in one of
trajpub's own final states (Blocked, Refused, Rejected: a TrajpubError as the state's data) is dropped
(flows/engine_log.py); the same report of any other error, and every other record, passes."""

from __future__ import annotations

import logging
import sys

from flows.engine_log import ENGINE_MESSAGE, expected_ending, quiet_expected_endings
from trajpub.errors import ReleaseBlocked


def record(message: str, error: BaseException | None) -> logging.LogRecord:
    exc_info = None
    if error is not None:
        try:
            raise error
        except BaseException:  # noqa: BLE001 (the record carries what the engine caught)
            exc_info = sys.exc_info()
    return logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1, message, None, exc_info)


def test_only_the_engines_report_of_a_trajpub_outcome_is_dropped():
    assert not expected_ending(record(ENGINE_MESSAGE, ReleaseBlocked("release 7 is blocked by the audit gate")))
    assert expected_ending(record(ENGINE_MESSAGE, RuntimeError("a real error")))
    assert expected_ending(record("release 7 is blocked", ReleaseBlocked("release 7 is blocked")))
    assert expected_ending(record(ENGINE_MESSAGE, None))


def test_the_filter_is_installed_once_on_the_flow_run_logger(caplog):
    logger = logging.getLogger("prefect.flow_runs")
    quiet_expected_endings()
    quiet_expected_endings()
    assert logger.filters.count(expected_ending) == 1
    with caplog.at_level(logging.ERROR, logger="prefect.flow_runs"):
        logger.handle(record(ENGINE_MESSAGE, ReleaseBlocked("blocked")))
        logger.handle(record(ENGINE_MESSAGE, RuntimeError("boom")))
    assert [r.exc_info[1].args[0] for r in caplog.records] == ["boom"]
