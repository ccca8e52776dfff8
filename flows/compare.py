"""The comparison flow: candidate releases of one snapshot, the steward picks one to publish.

plan every candidate (each a release of its own, charged before any data is read; the total was refused first if
over a cap) → ingest and validate the snapshot once → prepare, protect and audit every candidate with the release
flow's own stages, the mechanisms concurrently on the shared Dask cluster → one review (frontier, table, density
maps, recommendation) → pause for the steward's pick (Prefect UI form or ``trajpub release pick``) → publish the
pick, with lineage naming the comparison; the other candidates are rejected as not picked and their staging is
discarded.

The run ends Completed (published, or still awaiting the pick), ``Blocked`` when no candidate can be recommended
(none passed the gate with every interval clear of its threshold: nothing to pick) or ``Refused`` when the
comparison was refused before any data was read (the bill over a cap, a candidate refused at plan); see
flows/release.py.
"""

# No ``from __future__ import annotations`` here: a served deployment ships the flow to its run by value, and
# the spec parameter's annotation must resolve there (flows/release.py).
import pandas as pd
from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.input import RunInput
from prefect.runtime import flow_run
from prefect.states import State
from pydantic import Field

from flows.engine_log import quiet_expected_endings
from flows.release import blocked, nothing_released, recover_interrupted, refused
from flows.review import wait_for_answer
from tasks import compare, compare_review, governance, lineage, outcomes, report
from tasks.dask_cluster import dask_client
from tasks.db import alive_lock_key, release_slot, session_lock, transaction
from tasks.db import engine as db_engine
from tasks.stages import audit_and_gate, ingest_and_validate, plan, prepare_and_protect
from trajpub.candidate import Shape
from trajpub.comparison import Comparison, recommend
from trajpub.errors import PolicyError, TrajpubError


class StewardPick(RunInput):
    """The steward's answer: the release to publish (the recommended one is filled in) and the one-time decision
    code issued to pick THAT release (``trajpub steward code RELEASE --steward LOGIN --decision pick``), which names
    the steward and binds the pick and its comment (sql/035). A pick already recorded with ``trajpub release
    pick`` resumes the flow without a code."""

    pick: int = Field(description="Release id of the candidate to publish (see the table).")
    decision_code: str = Field(default="", description="Your one-time code to pick that release: trajpub steward "
                                                       "code RELEASE --steward LOGIN --decision pick")
    comment: str = Field(default="", description="Empty, or the comment you gave with the code.")


@flow(name="compare", log_prints=True)
def compare_flow(spec: Comparison) -> dict:
    """A comparison of candidate releases of ``spec``: a comparison spec (:mod:`trajpub.comparison`), or its mapping
    (YAML, a deployment's parameters, the Prefect UI's form), which Prefect parses with
    :func:`~trajpub.comparison.parse_comparison` before the run starts."""
    quiet_expected_endings()
    try:
        comparison, planned = compare.parse(spec)
        planned = compare.resolve(db_engine(), planned)
    except TrajpubError as exc:
        return refused(exc)
    dataset = planned[0].spec.dataset
    with session_lock(db_engine(), alive_lock_key(str(flow_run.get_id()))):
        rids, policies = [], []
        try:
            bill = transaction(lambda conn: compare.bill(conn, planned), "price the comparison", say=print)
            for line in bill.lines():
                print(f"budget: {line}")
            for p in planned:
                rid, policy = plan(p.spec, p.mechanism, p.params)
                rids.append(rid)
                policies.append(policy)
        except Exception as exc:  # the bill or a candidate refused at plan: nothing of the comparison runs
            for rid in rids:
                outcomes.fail(rid, exc, flow_run.get_id())
            if isinstance(exc, TrajpubError):
                return refused(exc)
            raise
        record = {"name": comparison.name, "flow_run_id": str(flow_run.get_id()), "recommended": None,
                  "candidates": [{"release_id": r, "mechanism": p.spec.mechanism, "params": p.spec.params}
                                 for r, p in zip(rids, planned, strict=True)]}
        transaction(lambda conn: [governance.merge_summary(conn, r, {"comparison": record}) for r in rids],
                    "record the comparison", say=print)
        print(f"comparison {comparison.name}: releases {', '.join(map(str, rids))} planned on {dataset}")
        lineage.deliver(db_engine())
        try:
            return run_candidates(comparison.name, planned, rids, policies, bill.lines(), record)
        finally:
            lineage.deliver(db_engine())


