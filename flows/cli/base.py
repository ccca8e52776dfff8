"""What every ``trajpub`` command shares: the ``main`` group, one-sentence errors, the engines, option checks."""

from __future__ import annotations

import errno
import logging
import sys

import click

from trajpub import config

config.apply_environment()


from trajpub.errors import TrajpubError


class Cli(click.Group):
    """Errors are one sentence plus where, on stderr, with exit code 1; no traceback. An unreachable database or
    Prefect server (:mod:`flows.prefect_api`), or a full disk, is said so, with what to do."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except TrajpubError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(1)
        except Exception as exc:
            from flows import prefect_api

            if _database_unreachable(exc):
                click.secho("error: the database does not answer; start it with `trajpub db up` or check "
                            "TRAJPUB_DATABASE_URL (database)", fg="red", err=True)
            elif prefect_api.unreachable(exc):
                click.secho(f"error: {prefect_api.sentence()} (Prefect API)", fg="red", err=True)
            elif isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                click.secho(f"error: the disk is full; free some space and run the command again "
                            f"({exc.filename or 'no space left on device'})", fg="red", err=True)
            else:
                raise
            sys.exit(1)


def _database_unreachable(exc: BaseException) -> bool:
    """A refused or lost database connection (after the retries of ``tasks.db.with_retries``, where a step has
    them), as opposed to an error in a statement."""
    import psycopg
    import sqlalchemy as sa

    return isinstance(exc, sa.exc.OperationalError | psycopg.OperationalError)


class _WithoutTraceback(logging.Formatter):
    """Formats a record with another formatter, leaving out its traceback (which stays in the other handlers'
    copies: the flow run's log in the Prefect server keeps it)."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            return self.inner.format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def tracebacks_to_the_log_only() -> None:
    """Before a command runs a flow: Prefect's console handler prints its log lines without tracebacks; the
    flow run's log in the Prefect server keeps them. The CLI then says what failed in one sentence, as its last
    line: Prefect's events worker, which drains its queue at exit on a busy machine, keeps its "Still processing
    items" notices to itself."""
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()
    logging.getLogger("EventsWorker").setLevel(logging.ERROR)
    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in list(logging.root.manager.loggerDict))]
    for handler in {h for lg in loggers if isinstance(lg, logging.Logger) for h in lg.handlers}:
        if isinstance(handler, PrefectConsoleHandler) and not isinstance(handler.formatter, _WithoutTraceback):
            handler.setFormatter(_WithoutTraceback(handler.formatter))


def pipeline_engine():
    """The pipeline role's engine: loading, releases, road networks, reading governance."""
    from tasks.db import engine

    return engine()


def steward_engine(login: str):
    """The engine of a steward's login (its password from the local credentials file): the database records this
    login with what the steward decides."""
    from tasks.db import steward_engine

    return steward_engine(login)


STEWARD_OPTION = click.option("--steward", required=True, envvar="TRAJPUB_STEWARD", show_envvar=True,
                              help="Your steward login (`trajpub steward add`); the database records it.")


def valid_dataset(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A --dataset option's value is a dataset name (checked before any SQL), or absent."""
    from trajpub.spec import validate_dataset_name

    if value is not None:
        validate_dataset_name(value)
    return value


def table(rows: list[dict], columns: list[str]) -> str:
    if not rows:
        return "(none)"
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    out = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(out)


@click.group(cls=Cli)
def main() -> None:
    """trajpub: governed releases of privacy-protected trajectory data."""

