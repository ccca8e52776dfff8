"""The four computing stages of a release as Prefect tasks, each with its retry policy: plan → ingest and validate
→ prepare and protect → audit and gate. The release and comparison flows (``flows/``) compose them.

Every database write of a stage is one transaction of :func:`tasks.db.transaction`, which already retries a
transient database error for about 15 s. A task retry (Prefect's ``retries`` with ``retry_condition_fn``) is the
longer second line, for a database restart or a lost connection on a Dask worker, and only where running the whole
stage again is safe: never after a :class:`~trajpub.errors.TrajpubError` (bad input, a policy's refusal: the same
again), and never for a stage that charges the budget or runs the mechanism (a second run would charge twice or
release a second noisy view under one charge).
"""

from __future__ import annotations

import numpy as np
from distributed import Future
from distributed import wait as wait_futures
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from audits.controls import PROTOCOL, ControlPolicy
from audits.gate import GateDecision
from tasks import (
    audit,
    check_output,
    dask_wait,
    governance,
    ingest,
    lineage,
    policies,
    prepare,
    protect,
    publish,
    report,
    validate,
)
from tasks.dask_cluster import n_workers, release_unused_memory
from tasks.db import auditor_engine, is_transient, transaction, with_retries
from tasks.db import engine as db_engine
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import PolicyError, TrajpubError
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.spec import ReleaseSpec


def transient_database_error(task, task_run, state) -> bool:
    """Prefect's ``retry_condition_fn`` (called with the task, its run and the Failed state): retry after a
    transient database error (:func:`tasks.db.is_transient`: a lost or refused connection, a server restart, a
    serialization failure), never after a :class:`TrajpubError` or any other error."""
    exc = state.result(raise_on_failure=False)
    return isinstance(exc, Exception) and not isinstance(exc, TrajpubError) and is_transient(exc)


@task(cache_policy=NO_CACHE, retries=0)
def plan(spec: ReleaseSpec, mech: Mechanism, params) -> tuple[int, policies.RegisteredPolicy]:
    """Before any data is read: resolve the gate policy (the dataset's, or a stricter registered one the spec
    names), reserve the privacy budget in the ledger in the dataset's unit (refused over its model's cap, or
    when unbounded per object), record the release.

    Retry policy: none. The release and its ledger charge are one transaction (retried by
    :func:`tasks.db.transaction` while nothing is committed); a task retry after a commit whose acknowledgement
    was lost would record a second release and charge the budget twice."""
    guarantee = mech.guarantee(params)

    def record(conn) -> tuple[int, policies.RegisteredPolicy]:
        policy = policies.resolve(conn, spec)
        stated = governance.guarantee_record(conn, spec.dataset, guarantee)
        release_id = governance.create_release(conn, spec.to_record(), spec.params, stated)
        governance.update_release(conn, release_id, flow_run_id=flow_run.get_id())
        governance.charge_budget(conn, release_id, spec.dataset, spec.mechanism, guarantee)
        governance.merge_summary(conn, release_id, {"gate_policy": policy.to_record()})
        lineage.emit(conn, release_id, "START", run_id=flow_run.get_id(), dataset=spec.dataset,
                     inputs=[{"name": "trajpub.raw.points", "facets": {"snapshot": {"dataset": spec.dataset}}}],
                     facets={"mechanism": {"name": spec.mechanism, "parameters": spec.params},
                             "guarantee": stated, "spec": spec.to_record(),
                             "gate_policy": policy.to_record()})
        return release_id, policy

    return transaction(record, "plan", say=print)


@task(cache_policy=NO_CACHE, retries=2, retry_delay_seconds=[20, 60],
      retry_condition_fn=transient_database_error)
