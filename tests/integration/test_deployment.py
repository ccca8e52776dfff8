"""The scheduled deployment: served by `trajpub deploy`, re-run with changed parameters through the Prefect API
(what the UI's "Run" does), then approved and published."""

from __future__ import annotations

import os
import subprocess
import uuid
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from playwright.sync_api import expect
from prefect.client.orchestration import get_client
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound

from tests.integration.browser import chromium_page
from tests.integration.conftest import TRAJPUB, base_spec, cli, wait_until
from tests.integration.test_ui_approval import log_in
from trajpub.spec import ReleaseSpec

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served(loaded_tdrive, tmp_path_factory):
    """One served deployment for the module's tests: its schedule, its run form and a manual run of it."""
    dataset = loaded_tdrive("dep")
    spec = base_spec(dataset)
    spec.pop("seed")
    path = tmp_path_factory.mktemp("served") / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    name = f"test-{uuid.uuid4().hex[:6]}"
    proc = subprocess.Popen([TRAJPUB, "deploy", "--spec", str(path), "--name", name, "--cron", "0 3 * * 1",
                             "--timezone", "Asia/Shanghai"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "TRAJPUB_TEST_MODE": "1"})
    def registered():
        assert proc.poll() is None, proc.stdout.read()
        with get_client(sync_client=True) as client:
            try:
                return client.read_deployment_by_name(f"release/{name}")
            except ObjectNotFound:  # not registered yet
                return None

    deployment = wait_until(registered, 120, f"deployment release/{name}")
    yield dataset, name, deployment
    proc.terminate()
    proc.wait(timeout=60)


def test_deployment_has_cron_schedule_and_default_spec(served):
    dataset, _, deployment = served
    [schedule] = deployment.schedules
    assert (schedule.schedule.cron, schedule.schedule.timezone) == ("0 3 * * 1", "Asia/Shanghai")
    assert deployment.parameters["spec"]["dataset"] == dataset


def test_the_deployment_run_form_has_the_spec_fields(served):
    """The Prefect UI draws the run form from the deployment's parameter schema: the spec's fields, typed and
    labelled in words (the window's ends too, not `str (Optional)`), plain descriptions, and no seed field."""
    _, _, deployment = served
    spec = deployment.parameter_openapi_schema["properties"]["spec"]
    assert set(spec["properties"]) == {f.name for f in fields(ReleaseSpec)} - {"seed"}
    assert "dask_address" not in spec["properties"]  # the operator's setting, not the requester's
    assert spec["properties"]["bbox"]["type"] == "array" and spec["properties"]["dataset"]["type"] == "string"
    with chromium_page() as page:  # the custom run form in the real UI: one labelled field per spec field
        log_in(page, f"/deployments/deployment/{deployment.id}/run")
        for name in ("dataset", "mechanism", "bbox", "window_start", "window_end", "window", "approval_timeout_s"):
            label = spec["properties"][name]["title"] + ("" if name in spec["required"] else " (Optional)")
            expect(page.locator(".p-label").filter(has=page.get_by_text(label, exact=True)).first).to_be_visible()
        expect(page.get_by_text("Window start (Optional)", exact=True).first).to_be_visible()
        expect(page.get_by_text("First instant read, an ISO date or time", exact=False).first).to_be_visible()
        text = page.locator("body").inner_text()
        for unreadable in ("Seed", "str (Optional)", ":mod:", ":meth:", "``"):
            assert unreadable not in text, unreadable


