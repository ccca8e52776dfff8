"""``trajpub db``, ``trajpub server`` and ``trajpub env``: the PostGIS cluster and the Prefect server this checkout
runs, and how Prefect's own commands find them."""

from __future__ import annotations

import os
import shlex

import click

from flows.cli.base import main, pipeline_engine
from trajpub.errors import TrajpubError


@main.group()
def db() -> None:
    """The PostGIS database: a project-local cluster unless TRAJPUB_DATABASE_URL is set."""


@db.command("up")
def db_up() -> None:
    from flows import services

    click.echo(services.db_up())


@db.command("down")
def db_down() -> None:
    from flows import services

    click.echo(services.db_down())


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


@server.command("up")
def server_up() -> None:
    from flows import services

    click.echo(services.server_up())


@server.command("down")
def server_down() -> None:
    from flows import services

    click.echo(services.server_down())


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
