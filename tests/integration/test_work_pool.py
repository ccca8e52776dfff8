"""The trajpub work pool runs trajpub, nothing else (flows/worker.py): a flow run created through the Prefect API
with a command, an environment, a deployment's job variables, pull steps or a tampered pool template is refused
by `trajpub worker start` and nothing of it runs."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolUpdate

from flows.worker import JOB_TEMPLATE, SET_PROJECT_ROOT
from tests.integration.conftest import TRAJPUB, wait_until
from trajpub.config import PROJECT_ROOT

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pool():
    """A work pool of its own, served by `trajpub worker start`; Prefect's stock worker cannot serve it."""
    name = f"trajpub-test-{uuid.uuid4().hex[:8]}"
    worker = subprocess.Popen([TRAJPUB, "worker", "start", "--pool", name], cwd=PROJECT_ROOT,
                              env={k: v for k, v in os.environ.items() if k != "TRAJPUB_TEST_MODE"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def has_template() -> bool:
        with get_client(sync_client=True) as client:
            try:
                return client.read_work_pool(name).base_job_template == JOB_TEMPLATE
            except Exception:  # noqa: BLE001 - not created yet
                return False

    wait_until(has_template, 120, "the worker to create its pool with trajpub's template")
    stock = subprocess.run([str(Path(TRAJPUB).with_name("prefect")), "worker", "start", "--pool", name, "--run-once"],
                           cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert stock.returncode != 0, stock.stdout + stock.stderr
    yield name
    worker.terminate()
    try:
        worker.wait(timeout=10)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait(timeout=30)
    with get_client(sync_client=True) as client:
        client.delete_work_pool(name)


def deployment(pool: str, marker: Path, **changes) -> str:
    """A deployment of the release flow in ``pool`` as `prefect deploy` records prefect.yaml's (pull step: the
    project root), with ``changes``; its spec names a dataset nobody loaded, so a run that does start is refused
    by the flow in a sentence and touches nothing."""
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("release")
        return str(client.create_deployment(**{
            "flow_id": flow_id, "name": f"probe-{uuid.uuid4().hex[:8]}", "work_pool_name": pool,
            "entrypoint": "flows/release.py:release_flow", "pull_steps": [SET_PROJECT_ROOT],
            "parameters": {"spec": {"dataset": f"nobody_{marker.stem}", "mechanism": "objtrace",
                                    "requested_by": "scheduler", "bbox": [115.4, 39.4, 117.6, 41.1],
                                    "params": {"epsilon": 1.0}}}, **changes}))


def final(flow_run_id) -> tuple[str, str]:
    def ended():
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(flow_run_id).state
        return state if state is not None and state.is_final() else None

    state = wait_until(ended, 240, f"flow run {flow_run_id} to end")
    return state.type.value, state.message or ""


def run(deployment_id: str, **job_variables) -> tuple[str, str]:
    with get_client(sync_client=True) as client:
        flow_run = client.create_flow_run_from_deployment(deployment_id, job_variables=job_variables or None)
    return final(flow_run.id)


def test_a_run_that_sets_a_command_or_an_environment_is_refused(pool, tmp_path):
    marker = tmp_path / "pwned"
    probe = deployment(pool, marker)
    for variables in ({"command": f"sh -c 'touch {marker}'"}, {"env": {"TRAJPUB_TEST_MODE": "1"}},
                      {"working_dir": str(tmp_path)}):
        state, message = run(probe, **variables)
        assert state == "CRASHED" and "refused by the trajpub worker: it sets job variables" in message, message
        assert next(iter(variables)) in message
    assert not marker.exists()


def test_a_deployment_with_job_variables_or_pull_steps_is_refused(pool, tmp_path):
    marker = tmp_path / "pwned"
    shell = {"prefect.deployments.steps.run_shell_script": {"script": f"touch {marker}"}}
    for changes, why in (({"job_variables": {"command": f"touch {marker}"}}, "it sets job variables (command)"),
                         ({"pull_steps": [shell, SET_PROJECT_ROOT]}, "pull steps do more than set"),
                         ({"entrypoint": "tests/controls/mechanism.py:anything"}, "not one of trajpub's flows")):
        state, message = run(deployment(pool, marker, **changes))
        assert state == "CRASHED" and why in message, message
    assert not marker.exists()


def test_the_pool_template_changed_through_the_api_does_not_reach_a_run(pool, tmp_path):
    """Someone puts a command into the pool's template: the worker builds the run from its own template, so the
    run is the release flow (refused by it in a sentence: no such dataset), and the command never runs."""
    marker = tmp_path / "pwned"
    tampered = {"job_configuration": {**JOB_TEMPLATE["job_configuration"], "command": f"touch {marker}"},
                "variables": JOB_TEMPLATE["variables"]}
    with get_client(sync_client=True) as client:
        client.update_work_pool(pool, WorkPoolUpdate(base_job_template=tampered))
    state, message = run(deployment(pool, marker))
    assert state != "CRASHED" and "refused by the trajpub worker" not in message, message
    assert not marker.exists()