def ingest_and_validate(client, spec: ReleaseSpec, release_id: int):
    """Snapshot the dataset, read it onto the Dask workers, validate it (GX), store the validation and move the
    release to ``validated``.

    A Dask worker lost meanwhile fails the stage in one sentence within a bound set by the snapshot's size
    (:mod:`tasks.dask_wait`), and so the release, its budget given back.

    Retry policy: twice, 20 s and 60 s apart, after a transient database error only (the flow reads the
    snapshot from PostGIS; a restart outlasts the 15 s of :func:`tasks.db.with_retries`). Safe to repeat: the
    stage spends nothing, and it writes once, in one transaction that also moves the release to ``validated``,
    so a repeat after that commit is refused by the status machine instead of storing the validation twice."""
    eng = db_engine()
    warming = validate.warm_up_workers(client)  # overlaps the GX import with the snapshot
    snapshot, objects = with_retries(lambda: ingest.take_snapshot(eng, spec.dataset, spec.window_start,
                                                                  spec.window_end), "snapshot", say=print)
    print(f"snapshot: {snapshot.n_points} points of {snapshot.n_objects} objects, sha256 {snapshot.content_hash[:12]}")
    bound = dask_wait.stage_timeout_s(snapshot.n_points, n_workers(client))  # a lost worker fails, never hangs
    partitions = ingest.read_partitions(client, eng, snapshot, objects, 2 * n_workers(client))
    dask_wait.gather(client, warming, "the workers' start", bound)
    clean, quarantine, report = validate.validate(client, partitions, spec, release_id, bound)
    try:
        validate.enforce_policy(report)
        refused = None
    except PolicyError as exc:  # stored first (the steward sees what was quarantined), raised after
        refused = exc

    def record(conn) -> None:
        governance.update_release(conn, release_id, snapshot_hash=snapshot.content_hash,
                                  snapshot_points=snapshot.n_points)
        governance.merge_summary(conn, release_id, {"snapshot": snapshot.to_dict()})
        validate.store(conn, release_id, quarantine, report, bound)
        if refused is None:
            governance.transition(conn, release_id, "validated", f"{report['n_quarantined']} points quarantined")

    transaction(record, "store the validation", say=print)
    create_table_artifact(key=f"validation-r{release_id}", table=report["expectations"],
                          description=f"Release {release_id}: raw-point validation ({report['n_quarantined']} of "
                                      f"{report['n_rows']} points quarantined)")
    print(f"validation: {report['n_quarantined']} of {report['n_rows']} points quarantined "
          f"({report['n_integrity']} invalid, {report['n_duplicate']} exact duplicates)")
    if refused is not None:
        raise refused
    return clean


@task(cache_policy=NO_CACHE, retries=0)
def prepare_and_protect(client, spec: ReleaseSpec, mech: Mechanism, release_id: int, params, inputs: PublicInputs,
                        clean, controls: ControlPolicy) -> tuple[Future, CandidateRelease]:
    """Segment and grid the clean points, hold the control objects out of a synthetic mechanism's input
    (``controls.share`` of the objects, drawn by object: :func:`tasks.audit.hold_out_controls`), run the
    mechanism, check its output, stage the candidate. Returns the auditor's raw frame, built on a worker from the
    prepared partitions with the ``member`` column of a synthetic release (:func:`tasks.audit.raw_on_cluster`:
    the partitions are then let go, so that a city's points are not held twice), and the candidate.

    Retry policy: none. Once the mechanism starts, the budget reserved at plan is spent
    (:func:`tasks.governance.mark_mechanism_started`); a second run would release a second noisy view of the same
    data under one charge. Before that mark the stage reads no database (its inputs are on the workers)."""
    release_unused_memory(client)  # what reading and validating freed (the raw partitions are let go by now)
    prepared, stats = prepare.prepare(client, clean, spec.prepare, spec.grid, mech.max_records_per_object(params))
    print(f"prepared: {stats['trajectories']} trajectories of {stats['objects']} objects on a "
          f"{spec.grid.n_cols}x{spec.grid.n_rows} grid of {spec.grid.cell_size_m:g} m cells")
    if stats["trajectories"] == 0:
        raise TrajpubError("no trajectory is left after preparation", "prepare")

    def start(conn) -> None:  # from here the budget reserved at plan is spent, whatever happens next
        governance.mark_mechanism_started(conn, release_id)
        governance.merge_summary(conn, release_id, {"prepare": stats})

    transaction(start, "start the mechanism", say=print)
    rng = np.random.default_rng(spec.seed)  # seed is None outside test mode: fresh OS entropy
    held_out = None
    if mech.shape is Shape.SYNTHETIC:  # records without owners: measured on members against held-out controls
        held_out = audit.hold_out_controls(client, prepared, controls.share, rng.spawn(1)[0])
        members_only = audit.without(client, prepared, held_out)
        print(f"controls: {controls.share:.0%} of the objects held out of the mechanism's input "
              f"({len(held_out)} objects, never read by {spec.mechanism})")
        transaction(lambda conn: governance.merge_summary(conn, release_id, {"controls": {
            "protocol": PROTOCOL, "share": controls.share, "n_controls": len(held_out),
            "n_members": stats["objects"] - len(held_out)}}), "record the controls", say=print)
    result = protect.run(mech, client, prepared if held_out is None else members_only, inputs, params, rng)
    if result.shape is not Shape.FRAGMENTS:  # check output: what would be published, on a worker (GX is warm there)
        result = check_output.coarsen_times(result, spec.time_precision_s)
        checked = client.submit(check_output.check, result, spec.time_precision_s, pure=False).result()
        print(f"output check: {len(checked)} expectations of {check_output.SUITE_PATH.name} met")

    def stage(conn) -> None:
        publish.stage(conn, release_id, result)
        governance.merge_summary(conn, release_id, {"mechanism": result.metadata})
        governance.transition(conn, release_id, "protected",
                              f"{result.metadata.get('released_records')} records released")

    transaction(stage, "stage the candidate", say=print)
    print(f"protected: {spec.mechanism} released {result.metadata.get('released_records')} trajectories")
    raw = audit.raw_on_cluster(client, prepared, held_out)
    wait_futures(raw)
    return raw, result


