"""``trajpub release`` and the commands around a release: run, compare, pick, inspect, report, export, deploy
on a schedule, backfill, recover, publish an approved release."""

from __future__ import annotations

import json
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
from flows.cli.steward import hand_to_waiting_flow
from tasks.db import transaction
from trajpub import config
from trajpub.errors import ParameterError, TrajpubError


@main.group()
def release() -> None:
    """Run and inspect releases."""


def spec_dict(spec_file: Path | None, mechanism: str | None, overrides: dict) -> dict:
    """The spec file's mapping with the options' overrides. ``--mechanism`` naming another mechanism than the
    spec's starts from that mechanism's example spec (``example.yaml`` of its package): its parameters
    replace the spec's (which belong to the other mechanism); without ``--spec`` the whole example is the start."""
    from mechanisms.registry import example_spec_file
    from trajpub.spec import read_spec_file

    data = read_spec_file(spec_file) if spec_file else {}
    if mechanism is not None and (mechanism != data.get("mechanism") or not spec_file):
        from mechanisms.registry import registered

        registered(mechanism)  # an unknown name is refused with the available ones
        example = read_spec_file(example_spec_file(mechanism))
        data = {**data, "mechanism": mechanism, "params": example.get("params", {})} if spec_file else example
    for key, value in overrides.items():
        if value not in (None, ()):
            data[key] = value
    return data


