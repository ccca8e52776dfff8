"""``trajpub db``, ``trajpub server`` and ``trajpub env``: the PostGIS cluster and the Prefect server this checkout
runs, and how Prefect's own commands find them."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable

import click

from flows import services
from flows.cli.base import main, pipeline_engine
from trajpub.errors import TrajpubError


def up_and_down(group: click.Group, up: Callable[[], str], down: Callable[[], str]) -> click.Group:
    """``group``'s ``up`` and ``down`` commands: start or stop the service, and say what was done."""
    group.command("up")(lambda: click.echo(up()))
    group.command("down")(lambda: click.echo(down()))
    return group


@main.group()
def db() -> None:
    """The PostGIS database: a project-local cluster unless TRAJPUB_DATABASE_URL is set."""


@db.command("migrate")
def db_migrate() -> None:
    from tasks.db import migrate, owner_engine

    applied = migrate(owner_engine())
    click.echo("applied: " + ", ".join(applied) if applied else "database is up to date")


@db.command("status")
def db_status() -> None:
    import sqlalchemy as sa

    from tasks.db import status

    try:
        st = status(pipeline_engine())
    except sa.exc.OperationalError:
        raise TrajpubError("the database does not answer; start it with `trajpub db up`", "database") from None
    click.echo(f"PostgreSQL {st['server']}, PostGIS {st['postgis']}; migrations: {', '.join(st['migrations'])}")


@main.group()
def server() -> None:
    """The Prefect server (UI and API) on loopback, unless PREFECT_API_URL points elsewhere."""


@main.group()
def worker() -> None:
    """The worker of the trajpub work pool: runs trajpub's deployments and nothing else (flows/worker.py)."""


@worker.command("start")
@click.option("--pool", default="trajpub", show_default=True, help="The work pool to serve (created if missing).")
def worker_start(pool: str) -> None:
    """Serve the work pool until interrupted: each run is built from trajpub's fixed job template; a run that sets
    job variables (a command, an environment), or whose deployment is not one of trajpub's flows, is refused."""
    import asyncio

    from flows.worker import run_worker

    asyncio.run(run_worker(pool, say=click.echo))


up_and_down(db, services.db_up, services.db_down)
up_and_down(server, services.server_up, services.server_down)


#: What Prefect's own command line (``prefect flow-run ls``, ``prefect deployment run``) needs to reach the server
#: this checkout runs: ``trajpub`` sets them for itself (:func:`trajpub.config.apply_environment`), a shell does not.
PREFECT_VARIABLES = ("PREFECT_API_URL", "PREFECT_API_AUTH_STRING", "PREFECT_HOME")


@main.command("env")
def env() -> None:
    """Print the variables Prefect's own commands need to reach this checkout's server, as shell exports:
    `eval "$(trajpub env)"`, then `prefect flow-run ls` works on any port."""
    for name in PREFECT_VARIABLES:
        if os.environ.get(name):
            click.echo(f"export {name}={shlex.quote(os.environ[name])}")