def run_candidates(name: str, planned: list[compare.Planned], rids: list[int], policies: list, bill_lines: list[str],
                   record: dict) -> dict | State:
    first = planned[0].spec
    try:
        with release_slot(db_engine(), first.dataset, first.queue_timeout_s, say=print), \
                dask_client() as client:
            recover_interrupted(first.dataset, running=rids[0])
            clean = ingest_and_validate(client, first, rids[0])
            transaction(lambda conn: [compare.share_validation(conn, rids[0], r) for r in rids[1:]],
                        "share the validation", say=print)
            raw = pd.concat(client.gather(client.map(lambda df: df[["lon", "lat"]], clean)), ignore_index=True)
            # the mechanisms run concurrently (Prefect's thread pool, each on the shared Dask cluster); audits follow
            # in the order the candidates were listed, their attacks in parallel on the cluster
            protected = [prepare_and_protect.submit(client, p.spec, p.mechanism, rid, p.params, p.inputs, clean,
                                                    policy.policy.controls)
                         for p, rid, policy in zip(planned, rids, policies, strict=True)]
            released = []
            for p, rid, policy, future in zip(planned, rids, policies, protected, strict=True):
                result = audit_candidate(client, p, rid, policy, future)
                if result is not None:
                    released.append((f"#{rid} {p.label}", *density_frame(result)))
            results = transaction(lambda conn: [compare.outcome(conn, r, p.label)
                                                for r, p in zip(rids, planned, strict=True)], "read the outcomes")
            recommendation = recommend(results)
            densities = compare_review.density_maps(raw, released) if released else None
    except Exception as exc:
        for rid in rids:
            if outcomes.release(rid)["status"] not in governance.FINAL:
                outcomes.fail(rid, exc, flow_run.get_id())
        raise
    record = {**record, "recommended": recommendation.release_id}

    def to_review(conn) -> list[dict]:
        for o in results:
            governance.merge_summary(conn, o["release_id"], {"comparison": record})
            if o["status"] == "audited":
                governance.transition(conn, o["release_id"], "awaiting_approval", f"a candidate of comparison {name}")
        return [compare.outcome(conn, r, p.label) for r, p in zip(rids, planned, strict=True)]

    results = transaction(to_review, "open the review", say=print)
    page = compare_review.page(name, first.dataset, results, recommendation, bill_lines,
                               compare_review.frontier_plot(results), densities)
    path = report.write_private(report.REPORT_DIR / f"comparison-{record['flow_run_id']}.html", page)
    artifact = create_markdown_artifact(key=f"comparison-{name.replace('_', '-')}-r{rids[0]}",
                                        markdown=report.page_body(page),
                                        description=f"Comparison {name}: the steward's review of {len(rids)} "
                                                    "candidates")
    print(f"comparison review: {path}; recommended: {recommendation.reason}")
    if recommendation.release_id is None:
        reason = f"comparison {name}: {recommendation.reason}"
        return blocked(reason, {"comparison": name, "releases": rids, "status": "nothing to pick", "published": None,
                                "reason": reason})
    markdown = compare_review.markdown(name, results, recommendation, str(artifact))
    create_markdown_artifact(key=f"pick-{name.replace('_', '-')}-r{rids[0]}", markdown=markdown,
                             description=f"Steward pick of comparison {name}")
    print(f"comparison {name} awaits the steward's pick: trajpub release pick {recommendation.release_id} "
          "--steward NAME")
    return await_pick(name, rids, recommendation.release_id, markdown, first.approval_timeout_s)


def audit_candidate(client, p: compare.Planned, rid: int, policy, protected):
    """Audit one candidate once its mechanism has run; returns its result when it was audited. A candidate that
    failed or released nothing ends so (recorded) without stopping the others."""
    try:
        raw, result = protected.result()
        if result.released_nothing:
            nothing_released(p.spec, rid)
            return None
        if audit_and_gate(client, p.spec, rid, policy, raw, result).blocked:
            outcomes.abort(rid, "blocked by the audit gate", flow_run.get_id())
            print(f"candidate {p.label} (release {rid}) is BLOCKED by the audit gate")
        return result
    except Exception as exc:  # noqa: BLE001 - recorded as the candidate's failure; the comparison goes on
        outcomes.fail(rid, exc, flow_run.get_id())
        print(f"candidate {p.label} (release {rid}) FAILED: {exc}")
        return None


def density_frame(result) -> tuple[pd.DataFrame, object]:
    """A candidate's released points for the density map (fragments weighted by their estimated counts)."""
    if result.shape is Shape.FRAGMENTS:
        pts = result.fragments.explode(["lon", "lat"])
        return pts, pts["estimated_count"].to_numpy(float)
    return result.points, None


def await_pick(name: str, rids: list[int], recommended: int, markdown: str, timeout_s: float) -> dict:
    """Pause for the steward's pick until it is valid (a wrong code, or a release not among the candidates that
    await approval, asks again) or the timeout passes (the candidates then stay awaiting approval: ``trajpub
    release pick`` still publishes one)."""
    attempt = 0
    while True:
        answer = wait_for_answer(StewardPick.with_initial_data(description=markdown, pick=recommended), timeout_s,
                                 f"pick-{rids[0]}-{attempt}")
        if answer is None:
            get_run_logger().warning("no pick before the timeout: the candidates stay awaiting_approval")
            return {"comparison": name, "releases": rids, "status": "awaiting_approval", "published": None}
        try:
            return conclude(name, rids, answer.pick, answer.comment, answer.decision_code)
        except PolicyError as exc:
            print(f"the pick was refused: {exc}; waiting for another")
            attempt += 1


def conclude(name: str, rids: list[int], picked: int, comment: str | None, code: str | None) -> dict:
    """Record the pick unless ``trajpub release pick`` did, publish it, and discard the other candidates: the ones
    not picked are rejected (sql/021) and every other candidate's staging is purged, with a lineage ABORT."""
    if picked not in rids:
        raise PolicyError(f"release {picked} is not a candidate of comparison {name} "
                          f"({', '.join(map(str, rids))})", "pick")
    if outcomes.approval(picked) is None:
        steward = compare.pick_by_code(db_engine(), picked, comment, code or "")
        print(f"release {picked} picked by {steward}")
    outcome = outcomes.publish_or_fail(picked, flow_run.get_id())
    if outcome["status"] != "published":
        raise TrajpubError(f"release {picked} was picked and not published: {outcome['reason']}", "publish")
    print(f"release {picked} published as {outcome['table']}")
    discard(name, rids, picked)
    return {"comparison": name, "releases": rids, "status": "published", "published": picked,
            "table": outcome["table"]}


def discard(name: str, rids: list[int], picked: int) -> None:
    """Purge the staging of every candidate but ``picked`` (nothing of theirs stays to be published); a candidate
    rejected as not picked also ends with a lineage ABORT saying so."""
    for rid in rids:
        if rid != picked and compare.discard_staging(name, rid) == "rejected":
            outcomes.abort(rid, f"not picked in comparison {name}: release {picked} was published", None)
