"""The release flow: public inputs → plan → ingest → validate → prepare → protect → audit + gate → steward review
→ publish.

Every step records its outcome in ``governance``; any failure marks the release ``failed`` with the reason and
emits a lineage FAIL event, and nothing is published. The flow run's final state says how it ended: Completed
(published, or still awaiting approval), ``Skipped`` (Completed: its window holds no data; nothing was planned or
charged), ``Rejected`` (Cancelled: the steward said no), ``Blocked`` (the gate stopped it), ``Refused`` (refused
before any data was read: the budget, the gate policy, the public inputs) or Failed (an error, or an approved
release that could not be published); the last three are Prefect Failed states, so that nothing downstream
takes them for a success.
"""

# No ``from __future__ import annotations`` here: a served deployment ships the flow to its run by value
# (cloudpickle), with only the globals its body names, so the ``ReleaseSpec`` annotation Prefect validates the
# parameter with must be the class itself, not its name.
import httpx
from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.exceptions import ObjectNotFound
from prefect.runtime import flow_run
from prefect.states import Cancelled, Completed, Failed, State

from flows.engine_log import quiet_expected_endings
from flows.review import StewardDecision, review_markdown, wait_for_answer
from mechanisms import registry
from tasks import lineage, outcomes, policies, public_inputs, windows
from tasks.dask_cluster import dask_client
from tasks.db import alive_lock_key, release_slot, session_lock
from tasks.db import engine as db_engine
from tasks.stages import audit_and_gate, ingest_and_validate, plan, prepare_and_protect
from trajpub.errors import PolicyError, PublicationFailed, ReleaseBlocked, ReleaseRejected, TrajpubError
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.spec import ReleaseSpec

NOTHING_RELEASED = "nothing was released"


def blocked(reason: str, outcome: dict) -> State:
    """The final state of a run stopped by the gate: a Failed state named ``Blocked`` whose message is ``reason``
    (one sentence, shown in the Prefect UI) and whose error (:class:`~trajpub.errors.ReleaseBlocked`, raised where
    the flow is called as a function) carries the ``outcome`` the flow would have returned."""
    return Failed(name="Blocked", message=reason, data=ReleaseBlocked(reason, outcome))


def refused(exc: TrajpubError) -> State:
    """The final state of a run refused before any data was read (over the budget cap, a gate policy weaker than
    the dataset's, a public input that does not exist): a Failed state named ``Refused`` with the refusal's
    sentence, carrying the refusal (raised where the flow is called as a function)."""
    return Failed(name="Refused", message=str(exc), data=exc)


def published_or_failed(release_id: int, outcome: dict) -> dict | State:
    """The end of a run that published (``outcome`` of :func:`tasks.outcomes.publish_or_fail`): the outcome when
    the release was published; otherwise a Failed state carrying :class:`~trajpub.errors.PublicationFailed` (raised
    where the flow is called as a function, with the outcome), so that the Prefect UI never shows a release that
    was not published as a green Completed run."""
    if outcome["status"] == "published":
        print(f"release {release_id} published as {outcome['table']}")
        return outcome
    reason = f"release {release_id} was approved and not published: {outcome['reason']}"
    print(reason)
    return Failed(message=reason, data=PublicationFailed(reason, outcome))


def nothing_released(spec: ReleaseSpec, release_id: int) -> dict:
    """The mechanism ran (its budget is spent) and released no record or fragment: an outcome of its own, not an
    attack's error. No attack runs and nothing can be published; the release ends blocked with that reason (the
    caller ends the run :func:`blocked`)."""
    reason = (f"{NOTHING_RELEASED}: {spec.mechanism} released no record or fragment (its budget is spent); "
              "nothing to audit or publish")
    outcomes.nothing_released(release_id, reason, flow_run.get_id())
    print(f"release {release_id}: {reason}")
    return {"release_id": release_id, "status": "blocked", "outcome": NOTHING_RELEASED, "reason": reason}


def steward_review(release_id: int, timeout_s: float) -> tuple[str, StewardDecision | None]:
    """Pause for the steward; the form is answered in the Prefect UI or by ``trajpub approve/reject``. Returns
    the review (markdown) and the answer (None after the timeout)."""
    markdown = review_markdown(outcomes.await_steward(release_id))
    create_markdown_artifact(key=f"review-r{release_id}", markdown=markdown,
                             description=f"Steward review of release {release_id}")
    print(f"release {release_id} is awaiting approval: trajpub approve {release_id} --steward NAME")
    return markdown, ask_steward(release_id, markdown, timeout_s, attempt=0)


