"""The scheduled deployment: served by `trajpub deploy`, re-run with changed parameters through the Prefect API
(what the UI's "Run" does), then approved and published."""

from __future__ import annotations

import os
import subprocess
import uuid
from dataclasses import fields
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


@pytest.fixture
def served(loaded_tdrive, tmp_path):
    dataset = loaded_tdrive("dep")
    spec = base_spec(dataset)
    spec.pop("seed")
    path = tmp_path / "spec.yaml"
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
    """The Prefect UI draws the run form from the deployment's parameter schema: the spec's fields, typed."""
    _, _, deployment = served
    spec = deployment.parameter_openapi_schema["properties"]["spec"]
    assert set(spec["properties"]) == {f.name for f in fields(ReleaseSpec)}
    assert "dask_address" not in spec["properties"]  # the operator's setting, not the requester's
    assert spec["properties"]["bbox"]["type"] == "array" and spec["properties"]["dataset"]["type"] == "string"
    with chromium_page() as page:  # the custom run form in the real UI: one labelled field per spec field
        log_in(page, f"/deployments/deployment/{deployment.id}/run")
        for name in ("dataset", "mechanism", "bbox", "window_start", "approval_timeout_s"):
            label = spec["properties"][name]["title"] + ("" if name in spec["required"] else " (Optional)")
            expect(page.locator(".p-label").filter(has=page.get_by_text(label, exact=True)).first).to_be_visible()


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
def yaml_deployments():
    """The deployments of prefect.yaml, registered with `prefect deploy --all`, and a process worker."""
    from trajpub.config import PROJECT_ROOT

    prefect = str(Path(TRAJPUB).with_name("prefect"))
    env = {**os.environ, "TRAJPUB_TEST_MODE": "1"}
    for args in (["work-pool", "create", "trajpub", "--type", "process", "--overwrite"],
                 ["--no-prompt", "deploy", "--all"]):
        done = subprocess.run([prefect, *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    worker = subprocess.Popen([prefect, "worker", "start", "--pool", "trajpub"], cwd=PROJECT_ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    yield
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


def test_backfill_runs_one_governed_release_per_past_window(engine, loaded_tdrive, yaml_deployments):
    dataset = loaded_tdrive("bf")
    out = cli("backfill", "release/tdrive-weekly", "--dataset", dataset, "--start", "2008-02-03",
              "--end", "2008-02-05", "--every", "1d", "--requested-by", "backfill-operator")
    assert out.returncode == 0, out.stderr
    run_ids = [line.split()[2].rstrip(":") for line in out.stdout.splitlines() if line.startswith("flow run")]
    assert len(run_ids) == 2

    def releases():
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT release_id, status, window_start, window_end, requested_by FROM governance.releases"
                " WHERE flow_run_id = ANY(CAST(:ids AS uuid[])) ORDER BY window_start"), {"ids": run_ids}).all()
        return rows if len(rows) == 2 and all(r.status in ("awaiting_approval", "failed", "blocked")
                                              for r in rows) else None

    rows = wait_until(releases, 480, "both backfilled releases to reach the steward")
    # governed to their end: the weekly spec (ObjTrace, ε 5 per taxi) on one day of 40 taxis may be blocked by the
    # utility floor; a failed window would be an error
    assert all(r.status in ("awaiting_approval", "blocked") for r in rows), rows
    assert [(r.window_start.date().isoformat(), r.window_end.date().isoformat()) for r in rows] == [
        ("2008-02-03", "2008-02-04"), ("2008-02-04", "2008-02-05")]
    assert {r.requested_by for r in rows} == {"backfill-operator"}
    for r in (r for r in rows if r.status == "awaiting_approval"):  # end the waiting runs
        done = cli("reject", str(r.release_id), "--steward", "ada", "--comment", "backfill test")
        assert done.returncode == 0, done.stderr

    def finished():  # the worker's flow processes end before the worker is stopped
        with get_client(sync_client=True) as client:
            states = [client.read_flow_run(uuid.UUID(i)).state for i in run_ids]
        return states if all(s is not None and s.is_final() for s in states) else None

    states = wait_until(finished, 180, "both backfilled flow runs to finish after the rejection")
    assert [s.type.value for s in states] == ["COMPLETED"] * 2