@task(cache_policy=NO_CACHE, retries=0)
def audit_and_gate(client, spec: ReleaseSpec, release_id: int, policy: policies.RegisteredPolicy, raw: Future,
                   result: CandidateRelease) -> GateDecision:
    """Run the gate policy's attacks and utility metrics on the staged candidate, record them with the gate's
    decision and the review report; returns the decision (``blocked``, with its ``reasons``).

    Retry policy: none. The attacks run on the workers' frames and read no database; the stage's only database
    work is its transactions, each retried by :func:`tasks.db.transaction`. A task retry would run every attack
    again to redo one write, and after the audit's commit the repeat is refused (the release is attested).

    The audit's evidence (results, gate decision, review report) is written and attested as the auditor's login,
    which re-reads the staged candidate against its seal (``governance.attest_audit``, sql/036); the pipeline then
    only moves the release. Without that attestation the database lets no release await approval."""
    release_unused_memory(client)  # what preparing and the mechanism freed (the partitions are let go by now)
    outcome = audit.run(client, raw, result, policy.policy, spec.seed, bbox=spec.grid.bbox)
    plotted, every = audit.review_sample(client, raw)
    def attest(conn):  # the auditor's login, not the pipeline's (sql/036)
        audit.store(conn, release_id, outcome)
        page = report.write_review(conn, release_id, plotted, result, every)
        governance.attest_audit(conn, release_id)
        return page

    def decide(conn):
        reasons = "; ".join(outcome.decision.reasons)
        governance.transition(conn, release_id, "audited", reasons or "all attacks under threshold")
        if outcome.decision.blocked:
            governance.transition(conn, release_id, "blocked", reasons)

    page = transaction(attest, "record and attest the audit", auditor_engine(), say=print)
    transaction(decide, "record the gate's decision", say=print)
    artifact = create_markdown_artifact(key=f"review-report-r{release_id}",
                                        markdown=report.page_body(page.read_text(encoding="utf-8")),
                                        description=f"Release {release_id}: the steward's full review report")
    transaction(lambda conn: governance.merge_summary(conn, release_id, {"report_artifact": str(artifact)}),
                "record the report artifact", say=print)
    print(f"review report: {page} (in the Prefect UI: artifact review-report-r{release_id})")
    for r in outcome.results:
        said = outcome.decision.per_attack[r.attack].get("verdict", "not gated")
        print(f"audit: {r.attack}: success {r.success_rate:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}], "
              f"baseline {r.baseline:.4f}, risk {r.risk:.3f} [{r.risk_ci_low:.3f}, {r.risk_ci_high:.3f}]: {said}")
    for name, error in outcome.failures.items():
        print(f"audit: {name}: FAILED ({error})")
    for name, why in outcome.not_applicable.items():
        rule = outcome.policy.not_applicable_rule(name)
        print(f"audit: {name}: not applicable ({why}); the policy {'passes' if rule == 'pass' else 'blocks'} it")
    return outcome.decision