def ask_steward(release_id: int, markdown: str, timeout_s: float, attempt: int) -> StewardDecision | None:
    """One pause for the steward's form (a fresh key per attempt, so a refused answer is not read again)."""
    return wait_for_answer(StewardDecision.with_initial_data(description=markdown, release_id=release_id),
                           timeout_s, f"review-{release_id}-{attempt}")


@flow(name="release", log_prints=True)
def release_flow(spec: ReleaseSpec) -> dict:
    """One governed release of ``spec``: a release spec, or its mapping (YAML, a deployment's parameters, the
    Prefect UI's form), which Prefect parses with :meth:`ReleaseSpec.from_parameters` (never a seed) before the run
    starts. A relative window is resolved at the run's expected start in the dataset's time zone and weeks, a run
    started by hand moving back to the last complete window with data (:mod:`tasks.windows`); a window without data
    ends the run ``Skipped`` before anything is planned or charged. Ends :func:`refused` or :func:`blocked` when the
    release is (module docstring)."""
    quiet_expected_endings()
    try:
        spec, params = windows.parse_resolved(db_engine(), spec, windows.run_time(), windows.started_by_hand())
        if reason := windows.skipped(db_engine(), spec):
            windows.record_skip(db_engine(), spec, reason, flow_run.get_id())
            print(reason)
            return Completed(name="Skipped", message=reason, data={"status": "skipped", "reason": reason})
        mech = registry.mechanism(spec.mechanism)
        params, inputs = public_inputs.resolve(db_engine(), mech, params, spec.grid, spec)
    except TrajpubError as exc:
        return refused(exc)
    # held until this process ends, however it ends: a release whose flow is gone is found by its free lock
    with session_lock(db_engine(), alive_lock_key(str(flow_run.get_id()))):
        try:
            release_id, policy = plan(spec, mech, params)
        except TrajpubError as exc:  # the budget or the policy refused it; nothing was recorded or read
            return refused(exc)
        print(f"release {release_id} planned: {spec.mechanism} on {spec.dataset}, gated by policy "
              f"{policy.label}")
        lineage.deliver(db_engine())  # START reaches a configured lineage backend now, the rest at the end
        try:
            return govern(spec, mech, params, inputs, release_id, policy)
        finally:
            lineage.deliver(db_engine())


def govern(spec: ReleaseSpec, mech: Mechanism, params, inputs: PublicInputs, release_id: int,
           policy: policies.RegisteredPolicy) -> dict | State:
    run_id = flow_run.get_id()
    try:
        with release_slot(db_engine(), spec.dataset, spec.queue_timeout_s, say=print), \
                dask_client() as client:
            recover_interrupted(spec.dataset, running=release_id)
            # the validated partitions go straight into protect, unnamed: let go once it returns
            raw, result = prepare_and_protect(client, spec, mech, release_id, params, inputs,
                                              ingest_and_validate(client, spec, release_id), policy.policy.controls)
            if result.released_nothing:
                outcome = nothing_released(spec, release_id)
                return blocked(f"release {release_id}: {outcome['reason']}", outcome)
            decision = audit_and_gate(client, spec, release_id, policy, raw, result)
    except Exception as exc:
        outcomes.fail(release_id, exc, run_id)
        raise
    if decision.blocked:
        outcomes.abort(release_id, "blocked by the audit gate", run_id)
        reason = f"release {release_id} is blocked by the audit gate: {'; '.join(decision.reasons)}"
        print(f"{reason}; nothing is published")
        return blocked(reason, {"release_id": release_id, "status": "blocked", "reason": reason})
    try:
        markdown, answer = steward_review(release_id, spec.approval_timeout_s)
    except Exception as exc:
        outcomes.fail(release_id, exc, run_id)
        raise
    attempt = 0
    while answer is not None:
        try:
            status, steward = outcomes.decide(release_id, answer.decision, answer.comment, answer.decision_code)
        except PolicyError as exc:  # a wrong or used code, four-eyes: the release still awaits a decision
            print(f"the decision was refused: {exc}; waiting for another")
            attempt += 1
            answer = ask_steward(release_id, markdown, spec.approval_timeout_s, attempt)
            continue
        return carry_out(release_id, status, steward)
    get_run_logger().warning("no decision before the timeout: the release stays awaiting_approval")
    return {"release_id": release_id, "status": "awaiting_approval"}


