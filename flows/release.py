"""The release flow: public inputs → plan → ingest → validate → prepare → protect → audit + gate → steward review
→ publish.

Every step records its outcome in ``governance``; any failure marks the release ``failed`` with the reason and
emits a lineage FAIL event, and nothing is published. The flow run's final state says how it ended: Completed
(published, rejected by the steward, or still awaiting approval), ``Blocked`` (the gate stopped it),
``Refused`` (refused before any data was read: the budget, the gate policy, the public inputs) or Failed (an
error); the last three are Prefect Failed states, so that nothing downstream takes them for a success.
"""

# No ``from __future__ import annotations`` here: a served deployment ships the flow to its run by value
# (cloudpickle), with only the globals its body names, so the ``ReleaseSpec`` annotation Prefect validates the
# parameter with must be the class itself, not its name.
import httpx
import sqlalchemy as sa
from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.exceptions import ObjectNotFound
from prefect.runtime import flow_run
from prefect.states import Failed, State

from flows.review import StewardDecision, review_markdown, wait_for_answer
from mechanisms import registry
from tasks import governance, lineage, policies, public_inputs, publish, windows
from tasks.dask_cluster import dask_client
from tasks.db import alive_lock_key, is_transient, lock_is_held, release_slot, session_lock, transaction
from tasks.db import engine as db_engine
from tasks.review import read_review
from tasks.stages import audit_and_gate, ingest_and_validate, plan, prepare_and_protect
from trajpub.errors import PolicyError, ReleaseBlocked, TrajpubError
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


def nothing_released(spec: ReleaseSpec, release_id: int) -> dict:
    """The mechanism ran (its budget is spent) and released no record or fragment: an outcome of its own, not an
    attack's error. No attack runs and nothing can be published; the release ends blocked with that reason (the
    caller ends the run :func:`blocked`)."""
    reason = (f"{NOTHING_RELEASED}: {spec.mechanism} released no record or fragment (its budget is spent); "
              "nothing to audit or publish")

    def record(conn) -> None:
        governance.transition(conn, release_id, "audited", reason)
        governance.transition(conn, release_id, "blocked", reason)

    transaction(record, "record that nothing was released", say=print)
    abort(release_id, NOTHING_RELEASED)
    print(f"release {release_id}: {reason}")
    return {"release_id": release_id, "status": "blocked", "outcome": NOTHING_RELEASED, "reason": reason}


