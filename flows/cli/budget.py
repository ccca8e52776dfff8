"""``trajpub budget``: what is left, the caps and the unit of protection."""

from __future__ import annotations

import math
from datetime import UTC

import click

from flows.cli.base import STEWARD_OPTION, main, pipeline_engine, steward_engine, table, valid_dataset
from flows.cli.steward import set_dataset_policy
from tasks.db import transaction
from trajpub.errors import TrajpubError


@main.group()
def budget() -> None:
    """The privacy-budget ledger."""


@budget.command("show")
@click.option("--dataset", callback=valid_dataset)
@click.option("--forecast", "deployment", metavar="DEPLOYMENT",
              help="A deployment (release/NAME): what is left per upcoming period and how many more scheduled runs "
                   "the caps allow.")
@click.option("--periods", "n_periods", type=click.IntRange(1, 366), is_flag=False, flag_value=8, default=None,
              metavar="[N]", help="What each of the last N periods up to the latest charged one used and has left "
                                  "(8 when N is left out); with --forecast, how many upcoming periods it lists "
                                  "(default 8).")
def budget_show(dataset: str | None, deployment: str | None, n_periods: int | None) -> None:
    """The ledger of each dataset in its unit of protection, each row with the periods it is charged to; with
    --periods, the spend per past period; with --forecast, a deployment's budget forecast."""
    from tasks import governance

    if n_periods is not None and not deployment:
        from tasks.forecast import past_periods

        def periods(conn) -> list[str]:
            return [line for ds in governance.datasets(conn, dataset) for line in past_periods(conn, ds, n_periods)]

        click.echo("\n".join(transaction(periods, "read the budget per period", pipeline_engine())))
        return
    n_periods = n_periods or 8
    if deployment:
        from datetime import datetime

        from tasks.forecast import forecast

        spec, schedule = _deployment(deployment)
        if dataset and spec.get("dataset") != dataset:
            raise TrajpubError(f"deployment {deployment} releases dataset '{spec.get('dataset')}', not '{dataset}'",
                               "budget show --forecast")
        found = transaction(lambda conn: forecast(conn, spec, schedule, datetime.now(UTC), n_periods),
                            "forecast the budget", pipeline_engine())
        click.echo("\n".join(found.lines()))
        return
    def lines(conn) -> list[str]:
        out = []
        for ds in governance.datasets(conn, dataset):
            out.append(f"{ds} (unit of protection: {governance.unit_of(conn, ds).describe()}):")
            out += [f"  {account.describe()}" for account in governance.accounts(conn, ds).values()]
            out.append(table(governance.ledger(conn, ds), ["entry_id", "release_id", "entry_kind", "mechanism",
                                                           "account", "unit_epsilon", "unit_delta", "unit",
                                                           "period_first", "period_last", "epsilon",
                                                           "privacy_unit", "conversion", "charged_at", "status"]))
        return out

    for line in transaction(lines, "read the budget", pipeline_engine()):
        click.echo(line)


def _deployment(name: str):
    """The default spec and the first schedule of a deployment on the Prefect server (``release/NAME``)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            found = client.read_deployment_by_name(name)
        except ObjectNotFound:
            raise TrajpubError(f"deployment '{name}' does not exist", "budget show --forecast") from None
    if not found.schedules:
        raise TrajpubError(f"deployment '{name}' has no schedule to forecast", "budget show --forecast")
    return dict(found.parameters["spec"]), found.schedules[0].schedule


MAX_EPSILON_CAP = 1000.0
"""The largest ε cap a dataset may have (sql/037): e^1000 bounds nothing a person would call privacy; a larger
number is a typo or a way around the cap."""
MAX_DELTA_CAP = 0.01
"""The largest δ cap (sql/037): δ is meant to be far below one over the number of people."""


@budget.command("cap")
@click.argument("dataset")
@click.argument("epsilon", type=float)
@click.option("--delta", type=float, help="The ε-DP δ cap (default: unchanged; 0 refuses every mechanism with a δ).")
@click.option("--account", type=click.Choice(["epsilon-DP", "epsilon-LDP", "Pufferfish"]), default="epsilon-DP",
              show_default=True, help="The model whose cap this is: models are never summed under one cap.")
@click.option("--lifetime", is_flag=True, help="Set the lifetime cap: over every charge of the account, whatever "
                                               "the unit's period.")
@STEWARD_OPTION
def budget_cap(dataset: str, epsilon: float, delta: float | None, account: str, lifetime: bool, steward: str) -> None:
    """Set a dataset's ε cap of one model (per its unit of protection: per object, per object-period, or over
    any w periods), or with --lifetime its lifetime cap, and optionally the ε-DP δ cap."""
    from tasks.governance import CAP_COLUMNS, LIFETIME_CAP_COLUMNS

    if not (math.isfinite(epsilon) and 0 < epsilon <= MAX_EPSILON_CAP):
        raise TrajpubError(f"the cap must be a positive finite number of at most {MAX_EPSILON_CAP:g}",
                           "budget cap EPSILON")
    if delta is not None and (account != "epsilon-DP" or lifetime or not 0 <= delta <= MAX_DELTA_CAP):
        raise TrajpubError(f"the δ cap is an ε-DP cap in [0, {MAX_DELTA_CAP:g}], set without --lifetime",
                           "budget cap --delta")
    column = (LIFETIME_CAP_COLUMNS if lifetime else CAP_COLUMNS)[account]
    set_dataset_policy(steward, dataset, **{column: epsilon}, **({"delta_cap": delta} if delta is not None else {}))
    click.echo(f"{dataset}: {account} {'lifetime ' if lifetime else ''}ε cap set to {epsilon:g}"
               + (f", δ cap to {delta:g}" if delta is not None else ""))


@budget.command("unit")
@click.argument("dataset")
@click.argument("unit", type=click.Choice(["object", "record"]))
@click.option("--period", type=click.Choice(["day", "week", "month"]),
              help="Protect one object per period (one object-week: releases of different periods compose in "
                   "parallel; a window touching two periods is charged to both).")
@click.option("--w-event", "w", type=click.IntRange(1, 366), default=1, show_default=True,
              help="With --period: the cap bounds the releases of any W consecutive periods together (w-event).")
@click.option("--week-starts", "week_start", default="monday", show_default=True, metavar="DAY",
              help="The first day of the dataset's week (e.g. sunday): per-week periods and relative windows "
                   "aligned to local_week start there.")
@STEWARD_OPTION
def budget_unit(dataset: str, unit: str, period: str | None, w: int, week_start: str, steward: str) -> None:
    """Declare what DATASET protects: one object (a person, a vehicle; the default), one object per period, or
    one trajectory record. Only before its first charge: a ledger is kept in one unit."""
    from tasks import governance
    from trajpub.periods import Unit
    from trajpub.spec import validate_dataset_name

    validate_dataset_name(dataset)
    declared = Unit(unit, period, w, week_start=week_start)
    def declare(conn):
        governance.set_privacy_unit(conn, dataset, declared)
        return governance.unit_of(conn, dataset)

    stated = transaction(declare, "set the unit of protection", steward_engine(steward))
    click.echo(f"{dataset}: unit of protection set to {stated.describe()}")
