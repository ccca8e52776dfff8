"""What Prefect's engine logs when a served or pooled flow run ends in one of trajpub's own final states.

A flow that returns a final state carrying an error (``Blocked``, ``Refused``, ``Rejected``, a publication that
failed: :mod:`flows.release`) has ended as designed, and the Prefect UI shows that state with its one-sentence
message. The engine process that ran it (``python -m prefect.engine``, started by ``trajpub deploy`` or the
trajpub worker) still re-raises the state's error and logs it as "Engine execution exited with unexpected
exception" with a traceback, into the serving log an operator reads. :func:`quiet_expected_endings` drops that
record when the error is a :class:`~trajpub.errors.TrajpubError` (the flow's "Finished in state ..." line just
before it already says how and why the run ended); any other error keeps its traceback.
"""

from __future__ import annotations

import logging

from trajpub.errors import TrajpubError

#: The message :func:`prefect.flow_engine.run_flow` logs, on the flow run's logger, for an error its run raised.
ENGINE_MESSAGE = "Engine execution exited with unexpected exception"


def expected_ending(record: logging.LogRecord) -> bool:
    """False (drop the record) for the engine's report of a trajpub outcome; True for every other record."""
    error = record.exc_info[1] if record.exc_info else None
    return not (record.getMessage().endswith(ENGINE_MESSAGE) and isinstance(error, TrajpubError))


def quiet_expected_endings() -> None:
    """Install :func:`expected_ending` on Prefect's flow-run logger (idempotent)."""
    logger = logging.getLogger("prefect.flow_runs")
    if expected_ending not in logger.filters:
        logger.addFilter(expected_ending)