def _parse_params(items: tuple[str, ...]) -> dict:
    import yaml

    params = {}
    for item in items:
        if "=" not in item:
            raise TrajpubError(f"parameter {item!r} must look like KEY=VALUE", "--param")
        key, value = item.split("=", 1)
        try:
            params[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise TrajpubError(f"the value of parameter {key!r} is not a YAML value: {value[:60]!r}",
                               "--param") from None
    return params


def parse_bbox_option(text: str) -> list[str]:
    """``--bbox MIN_LON,MIN_LAT,MAX_LON,MAX_LAT``: four values, checked as numbers and as a bbox by the spec."""
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 4:
        raise ParameterError(f"--bbox must be four comma-separated numbers MIN_LON,MIN_LAT,MAX_LON,MAX_LAT (degrees, "
                             f"EPSG:4326), got {text[:80]!r}", "--bbox")
    return parts


def parse_window_option(text: str) -> tuple[str | None, str | None]:
    """``--window START/END``: ISO dates or times (UTC unless they carry an offset), checked by the spec; an
    empty side leaves that end open."""
    if text.count("/") != 1:
        raise ParameterError(f"--window must look like START/END with ISO dates or times, e.g. 2008-02-02/2008-02-03"
                             f" (an empty side is open), got {text[:80]!r}", "--window")
    start, end = (part.strip() or None for part in text.split("/"))
    return start, end


def release_spec_data(spec_file: Path | None, mechanism: str | None, overrides: dict, params: tuple[str, ...],
                      bbox: str | None, window: str | None) -> dict:
    """The spec of ``release run``: the spec file's (:func:`spec_dict`), with the options given on the command
    line instead."""
    data = spec_dict(spec_file, mechanism, overrides)
    if bbox is not None:
        data["bbox"] = parse_bbox_option(bbox)
    if window is not None:
        data["window_start"], data["window_end"] = parse_window_option(window)
    if params:
        data["params"] = {**data.get("params", {}), **_parse_params(params)}
    return data


@release.command("run")
@click.option("--spec", "spec_file", type=click.Path(path_type=Path), help="Release spec YAML.")
@click.option("--dataset", callback=valid_dataset)
@click.option("--mechanism", help="Release with this mechanism, starting from its example parameters "
                                  "(mechanisms/<mechanism>/example.yaml) instead of the spec's.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Mechanism parameter (repeatable).")
@click.option("--bbox", metavar="MIN_LON,MIN_LAT,MAX_LON,MAX_LAT",
              help="The public bounding box (degrees), instead of the spec's; points outside it are quarantined.")
@click.option("--window", metavar="START/END",
              help="The snapshot's time window, instead of the spec's: ISO dates or times (UTC unless they carry "
                   "an offset), START included, END excluded; an empty side is open, e.g. 2008-02-02/.")
@click.option("--requested-by")
@click.option("--approval-timeout", "approval_timeout_s", type=float, help="Seconds to wait for the steward.")
@click.option("--wait", is_flag=True, help="Stay in the foreground until the release ends (published, rejected, "
                                           "blocked) instead of returning once it awaits its steward.")
@click.option("--flow-run-name", hidden=True, help="The flow run's name (set by a release run that returns).")
def release_run(spec_file, dataset, mechanism, params, bbox, window, requested_by, approval_timeout_s, wait,
                flow_run_name) -> None:
    """Run a governed release. It returns once the release awaits its steward's decision after the audit gate,
    printing the release id and the command to decide (the flow run goes on in the background and publishes
    when approved; its output goes to .trajpub/runs/), or when it ends before (blocked: exit code 3; refused or
    failed: 1). ``--wait`` stays until the release ends. It runs on a local Dask cluster of its own, or on the
    operator's scheduler (TRAJPUB_DASK_ADDRESS)."""
    data = release_spec_data(spec_file, mechanism, {"dataset": dataset, "requested_by": requested_by,
                                                    "approval_timeout_s": approval_timeout_s}, params, bbox, window)
    from tasks import policies, windows

    # a relative window: resolved now, as the run records it (by hand: the last complete window with data)
    spec, _ = windows.parse_resolved(pipeline_engine(), data, latest_with_data=True)
    policies.check(spec)  # fail fast, before a flow run exists (and before the flow's heavy imports)
    from tasks import governance

    transaction(lambda conn: governance.check_requester(conn, spec.requested_by), "check the requester",
                pipeline_engine())
    if not wait:
        from flows.launch import start

        started = start({**spec.to_record(), "seed": spec.seed}, _to_stderr)  # the window resolved now, as --wait
        if started.outcome is None:
            click.echo(started.output, nl=False)
            sys.exit(started.exit_code)
        rid = started.outcome["release_id"]
        click.echo(f"release {rid} awaits its steward; the flow run goes on in the background (output: "
                   f"{started.log}). Review: trajpub release show {rid}; trajpub report {rid}. Decide: trajpub "
                   f"approve {rid} --steward LOGIN, or trajpub reject {rid} --steward LOGIN --comment WHY")
        click.echo(json.dumps(started.outcome))
        return
    from flows.release import release_flow
    tracebacks_to_the_log_only()
    run = release_flow.with_options(flow_run_name=flow_run_name) if flow_run_name else release_flow
    click.echo(json.dumps(_unless_blocked(lambda: run(spec=spec))))


@release.command("compare")
@click.option("--spec", "spec_file", type=click.Path(path_type=Path), required=True,
              help="Comparison spec YAML: the shared release spec and a list of candidates (e.g. "
                   "flows/specs/compare/tdrive_compare.yaml).")
@click.option("--yes", is_flag=True, help="Charge the candidates without asking (the total is still printed).")
@click.option("--wait", is_flag=True, help="Stay in the foreground until the comparison ends (a pick published) "
                                           "instead of returning once it awaits the steward's pick.")
@click.option("--flow-run-name", hidden=True, help="The flow run's name (set by a comparison that returns).")
def release_compare(spec_file: Path, yes: bool, wait: bool, flow_run_name: str | None) -> None:
    """Compare candidate releases of one snapshot; every candidate is charged its epsilon (the total is shown
    first), and the steward picks the one to publish. It returns once the candidates await the steward's pick
    (the flow run goes on in the background; its output goes to .trajpub/runs/), or when it ends before (no
    candidate to recommend: exit code 3; refused or failed: 1); ``--wait`` stays until it ends. Runs on Dask as
    ``release run`` does."""
    from trajpub.spec import read_spec_file

    data = read_spec_file(spec_file)
    from tasks import compare, governance, policies

    _, planned = compare.parse(data)  # every candidate checked before anything is charged or read
    policies.check(planned[0].spec)
    transaction(lambda conn: governance.check_requester(conn, planned[0].spec.requested_by), "check the requester",
                pipeline_engine())
    planned = compare.resolve(pipeline_engine(), planned)  # the public inputs each candidate names
    # refused over a cap here, before a flow run exists
    bill = transaction(lambda conn: compare.bill(conn, planned), "price the comparison", pipeline_engine())
    if flow_run_name is None:  # a comparison started in the background: its command printed the bill
        click.echo(f"{len(planned)} candidates on {planned[0].spec.dataset}; each is charged before it runs:")
        for line in bill.lines():
            click.echo(line)
    if not yes and not click.confirm("Charge these candidates and run the comparison?", default=False):
        raise TrajpubError("the comparison was not started: nothing was charged", "release compare")
    if not wait:
        from flows.launch import comparison_awaits, start

        started = start(data, _to_stderr, command=("compare", "--yes"), awaits=comparison_awaits)
        if started.outcome is None:
            click.echo(started.output, nl=False)
            sys.exit(started.exit_code)
        ids = ", ".join(str(r["release_id"]) for r in started.outcome["releases"])
        click.echo(f"the candidates (releases {ids}) await the steward's pick; the flow run goes on in the background "
                   f"(output: {started.log}). Review: trajpub release show ID; the comparison's report in the "
                   "Prefect UI. Pick: trajpub release pick ID --steward LOGIN")
        click.echo(json.dumps(started.outcome))
        return
    from flows.compare import compare_flow
    tracebacks_to_the_log_only()
    run = compare_flow.with_options(flow_run_name=flow_run_name) if flow_run_name else compare_flow
    comparison, _ = compare.parse(data)  # parsed here: a run's parameters never carry a seed (test mode's does)
    click.echo(json.dumps(_unless_blocked(lambda: run(spec=comparison))))


def _to_stderr(line: str) -> None:
    """A line of a background run's log, relayed: logs go to stderr, the outcome alone to stdout."""
    click.echo(line, err=True)


def _unless_blocked(run) -> dict:
    """The outcome of ``run`` (a flow called as a function); a run that ends ``Blocked`` prints its outcome,
    then its reason in one sentence on stderr, and exits with :attr:`ReleaseBlocked.EXIT_CODE` (3), so that a
    script tells it from a release that reached the steward (0) and from an error or a refusal (1). A rejected
    release (its run ends ``Rejected``, not Completed) reached its steward: its outcome, exit 0."""
    from trajpub.errors import ReleaseBlocked, ReleaseRejected

    try:
        return run()
    except ReleaseRejected as exc:
        return exc.outcome
    except ReleaseBlocked as exc:
        click.echo(json.dumps(exc.outcome))
        click.secho(f"blocked: {exc}", fg="red", err=True)
        sys.exit(ReleaseBlocked.EXIT_CODE)


@release.command("pick")
@click.argument("release_id", type=int)
@STEWARD_OPTION
@click.option("--comment", help="Why this candidate.")
@click.option("--wait", "wait_s", type=float, default=120, show_default=True,
              help="Seconds to wait for the waiting comparison flow to publish.")
def release_pick(release_id: int, steward: str, comment: str | None, wait_s: float) -> None:
    """Pick the candidate of a comparison to publish: it is approved and the comparison's other candidates that
    await approval are rejected as not picked, as your login; their staging is discarded."""
    from tasks import compare, governance

    tracebacks_to_the_log_only()
    rel, login, rids = transaction(lambda conn: (governance.get_release(conn, release_id),
                                                 compare.pick(conn, release_id, comment),
                                                 compare.candidates(conn, release_id)), "pick", steward_engine(steward))
    click.echo(f"release {release_id} picked by {login}")
    if hand_to_waiting_flow(rel, {"pick": release_id, "decision_code": "", "comment": comment or ""},
                             "published", wait_s):
        return
    from flows.compare import discard
    from flows.release import finish_approved

    tracebacks_to_the_log_only()
    outcome = finish_approved(release_id)
    name = ((rel["summary"] or {}).get("comparison") or {}).get("name", f"of release {release_id}")
    if outcome["status"] == "published":
        discard(name, rids, release_id)
    click.echo(json.dumps(outcome))


@release.command("list")
@click.option("--dataset", callback=valid_dataset)
def release_list(dataset: str | None) -> None:
    from tasks import governance

    rows = transaction(lambda conn: governance.list_releases(conn, dataset), "list releases", pipeline_engine())
    click.echo(table(rows, ["release_id", "dataset", "mechanism", "status", "requested_by", "created_at",
                             "published_table"]))


@release.command("show")
@click.argument("release_id", type=int)
def release_show(release_id: int) -> None:
    """Everything about one release: status history, validation, audits, approval, budget, lineage."""
    from tasks import governance, lineage, report
    from tasks.report import DECIDE_ON_WORDS, mechanism_rows
    from tasks.review import read_review
    from trajpub.guarantee import empirical_bound_words

    review, events, broken, page = transaction(
        lambda conn: (read_review(conn, release_id), lineage.events(conn, release_id),
                      governance.evidence_break(conn, release_id), governance.stored_report(conn, release_id)),
        "read the release", pipeline_engine())
    rel, g, decision = review.release, review.guarantee, review.approval
    click.echo(f"release {release_id}: {rel['mechanism']} on {rel['dataset']} — {rel['status'].upper()}")
    if rel["failure_reason"]:
        click.echo(f"failure: {rel['failure_reason']}")
    click.echo(f"requested by {rel['requested_by']}; flow run {rel['flow_run_id']}; {review.snapshot}")
    click.echo(f"window: {review.window}")
    click.echo(f"published table: {rel['published_table'] or '-'}")
    click.echo(f"gate policy: {review.policy_label}")
    click.echo(f"parameters: {json.dumps(rel['params'])}")
    click.echo(f"\nguarantee: {g.get('statement', '-')}")
    if bound := empirical_bound_words(g):
        click.echo(f"  {bound}")
    for c in g.get("caveats", []):
        click.echo(f"  caveat: {c}")
    click.echo("\nstatus history:\n" + table(list(review.transitions), ["at", "from_status", "to_status", "detail"]))
    if v := review.validation:
        click.echo(f"\nvalidation: {v['n_quarantined']:,} of {v['n_rows']:,} raw points quarantined"
                   + (" (a point may fail several expectations):" if review.quarantine_reasons else ""))
        for line in review.quarantine_words():
            click.echo(f"  {line}")
    click.echo("\naudits (cells_m: the adversary's grid, 0 = no grid):\n"
               + table([audit_row(a) for a in review.audits], ["attack", "cells_m", "success", "ci_low", "ci_high",
                                                                 "baseline", "risk", "risk_ci", "threshold",
                                                                 "verdict", "outcome", "error"]))
    for attack, size, why in review.set_aside:
        click.echo(f"  set aside: {attack} at {size} m: {why}; the gate decided on its other cell sizes")
    click.echo(f"  {DECIDE_ON_WORDS[review.decide_on]}")
    run = mechanism_rows(review.mechanism_run)
    if run:
        click.echo("\nmechanism run (steward only, never in lineage):\n"
                   + "\n".join(f"  {name}: {value}" for name, value in run))
    if review.utility:
        click.echo("\nutility: " + json.dumps(review.utility))
    click.echo("\napproval: " + (f"{decision['decision']} by {decision['steward']} at {decision['decided_at']}"
                                 + (f" ({decision['comment']})" if decision["comment"] else "") if decision else "-"))
    if rel["status"] in ("awaiting_approval", "approved", "published"):
        click.echo("\nevidence: " + (f"BROKEN: {broken}" if broken else
                                     "intact (charge, seal, the auditor's attested audit, report and gate)"))
    click.echo(f"review report: {report.artifact_words(release_id, page)}")
    click.echo("\nprivacy budget:\n" + "\n".join(f"  {line}" for line in review.budget))
    click.echo("\nlineage events:")
    for e in events:
        ev = e["event"]
        click.echo(f"  {e['event_type']:8s} {e['event_time']}  inputs={[i['name'] for i in ev['inputs']]} "
                   f"outputs={[o['name'] for o in ev['outputs']]} facets={sorted(ev['run']['facets'])}")


def audit_row(a: dict) -> dict:
    """An audit row of the review record as ``release show`` lists it: figures rounded as a reader compares
    them (4 digits, the baseline 5), the verdict as the review words it (:func:`tasks.report.attack_verdict`)."""
    from tasks.report import attack_verdict

    def rounded(key: str, digits: int = 4) -> str | None:
        return None if a[key] is None else f"{a[key]:.{digits}f}"

    return {"attack": a["attack"], "cells_m": a["resolution_m"], "success": rounded("success_rate"),
            "ci_low": rounded("ci_low"), "ci_high": rounded("ci_high"), "baseline": rounded("baseline", 5),
            "risk": rounded("risk"),
            "risk_ci": None if a["risk_ci_low"] is None else f"[{a['risk_ci_low']:.4f}, {a['risk_ci_high']:.4f}]",
            "threshold": a["threshold"], "verdict": attack_verdict(a), "outcome": a["outcome"], "error": a["error"]}


@main.command("report")
@click.argument("release_id", type=int)
@click.option("--out", type=click.Path(path_type=Path), help="Write the page here (default: the report folder).")
def review_report(release_id: int, out: Path | None) -> None:
    """Write a release's review report (one self-contained HTML page) and print its path."""
    from tasks import governance, report

    page = transaction(lambda conn: governance.review_page(conn, release_id), "read the report", pipeline_engine())
    click.echo(str(report.write_private(out or report.report_path(release_id), page)))


@main.command("export")
@click.argument("release_id", type=int)
@click.option("--format", "fmt", required=True, type=click.Choice(["geoparquet", "gpkg", "flatgeobuf"]))
@click.option("--out", required=True, type=click.Path(path_type=Path), help="The file to write (not overwritten).")
def export(release_id: int, fmt: str, out: Path) -> None:
    """Export a published release with its guarantee, utility verdict and lineage run id in the file's metadata
    (read as the consumer role); prints the files written."""
    from tasks.db import database_url, engine
    from tasks.export import export_release

    for layer, path in export_release(engine(database_url(config.CONSUMER)), release_id, fmt, out).items():
        click.echo(f"{layer}: {path}")


@main.command("publish-approved")
@click.argument("release_id", type=int)
def publish_approved(release_id: int) -> None:
    """Publish an approved release whose flow run is no longer waiting (idempotent)."""
    from flows.release import publish_approved as publish

    tracebacks_to_the_log_only()
    outcome = publish(release_id)
    click.echo(json.dumps(outcome))
    if outcome["status"] != "published":
        raise TrajpubError(f"release {release_id} was not published: {outcome['reason']}", "publish-approved")


@main.command()
@click.option("--spec", "spec_file", type=click.Path(path_type=Path, exists=True), required=True,
              help="The release spec the scheduled runs use (the UI can change it per run).")
@click.option("--name", required=True, help="Deployment name, e.g. tdrive-weekly.")
@click.option("--cron", default="0 3 * * 1", show_default=True, help="Cron schedule.")
@click.option("--timezone", default="UTC", show_default=True, help="IANA time zone of the schedule.")
def deploy(spec_file: Path, name: str, cron: str, timezone: str) -> None:
    """Serve the release flow as a scheduled deployment (runs until interrupted)."""
    from flows.deploy import serve

    serve(spec_file, name, cron, timezone, say=click.echo)


@main.command()
@click.option("--dataset", help="Only this dataset's releases.", callback=valid_dataset)
def recover(dataset: str | None) -> None:
    """After a crash: mark releases whose flow process died mid-computation as failed (saying so), and publish
    approved releases whose publication was interrupted. Safe to run at any time."""
    from flows.release import finish_approved, recover_interrupted
    from tasks import governance

    tracebacks_to_the_log_only()
    failed = recover_interrupted(dataset)
    approved = transaction(lambda conn: governance.approved_releases(conn, dataset), "list approved releases",
                           pipeline_engine())
    outcomes = [finish_approved(rid) for rid in approved]
    for o in outcomes:
        click.echo(f"release {o['release_id']} was approved but not published; now "
                   + (f"published: {o['table']}" if o["status"] == "published" else f"failed: {o['reason']}"))
    n_published = sum(o["status"] == "published" for o in outcomes)
    click.echo(f"recovered: {len(failed)} interrupted release(s) marked failed"
               + (f" ({', '.join(map(str, failed))})" if failed else "")
               + f", {n_published} approved release(s) published"
               + (f", {len(outcomes) - n_published} could not be published and failed" if
                  len(outcomes) > n_published else ""))


@main.command("backfill")
@click.argument("deployment")
@click.option("--start", "start", required=True,
              help="Start of the first step (ISO date or time; without an offset, in the dataset's time zone).")
@click.option("--end", "end", required=True, help="End of the last step (exclusive), a whole number of steps on.")
@click.option("--every", default="1d", show_default=True,
              help="The step between run times: Nd, Nw or Nh. Each run is the one the schedule would have made at "
                   "the end of its step.")
@click.option("--dataset", help="Release this dataset instead of the deployment's.", callback=valid_dataset)
@click.option("--requested-by", help="Who asks for the backfill (recorded with each release).")
@click.option("--yes", is_flag=True, help="Charge the windows without asking (the bill is still printed).")
@click.option("--run-timeout", "timeout_s", type=float, default=3600, show_default=True,
              help="Seconds to wait for each window's run to reach the steward before the next one starts.")
def backfill_command(deployment: str, start: str, end: str, every: str, dataset: str | None,
                     requested_by: str | None, yes: bool, timeout_s: float) -> None:
    """Run DEPLOYMENT (e.g. release/tdrive-weekly) for past dates, each a governed release: every date's window
    is resolved in the dataset's time zone and the whole backfill is priced first (refused over a cap before
    anything starts); the windows then run in order, each once the previous one has reached the steward."""
    from flows.deploy import plan_backfill, run_backfill
    from tasks.windows import SKIPPED
    from trajpub.window import parse_duration

    step = parse_duration(every, "backfill --every")
    overrides = {k: v for k, v in (("dataset", dataset), ("requested_by", requested_by)) if v}
    plan = plan_backfill(deployment, start, end, step, overrides)
    click.echo(f"{len(plan.runs)} window(s) of {plan.runs[0][1].spec.dataset}; each is charged when it runs:")
    for line in plan.lines():
        click.echo(line)
    if not yes and not click.confirm("Charge these windows and run the backfill?", default=False):
        raise TrajpubError("the backfill was not started: nothing was charged", "backfill")
    tracebacks_to_the_log_only()
    outcomes = run_backfill(plan, click.echo, timeout_s)
    for o in outcomes:
        click.echo(f"flow run {o['flow_run_id']}: window {o['window']}: "
                   + (f"release {o['release_id']} {o['status']}" if o["release_id"] else
                      SKIPPED if o["status"] == "skipped" else o["status"])
                   + (f" ({o['message']})" if o["status"] in ("failed", "refused", "blocked") and o["message"] else ""))
    failed = [o for o in outcomes
              if o["status"] not in ("awaiting_approval", "blocked", "published", "rejected", "skipped")]
    if failed:
        raise TrajpubError(f"{len(failed)} of {len(outcomes)} window(s) did not reach the steward (see above)",
                           "backfill")
