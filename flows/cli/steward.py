"""A steward's commands: logins, approve/reject, the tamper check, gate policies, four eyes, retention,
withdrawal."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from flows.cli.base import (
    STEWARD_OPTION,
    main,
    pipeline_engine,
    steward_engine,
    table,
    tracebacks_to_the_log_only,
    valid_dataset,
)
from flows.decisions import hand_to_waiting_flow  # noqa: F401  (flows.cli.release's pick uses it)
from tasks.db import transaction


@main.group()
def steward() -> None:
    """Steward logins and the one-time codes that carry a login into the Prefect UI form."""


@steward.command("add")
@click.argument("login")
def steward_add(login: str) -> None:
    """Create the steward LOGIN (a member of trajpub_steward) with a generated password in the local credentials
    file (readable by you only). Runs as the database superuser."""
    from flows import services

    click.echo(services.add_steward(login))


@main.group()
def requester() -> None:
    """The people who may ask for releases besides the stewards (a release's requested_by)."""


@requester.command("add")
@click.argument("name")
def requester_add(name: str) -> None:
    """Register NAME (ASCII letters, digits, '_', '.', '-'; kept in lower case) as a person who may be a release's
    requested_by. Runs as the database superuser, like `steward add`."""
    from flows import services

    click.echo(services.add_requester(name))


DECISIONS = {"approve": "approved", "reject": "rejected", "pick": "picked"}


@steward.command("code")
@click.argument("release_id", type=int)
@STEWARD_OPTION
@click.option("--decision", type=click.Choice(list(DECISIONS)), required=True,
              help="What the code decides: the form's answer must say the same (pick: a comparison's candidate).")
@click.option("--comment", help="Your comment (required to reject); the form's comment must be empty or the same.")
def steward_code(release_id: int, steward: str, decision: str, comment: str | None) -> None:
    """Issue a one-time decision code (one release, one decision, one hour) for the Prefect UI form: the decision
    made with it records your login, your decision and your comment; an answer that says anything else is
    refused and spends the code."""
    from tasks import governance

    code = transaction(lambda conn: governance.issue_decision_code(conn, release_id, DECISIONS[decision], comment),
                       "issue a decision code", steward_engine(steward))
    click.echo(code)


def _decide(release_id: int, decision: str, steward: str, comment: str | None, wait_s: float) -> None:
    """Record the decision as the steward's login and see it through (:func:`flows.decisions.decide`, which the
    steward console calls too)."""
    from flows import decisions

    tracebacks_to_the_log_only()
    # again after the flow's import: it may have configured more of Prefect's logging
    decisions.decide(steward_engine(steward), release_id, decision, comment, wait_s, click.echo,
                     before_flow=tracebacks_to_the_log_only)


@main.command()
@click.argument("release_id", type=int)
@STEWARD_OPTION
@click.option("--comment")
@click.option("--wait", "wait_s", type=float, default=120, show_default=True,
              help="Seconds to wait for the flow to publish.")
def approve(release_id: int, steward: str, comment: str | None, wait_s: float) -> None:
    """Approve a release awaiting approval; it is then published."""
    _decide(release_id, "approve", steward, comment, wait_s)


@main.command()
@click.argument("release_id", type=int)
@STEWARD_OPTION
@click.option("--comment", required=True, help="Why the release is rejected.")
@click.option("--wait", "wait_s", type=float, default=120, show_default=True)
def reject(release_id: int, steward: str, comment: str, wait_s: float) -> None:
    """Reject a release awaiting approval; nothing is published."""
    _decide(release_id, "reject", steward, comment, wait_s)


@main.command()
@click.option("--anchor", type=click.Path(path_type=Path), help="The heads of the last clean check (default: "
              ".trajpub/chain-anchor.json); keep a copy where the database's owner cannot write.")
@click.option("--new-anchor", is_flag=True, help="Start a new anchor when there is none (the first check of "
              "chains that have rows): a chain rewritten before this check cannot be found.")
def verify(anchor: Path | None, new_anchor: bool) -> None:
    """Check the hash chains of the budget ledger, the approvals, the withdrawals, the seals and the audit
    attestations: say which row was deleted, edited or inserted behind the database's back, or which chain was
    rewritten since the last check; then every published release's chain of evidence (charge, seal, attested
    audit, report and gate, approval, published rows), naming its first break."""
    from tasks import chains

    problems, sizes = transaction(lambda conn: chains.verify(conn, anchor or chains.ANCHOR_FILE, new_anchor),
                                  "verify the chains", pipeline_engine())
    broken = transaction(chains.release_breaks, "verify the releases' evidence", pipeline_engine())
    for p in problems:
        click.secho(f"TAMPERED: {p}", fg="red", err=True)
    for p in broken:
        click.secho(f"BROKEN: {p}", fg="red", err=True)
    if problems or broken:
        sys.exit(1)
    click.echo("intact: " + ", ".join(f"governance.{t} ({n} rows)" for t, n in sizes.items())
               + "; every published release's evidence holds")


@main.command()
@click.argument("dataset")
@click.argument("days", type=click.IntRange(min=0, max=36500))
@STEWARD_OPTION
def retention(dataset: str, days: int, steward: str) -> None:
    """Keep the candidate points and private owner keys of DATASET's ended releases DAYS days in staging
    (0, the default: delete them when the release ends). Audit figures and review reports are always kept."""
    set_dataset_policy(steward, dataset, staging_retention_days=days)
    click.echo(f"{dataset}: staging kept {days} day(s) after a release ends")


@main.group()
def policy() -> None:
    """Gate policies: a steward registers and versions the policy that gates each dataset's releases."""


@policy.command("set")
@click.argument("dataset", callback=valid_dataset)
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--name", help="Register the file as the next version of this policy name (default: the dataset's "
                             "name).")
@STEWARD_OPTION
def policy_set(dataset: str, file: Path, name: str | None, steward: str) -> None:
    """Register FILE (a gate policy YAML) and make it DATASET's policy from its next release on."""
    from audits.gate import GatePolicy
    from tasks import policies

    parsed = GatePolicy.from_yaml(file)
    def register(conn) -> int:
        version = policies.register(conn, name or dataset, parsed)
        policies.set_for_dataset(conn, dataset, name or dataset, version)
        return version

    version = transaction(register, "set the gate policy", steward_engine(steward))
    click.echo(f"{dataset}: gate policy {name or dataset} v{version} (set by {steward})")


@policy.command("register")
@click.argument("name")
@click.argument("file", type=click.Path(path_type=Path))
@STEWARD_OPTION
def policy_register(name: str, file: Path, steward: str) -> None:
    """Register FILE as the next version of policy NAME without setting it for a dataset: a spec may then name
    it (gate_policy: NAME) for a release of any dataset whose own policy it is at least as strict as."""
    from audits.gate import GatePolicy
    from tasks import policies

    parsed = GatePolicy.from_yaml(file)
    version = transaction(lambda conn: policies.register(conn, name, parsed), "register the gate policy",
                          steward_engine(steward))
    click.echo(f"gate policy {name} v{version} registered by {steward}")


@policy.command("show")
@click.argument("dataset", callback=valid_dataset)
def policy_show(dataset: str) -> None:
    """DATASET's current gate policy (YAML) and its history."""
    import yaml

    from tasks import policies

    # a dataset without a policy adopts the shipped default here
    current, past = transaction(lambda conn: (policies.current(conn, dataset), policies.history(conn, dataset)),
                                "read the gate policy", pipeline_engine())
    click.echo(f"# {dataset}: gate policy {current.label}")
    click.echo(yaml.safe_dump(current.policy.to_dict(), sort_keys=False).rstrip())
    click.echo("\nhistory:\n" + table(past, ["policy_name", "policy_version", "set_by", "set_at"]))


@main.command("four-eyes")
@click.argument("dataset")
@click.argument("state", type=click.Choice(["on", "off"]))
@STEWARD_OPTION
def four_eyes(dataset: str, state: str, steward: str) -> None:
    """Require (on) or not (off) that a release of DATASET is approved by someone other than its requester."""
    set_dataset_policy(steward, dataset, four_eyes=state == "on")
    click.echo(f"{dataset}: four-eyes approval {state}")


def set_dataset_policy(steward: str, dataset: str, **values) -> None:
    """A steward's change of a dataset's policy (only stewards may: the pipeline cannot update these columns)."""
    from tasks import governance
    from trajpub.spec import validate_dataset_name

    validate_dataset_name(dataset)
    transaction(lambda conn: governance.set_dataset_policy(conn, dataset, **values), "set the dataset's policy",
                steward_engine(steward))


@main.command()
@click.argument("release_id", type=int)
@STEWARD_OPTION
@click.option("--reason", required=True, help="Why the release is withdrawn.")
def withdraw(release_id: int, steward: str, reason: str) -> None:
    """Withdraw a published release: its tables and views go, its lineage and ledger entries stay."""
    from flows.decisions import withdraw as withdraw_release

    dropped = withdraw_release(steward_engine(steward), release_id, reason)
    click.echo(f"release {release_id} withdrawn; dropped {', '.join(dropped)}")