def test_manual_run_with_changed_parameters_is_governed_and_published(engine, served):
    _, name, deployment = served
    spec = dict(deployment.parameters["spec"])
    # more budget than the deployment's default: the run draws its own seed (none in a deployment's spec), and at
    # epsilon 8 a draw on 40 taxis can fall under the gate's utility floor (circle queries 1.08 > 1 once)
    spec["params"] = {**spec["params"], "epsilon": 12.0}
    flow_run = run_deployment(f"release/{name}", parameters={"spec": spec}, timeout=0)
    def settled():
        with engine.connect() as conn:
            row = conn.execute(sa.text("SELECT release_id, status, params FROM governance.releases "
                                       "WHERE flow_run_id = :f"), {"f": flow_run.id}).first()
        return row if row and row.status in ("awaiting_approval", "failed", "blocked") else None

    row = wait_until(settled, 300, f"the release of flow run {flow_run.id} to reach the steward")
    assert row.status == "awaiting_approval", row
    assert row.params["epsilon"] == 12.0
    approved = cli("approve", str(row.release_id), "--steward", "alice")
    assert approved.returncode == 0, approved.stderr
    with engine.connect() as conn:
        status, eps = conn.execute(sa.text(
            "SELECT r.status, l.epsilon FROM governance.releases r JOIN governance.budget_ledger l USING "
            "(release_id) WHERE release_id = :r"), {"r": row.release_id}).one()
    assert (status, eps) == ("published", 12.0)


