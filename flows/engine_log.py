"""What Prefect's engine logs when a served or pooled flow run ends in one of trajpub's own outcomes.

A flow that returns a final state carrying an error (``Blocked``, ``Refused``, ``Rejected``, a publication that
failed: :mod:`flows.release`) has ended as designed, and the Prefect UI shows that state with its one-sentence
message. The engine process that ran it (``python -m prefect.engine``, started by ``trajpub deploy`` or the
trajpub worker) still re-raises the state's error and logs it as "Engine execution exited with unexpected
exception" with a traceback, and a task that raises a trajpub error (the budget refusing a release at ``plan``)
is logged with its traceback too, into the serving log an operator reads. :func:`quiet_expected_endings` keeps
those logs to sentences: the engine's report of a :class:`~trajpub.errors.TrajpubError` is dropped (the flow's
"Finished in state ..." line just before it already says how and why the run ended), a task's keeps its line
without the traceback. Any other error keeps its traceback.
"""

from __future__ import annotations

import logging

from trajpub.errors import TrajpubError

#: The message :func:`prefect.flow_engine.run_flow` logs, on the flow run's logger, for an error its run raised.
ENGINE_MESSAGE = "Engine execution exited with unexpected exception"
#: Prefect's loggers of flow runs and of task runs.
LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


def sentence_only(record: logging.LogRecord) -> bool:
    """False (drop the record) for the engine's report of a trajpub outcome; a trajpub error's traceback taken
    off any other record; every other record as it is."""
    error = record.exc_info[1] if record.exc_info else None
    if not isinstance(error, TrajpubError):
        return True
    if record.getMessage().endswith(ENGINE_MESSAGE):
        return False
    record.exc_info, record.exc_text = None, None
    return True


def quiet_expected_endings() -> None:
    """Install :func:`sentence_only` on Prefect's flow-run and task-run loggers (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if sentence_only not in logger.filters:
            logger.addFilter(sentence_only)