def steward_review(release_id: int, timeout_s: float) -> tuple[str, StewardDecision | None]:
    """Pause for the steward; the form is answered in the Prefect UI or by ``trajpub approve/reject``. Returns
    the review (markdown) and the answer (None after the timeout)."""
    eng = db_engine()
    with eng.begin() as conn:  # awaiting approval only now, when the flow is about to wait for it
        governance.transition(conn, release_id, "awaiting_approval", None)
        markdown = review_markdown(read_review(conn, release_id))
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
    Prefect UI's form), which Prefect parses with :meth:`ReleaseSpec.from_dict` before the run starts. A relative
    window is resolved at the run's expected start in the dataset's time zone (:mod:`tasks.windows`). Ends
    :func:`refused` or :func:`blocked` when the release is (module docstring)."""
    try:
        spec, params = windows.parse_resolved(db_engine(), spec, windows.run_time())
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
        fail(release_id, spec.dataset, exc)
        raise
    if decision.blocked:
        abort(release_id, "blocked by the audit gate")
        reason = f"release {release_id} is blocked by the audit gate: {'; '.join(decision.reasons)}"
        print(f"{reason}; nothing is published")
        return blocked(reason, {"release_id": release_id, "status": "blocked", "reason": reason})
    try:
        markdown, decision = steward_review(release_id, spec.approval_timeout_s)
    except Exception as exc:
        fail(release_id, spec.dataset, exc)
        raise
    attempt = 0
    while decision is not None:
        try:
            return apply_decision(release_id, decision.decision, decision.comment, decision.decision_code)
        except PolicyError as exc:  # a wrong or used code, four-eyes: the release still awaits a decision
            print(f"the decision was refused: {exc}; waiting for another")
            attempt += 1
            decision = ask_steward(release_id, markdown, spec.approval_timeout_s, attempt)
    get_run_logger().warning("no decision before the timeout: the release stays awaiting_approval")
    return {"release_id": release_id, "status": "awaiting_approval"}


def recover_interrupted(dataset: str | None = None, running: int | None = None) -> list[int]:
    """Mark the releases whose flow process died mid-computation as failed, saying so (with the Prefect flow
    run's final state when the server knows it); returns their ids. ``running``: the caller's own release, never
    taken for interrupted (its alive lock is lost if the database restarted since plan)."""
    from prefect.client.orchestration import get_client

    def sweep(conn) -> list[dict]:
        found = [r for r in governance.interrupted_releases(conn, dataset) if r["release_id"] != running]
        for rel in found:
            try:
                with get_client(sync_client=True) as client:
                    state = client.read_flow_run(rel["flow_run_id"]).state
                detail = (f"flow run state {state.type.value}" + (f": {state.message}" if state.message else "")
                          if state else "")
            except (ObjectNotFound, httpx.HTTPError) as exc:  # the server does not know it: recover anyway
                detail = f"flow run state unknown ({type(exc).__name__})"
            governance.mark_interrupted(conn, rel, detail)
            print(f"release {rel['release_id']} was interrupted while '{rel['status']}'; marked failed")
        purged = governance.purge_expired_staging(conn)
        if purged:
            print(f"staging purged for ended releases past their retention: {purged}")
        return found

    found = transaction(sweep, "recover interrupted releases", say=print)
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
    if run_id is None:
        return
    with db_engine().connect() as conn:
        if lock_is_held(conn, alive_lock_key(str(run_id))):
            return
    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(run_id).state
            if state is not None and not state.is_final():
                client.set_flow_run_state(run_id, Crashed(message=message), force=True)
    except (ObjectNotFound, httpx.HTTPError) as exc:
        print(f"flow run {run_id} could not be marked crashed in Prefect ({type(exc).__name__})")


def apply_decision(release_id: int, decision: str, comment: str | None, code: str | None) -> dict:
    """Carry out the steward's answer to the form: record the decision with its one-time ``code`` (the code
    names the steward's login and is spent by this presentation: :func:`tasks.governance.decide_by_code`) unless
    ``trajpub approve/reject`` recorded it already, which then holds; publish when approved (idempotent)."""
    eng = db_engine()
    with eng.connect() as conn:
        recorded = governance.approval(conn, release_id)
    if recorded is None:
        status = "approved" if decision == "approve" else "rejected"
        steward = governance.decide_by_code(eng, release_id, status, comment, code or "")
    else:
        status, steward = recorded["decision"], recorded["steward"]
    if status == "rejected":
        abort(release_id, f"rejected by the steward {steward}")
        print(f"release {release_id} rejected by {steward}")
        return {"release_id": release_id, "status": "rejected"}
    table = publish.publish(eng, release_id, flow_run.get_id())
    print(f"release {release_id} published as {table}")
    return {"release_id": release_id, "status": "published", "table": table}


def abort(release_id: int, why: str) -> None:
    """Lineage ABORT: the run ended without an output, by decision (the gate or the steward), not by an error."""
    with db_engine().begin() as conn:
        lineage.emit(conn, release_id, "ABORT", run_id=flow_run.get_id(),
                     dataset=governance.get_release(conn, release_id)["dataset"], facets={"outcome": {"status": why}})


def fail(release_id: int, dataset: str, exc: BaseException) -> None:
    """Mark the release failed with the reason and emit lineage FAIL (in its own transaction)."""
    with db_engine().begin() as conn:
        status = governance.get_release(conn, release_id)["status"]
        if status not in governance.FINAL:
            governance.transition(conn, release_id, "failed", str(exc))
        governance.release_reservation(conn, release_id, f"the release failed before its mechanism ran: {exc}")
        lineage.emit(conn, release_id, "FAIL", run_id=flow_run.get_id(), dataset=dataset,
                     error=f"{type(exc).__name__}: {exc}")


@flow(name="publish-approved", log_prints=True)
def publish_approved_flow(release_id: int) -> dict:
    """Publish a release whose approval arrived after its flow stopped waiting (nothing is lost)."""
    eng = db_engine()
    with eng.connect() as conn:
        rel = governance.get_release(conn, release_id)
    if rel["status"] not in ("approved", "published"):
        raise TrajpubError(f"release {release_id} is '{rel['status']}', not approved", "governance.releases")
    table = publish.publish(eng, release_id, flow_run.get_id())
    lineage.deliver(eng)
    print(f"release {release_id} published as {table}")
    return {"release_id": release_id, "status": "published", "table": table}


def finish_approved(release_id: int) -> dict:
    """Publish an approved release (:func:`publish_approved_flow`) or, when publication fails for a reason other
    than a transient database error, mark it failed saying why, so that no release stays approved forever."""
    with db_engine().connect() as conn:
        original = governance.get_release(conn, release_id)
    try:
        outcome = publish_approved_flow(release_id=release_id)
        crash_orphaned_run(original, f"the flow process of release {release_id} ended before it published; "
                                     "`trajpub recover` published the release")
        return outcome
    except (TrajpubError, sa.exc.DBAPIError) as exc:
        if is_transient(exc):
            raise TrajpubError(f"release {release_id} could not be published now (the database did not answer); "
                               "it stays approved: run `trajpub recover` again", "publish") from None
        reason = f"publication failed: {one_line(exc)}"
        with db_engine().begin() as conn:
            dataset = governance.get_release(conn, release_id)["dataset"]
        fail(release_id, dataset, TrajpubError(reason))
        crash_orphaned_run(original, f"the flow process of release {release_id} ended before it published; the "
                                     f"release could not be published and failed: {reason}")
        return {"release_id": release_id, "status": "failed", "reason": reason}


def one_line(exc: BaseException) -> str:
    """The first line of an error (a database error's own message, without the statement)."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