@pytest.fixture(scope="module")
def yaml_deployments(tmp_path_factory):
    """The deployments of prefect.yaml, registered with `prefect deploy --all`, and the trajpub worker, which
    creates the `trajpub` pool (docs/operations.md, "Deploy and schedule"); yields the worker's log (its flow
    runs' output too: the serving log an operator reads)."""
    from trajpub.config import PROJECT_ROOT

    env = {**os.environ, "TRAJPUB_TEST_MODE": "1"}
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen([TRAJPUB, "worker", "start"], cwd=PROJECT_ROOT, env=env, stdout=out,
                                  stderr=subprocess.STDOUT)

    def pool_exists() -> bool:
        with get_client(sync_client=True) as client:
            try:
                return client.read_work_pool("trajpub").type == "trajpub"
            except ObjectNotFound:
                return False

    wait_until(pool_exists, 120, "the trajpub worker to create its pool")
    done = subprocess.run([str(Path(TRAJPUB).with_name("prefect")), "--no-prompt", "deploy", "--all"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    yield log
    worker.terminate()  # its flow runs have ended (the backfill test waits for them); a slow shutdown is killed
    try:
        worker.wait(timeout=10)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait(timeout=30)


def test_prefect_yaml_deployments_have_cron_schedules_and_time_zones(yaml_deployments):
    with get_client(sync_client=True) as client:
        weekly = client.read_deployment_by_name("release/tdrive-weekly")
        monthly = client.read_deployment_by_name("release/tdrive-fgs-monthly")
        comparison = client.read_deployment_by_name("compare/tdrive-compare")  # on demand: no schedule
    assert [(s.schedule.cron, s.schedule.timezone, s.active) for s in weekly.schedules] == [
        ("0 3 * * 1", "Asia/Shanghai", True)]
    assert [(s.schedule.cron, s.schedule.timezone) for s in monthly.schedules] == [("0 4 1 * *", "Asia/Shanghai")]
    assert (weekly.work_pool_name, weekly.parameters["spec"]["mechanism"]) == ("trajpub", "objtrace")
    assert not comparison.schedules and len(comparison.parameters["spec"]["candidates"]) == 3


def _weekly_runs() -> int:
    """How many flow runs of the weekly deployment the Prefect server holds that were asked for (the server's
    scheduler adds the next Mondays' runs of the active schedule whenever its loop comes round: not counted)."""
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(deployment_filter=DeploymentFilter(
            name=DeploymentFilterName(any_=["tdrive-weekly"])), limit=200)
    return sum(not run.auto_scheduled for run in runs)


def test_a_backfill_over_the_cap_is_refused_whole_before_anything_starts(engine, owner, loaded_tdrive,
                                                                        yaml_deployments):
    """Two past weeks of the weekly deployment (ObjTrace, epsilon 5 per taxi each) against a cap of 7: the bill is
    refused in one sentence, exit 1, no flow run started and no release recorded (no data read); two dates of
    the same week, and a steward who answers no, are refused the same way."""
    dataset = loaded_tdrive("bfcap")
    with owner.begin() as conn:
        conn.execute(sa.text("UPDATE governance.datasets SET epsilon_cap = 7 WHERE dataset = :d"), {"d": dataset})
    before = _weekly_runs()
    weeks = ["backfill", "release/tdrive-weekly", "--dataset", dataset, "--start", "2008-01-28", "--end",
             "2008-02-11", "--every", "7d", "--requested-by", "backfill-operator"]
    over = cli(*weeks)
    assert over.returncode == 1, over.stdout + over.stderr
    assert over.stderr.startswith("error: the windows together need epsilon-DP epsilon 10 per object"), over.stderr
    assert "only 2 of the cap 7 per object left" in over.stderr and "Traceback" not in over.stderr + over.stdout
    same_week = cli(*weeks[:6], "--end", "2008-02-06", "--every", "1d", "--requested-by", "backfill-operator")
    assert same_week.returncode == 1 and "resolve to the same window" in same_week.stderr, same_week.stderr
    with owner.begin() as conn:
        conn.execute(sa.text("UPDATE governance.datasets SET epsilon_cap = 20 WHERE dataset = :d"), {"d": dataset})
    declined = subprocess.run([TRAJPUB, *weeks], input="n\n", capture_output=True, text=True, timeout=120,
                              check=False, env={**os.environ, "TRAJPUB_TEST_MODE": "1"})
    assert declined.returncode == 1 and "TOTAL epsilon-DP: epsilon 10 per object for 2 window(s)" in declined.stdout
    assert "the backfill was not started" in declined.stderr
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM governance.releases WHERE dataset = :d"),
                            {"d": dataset}).scalar() == 0
    assert _weekly_runs() == before


def test_a_run_by_hand_of_the_weekly_deployment_resolves_the_last_complete_week_with_data(loaded_tdrive,
                                                                                          yaml_deployments):
    """The UI's Run of `tdrive-weekly` ({last: 7d, align: local_week}) today: not the empty week before now but the
    last complete Beijing week that holds data (4 to 10 February 2008). A cap of 1 per object-week refuses it at
    plan, naming that week, before any data is read."""
    dataset = loaded_tdrive("byhand")
    for args in (("unit", dataset, "object", "--period", "week"), ("cap", dataset, "1")):
        done = cli("budget", *args, "--steward", "ada")
        assert done.returncode == 0, done.stderr
    with get_client(sync_client=True) as client:
        spec = dict(client.read_deployment_by_name("release/tdrive-weekly").parameters["spec"])
    flow_run = run_deployment("release/tdrive-weekly", timeout=0,
                              parameters={"spec": {**spec, "dataset": dataset, "requested_by": "backfill-operator"}})

    def ended():
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(flow_run.id).state
        return state if state is not None and state.is_final() else None

    state = wait_until(ended, 300, f"flow run {flow_run.id} to end")
    assert (state.type.value, state.name) == ("FAILED", "Refused"), state
    assert "only 1 of its cap 1 left in the week from 2008-02-04" in state.message, state.message


def test_backfill_runs_one_governed_release_per_past_window_in_order(engine, loaded_tdrive, yaml_deployments):
    """The weekly deployment's relative window ({last: 7d, align: local_week}) for three past Mondays: the local
    weeks before them in Beijing time, priced first, then run one after the other (the second starts once the
    first has reached the steward), each recording its window and how it was resolved, with ObjTrace's
    timestamps inside it. The third week holds no data: it is skipped, not failed (no release, nothing charged,
    exit 0, a line saying so, no traceback)."""
    dataset = loaded_tdrive("bf")
    out = cli("backfill", "release/tdrive-weekly", "--dataset", dataset, "--start", "2008-01-28",
              "--end", "2008-02-18", "--every", "7d", "--requested-by", "backfill-operator", "--yes", timeout=1200)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "TOTAL epsilon-DP: epsilon 10 per object for 2 window(s)" in out.stdout  # the empty week is not billed
    assert "- 2008-02-11T00:00:00+08:00 to 2008-02-18T00:00:00+08:00: no data in the window; its run is skipped" \
        in out.stdout
    assert "Traceback" not in out.stdout + out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("flow run")]
    assert lines[-1].endswith("window 2008-02-11T00:00:00+08:00 to 2008-02-18T00:00:00+08:00: skipped: no data in "
                              "the window"), lines
    skipped_run = lines[-1].split()[2].rstrip(":")
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(uuid.UUID(skipped_run)).state
    assert (state.type.value, state.name) == ("COMPLETED", "Skipped") and "nothing was planned or charged" in \
        state.message
    run_ids = [line.split()[2].rstrip(":") for line in lines[:-1]]
    assert len(run_ids) == 2
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM governance.releases WHERE flow_run_id = :f"),
                            {"f": skipped_run}).scalar() == 0

    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT release_id, status, window_start, window_end, requested_by, flow_run_id, spec, created_at"
            " FROM governance.releases WHERE flow_run_id = ANY(CAST(:ids AS uuid[])) ORDER BY window_start"),
            {"ids": run_ids}).all()
        reached = {r.release_id: conn.execute(sa.text(
            "SELECT min(at) FROM governance.release_transitions WHERE release_id = :r"
            " AND to_status IN ('awaiting_approval', 'blocked', 'failed')"), {"r": r.release_id}).scalar()
                   for r in rows}
    # governed to their end: the weekly spec (ObjTrace, ε 5 per taxi) on 40 taxis (28 of them members, the rest the
    # gate's controls) may be blocked by the utility floor or release nothing; a failed window would be an error
    assert all(r.status in ("awaiting_approval", "blocked") for r in rows), rows
    utc = [(r.window_start.astimezone(UTC), r.window_end.astimezone(UTC)) for r in rows]
    assert utc == [(datetime(2008, 1, 27, 16, tzinfo=UTC), datetime(2008, 2, 3, 16, tzinfo=UTC)),
                   (datetime(2008, 2, 3, 16, tzinfo=UTC), datetime(2008, 2, 10, 16, tzinfo=UTC))]  # Beijing weeks
    assert [r.spec["window"] for r in rows] == [
        {"last": "7d", "align": "local_week", "week_starts": "monday", "resolved_at": at, "timezone": "Asia/Shanghai"}
        for at in ("2008-02-03T16:00:00+00:00", "2008-02-10T16:00:00+00:00")]  # the Mondays' local midnights
    assert {r.requested_by for r in rows} == {"backfill-operator"}
    first, second = rows
    assert second.created_at >= reached[first.release_id]  # in order, not racing
    with engine.connect() as conn:
        for r in (r for r in rows if r.status == "awaiting_approval"):  # its candidate is staged until decided
            outside = conn.execute(sa.text(
                "SELECT count(*) FILTER (WHERE t < :s OR t >= :e), count(*) FROM staging.candidate_points"
                " WHERE release_id = :r"), {"r": r.release_id, "s": r.window_start, "e": r.window_end}).one()
            assert outside[0] == 0 and outside[1] > 0, (r, outside)
    for r in (r for r in rows if r.status == "awaiting_approval"):  # end the waiting runs
        done = cli("reject", str(r.release_id), "--steward", "ada", "--comment", "backfill test")
        assert done.returncode == 0, done.stderr

    def finished():  # the worker's flow processes end before the worker is stopped
        with get_client(sync_client=True) as client:
            states = [client.read_flow_run(uuid.UUID(i)).state for i in run_ids]
        return states if all(s is not None and s.is_final() for s in states) else None

    states = wait_until(finished, 180, "both backfilled flow runs to finish after the rejection")
    # the serving log (the worker and its flow runs, their Dask workers too) holds no traceback: ended clusters'
    # heartbeats and the skipped window included
    assert "Traceback" not in yaml_deployments.read_text()
    # a rejected release's run ended Cancelled, named Rejected (not a green Completed); a blocked one's in a Failed
    # state named Blocked, with its reason
    ended = dict(zip(run_ids, states, strict=True))
    for r in rows:
        state = ended[str(r.flow_run_id)]
        expected = ("CANCELLED", "Rejected") if r.status == "awaiting_approval" else ("FAILED", "Blocked")
        assert (state.type.value, state.name) == expected, (r, state)
        if r.status == "blocked":  # by the gate, or before it: a week's budget that released nothing
            assert state.message.startswith((f"release {r.release_id} is blocked by the audit gate: ",
                                             f"release {r.release_id}: nothing was released: ")), state.message