def carry_out(release_id: int, status: str, steward: str) -> dict | State:
    """Carry out the steward's decision: a rejection ends the run (lineage ABORT); an approval publishes
    (idempotent). A publication the database refuses (the candidate changed since it was sealed) publishes
    nothing, marks the release failed and ends the run Failed (:func:`published_or_failed`)."""
    if status == "rejected":
        outcomes.abort(release_id, f"rejected by the steward {steward}", flow_run.get_id())
        reason = f"release {release_id} rejected by {steward}"
        print(reason)
        outcome = {"release_id": release_id, "status": "rejected"}
        return Cancelled(name="Rejected", message=reason, data=ReleaseRejected(reason, outcome))
    return published_or_failed(release_id, outcomes.publish_or_fail(release_id, flow_run.get_id()))


def recover_interrupted(dataset: str | None = None, running: int | None = None) -> list[int]:
    """Mark the releases whose flow process died mid-computation as failed, saying so (with the Prefect flow
    run's final state when the server knows it); returns their ids. ``running``: the caller's own release, never
    taken for interrupted (its alive lock is lost if the database restarted since plan)."""
    from prefect.client.orchestration import get_client

    def describe(rel: dict) -> str:
        try:
            with get_client(sync_client=True) as client:
                state = client.read_flow_run(rel["flow_run_id"]).state
            return (f"flow run state {state.type.value}" + (f": {state.message}" if state.message else "")
                    if state else "")
        except (ObjectNotFound, httpx.HTTPError) as exc:  # the server does not know it: recover anyway
            return f"flow run state unknown ({type(exc).__name__})"

    found = outcomes.mark_interrupted(dataset, running, describe)
    for rel in found:
        crash_orphaned_run(rel, f"the flow process of release {rel['release_id']} ended while '{rel['status']}'; "
                                "`trajpub recover` marked the release failed")
    return [r["release_id"] for r in found]


def crash_orphaned_run(release: dict, message: str) -> None:
    """Put the Prefect flow run of ``release`` in the Crashed state when its process is gone (nobody holds its
    alive lock) and Prefect still shows it unfinished, as Prefect does for a process it saw die: the UI and the
    API otherwise show it running for ever. A server that does not answer is left as it is: the release's record
    in governance is what counts."""
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    run_id = release.get("flow_run_id")
    if run_id is None or outcomes.flow_alive(str(run_id)):
        return
    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(run_id).state
            if state is not None and not state.is_final():
                client.set_flow_run_state(run_id, Crashed(message=message), force=True)
    except (ObjectNotFound, httpx.HTTPError) as exc:
        print(f"flow run {run_id} could not be marked crashed in Prefect ({type(exc).__name__})")


@flow(name="publish-approved", log_prints=True)
def publish_approved_flow(release_id: int) -> dict | State:
    """Publish a release whose approval arrived after its flow stopped waiting (nothing is lost); a publication
    that fails for a permanent reason marks the release failed (:func:`tasks.outcomes.publish_or_fail`) and ends
    the run Failed (:func:`published_or_failed`)."""
    quiet_expected_endings()
    rel = outcomes.release(release_id)
    if rel["status"] not in ("approved", "published"):
        raise TrajpubError(f"release {release_id} is '{rel['status']}', not approved", "governance.releases")
    outcome = outcomes.publish_or_fail(release_id, flow_run.get_id())
    lineage.deliver(db_engine())
    return published_or_failed(release_id, outcome)


def publish_approved(release_id: int) -> dict:
    """Run :func:`publish_approved_flow` and return its outcome, published or failed (the failure's outcome
    rather than its error: the callers report both)."""
    try:
        return publish_approved_flow(release_id=release_id)
    except PublicationFailed as exc:
        return exc.outcome


def finish_approved(release_id: int) -> dict:
    """Publish an approved release (:func:`publish_approved_flow`) or, when publication fails for a reason other
    than a transient database error, mark it failed saying why, so that no release stays approved forever; the
    release's own flow run, when its process is gone, is marked crashed."""
    original = outcomes.release(release_id)
    outcome = publish_approved(release_id)
    crash_orphaned_run(original, f"the flow process of release {release_id} ended before it published; "
                       + ("`trajpub recover` published the release" if outcome["status"] == "published" else
                          f"the release could not be published and failed: {outcome['reason']}"))
    return outcome
