"""A steward's decision and withdrawal, as the command line (:mod:`flows.cli.steward`) and the steward console
(:mod:`console`) both make them: the database records them as the steward's own login (its engine), and checks
the status, four-eyes and the comment; an approved release is then published by its waiting flow run, or by a
flow run of its own when none waits."""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlalchemy as sa

from tasks.db import transaction
from trajpub.errors import TrajpubError

#: The status each decision leads to, and the status its release ends in.
DECIDED = {"approve": "approved", "reject": "rejected"}
FINAL = {"approve": "published", "reject": "rejected"}


def decide(engine: sa.Engine, release_id: int, decision: str, comment: str | None, wait_s: float,
           say: Callable[[str], None], before_flow: Callable[[], None] = lambda: None) -> None:
    """Record ``decision`` ('approve' or 'reject') as the login of ``engine`` (the database checks the status,
    four-eyes and that a rejection says why), then let the waiting flow run publish, or publish in a flow run
    of its own when none waits (nothing lost); ``before_flow`` runs after that flow's import, before it runs.
    Raises :class:`~trajpub.errors.PublicationFailed` when the release was approved and not published."""
    from tasks import governance

    status = DECIDED[decision]
    rel, login = transaction(lambda conn: (governance.get_release(conn, release_id),
                                           governance.decide(conn, release_id, status, comment)),
                             "record the decision", engine)
    say(f"release {release_id} {status} by {login}")
    try:
        carry_out(rel, decision, comment, wait_s, say, before_flow)
    except Exception as exc:
        from flows import prefect_api

        if not prefect_api.unreachable(exc):
            raise
        then = (f"run `trajpub publish-approved {release_id}` to publish it" if status == "approved" else
                "run `trajpub recover` to end its flow run")
        raise TrajpubError(f"release {release_id} is {status} (recorded), but " + prefect_api.sentence(then),
                           "Prefect API") from None


def carry_out(rel: dict, decision: str, comment: str | None, wait_s: float, say: Callable[[str], None],
              before_flow: Callable[[], None]) -> None:
    """After the decision is recorded: let the waiting flow run publish (or end), or publish in a flow run of
    its own when none waits. Raises :class:`~trajpub.errors.PublicationFailed` when not published."""
    release_id = rel["release_id"]
    if hand_to_waiting_flow(rel, {"release_id": release_id, "decision": decision, "comment": comment or ""},
                            FINAL[decision], wait_s, say):
        return
    if decision == "approve":
        from flows.release import publish_approved_flow  # a heavy import, only when no flow run waits

        before_flow()
        outcome = publish_approved_flow(release_id=release_id)  # raises PublicationFailed when not published
        say(f"release {release_id} is {outcome['status']}: {outcome['table']}")


def hand_to_waiting_flow(rel: dict, run_input: dict, final: str, wait_s: float,
                         say: Callable[[str], None] = print) -> bool:
    """Resume the release's flow run with ``run_input`` when it is paused for the steward, and wait up to
    ``wait_s`` for the release to become ``final``; False when no flow run waits (the caller finishes), also when
    the Prefect server no longer knows the run (its database was reset: the governance record is what counts) or
    still shows it paused although its process is gone (its alive lock is free: nobody would read the answer).
    A release that fails meanwhile, or that the flow run has not carried to ``final`` in ``wait_s``, raises
    :class:`~trajpub.errors.TrajpubError` saying why."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.flow_runs import resume_flow_run

    from tasks import governance, outcomes
    from tasks.db import engine

    release_id = rel["release_id"]
    paused = False
    if rel["flow_run_id"]:  # the flow may still be on its way into the pause: give it a moment
        deadline = time.monotonic() + 30
        with get_client(sync_client=True) as client:
            while True:
                try:
                    state = client.read_flow_run(rel["flow_run_id"]).state
                except ObjectNotFound:
                    return False
                paused = bool(state and state.is_paused())
                if paused or not (state and state.is_running()) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
    if paused and not outcomes.flow_alive(str(rel["flow_run_id"])):
        say(f"the flow run {rel['flow_run_id']} shows paused but its process is gone: carrying the decision out "
            "here")
        return False
    if not paused:
        return False
    resume_flow_run(rel["flow_run_id"], run_input=run_input)
    say(f"sent the decision to the waiting flow run {rel['flow_run_id']} ...")
    deadline = time.monotonic() + wait_s
    current = rel["status"]
    while time.monotonic() < deadline:
        now = transaction(lambda conn: governance.get_release(conn, release_id), "read the status", engine())
        current = now["status"]
        if current == final:
            say(f"release {release_id} is {current}")
            return True
        if current == "failed":
            raise TrajpubError(f"release {release_id} failed: {now['failure_reason']}", "governance.releases")
        time.sleep(1)
    raise TrajpubError(f"the flow run has the decision but release {release_id} is still '{current}' after "
                       f"{wait_s:g} s: see `trajpub release show {release_id}`, and run `trajpub recover` if its "
                       "flow run has died", "approve")


def withdraw(engine: sa.Engine, release_id: int, reason: str) -> list[str]:
    """Withdraw a published release as the login of ``engine`` (the database checks the status and records the
    withdrawal, append-only): its tables and views go, its lineage and ledger entries stay; the withdrawal's
    lineage event is then delivered. Returns the relations dropped."""
    from tasks.db import engine as pipeline_engine
    from tasks.lineage import deliver
    from tasks.publish import withdraw as withdraw_release

    dropped = withdraw_release(engine, release_id, reason)
    deliver(pipeline_engine())
    return dropped
