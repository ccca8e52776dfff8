"""The trajpub work pool's worker: Prefect's process worker that runs trajpub's flows and nothing else.

Prefect's stock process worker builds each run from the work pool's base job template and the job variables of
the deployment and the flow run: ``command`` replaces what the run executes, ``env`` reaches its environment
(``TRAJPUB_TEST_MODE``, ``TRAJPUB_DASK_ADDRESS``), and a deployment's pull steps (``run_shell_script`` among them)
run before the flow. Whoever holds the Prefect API string can set all three through the API, and the pool's
template too. This worker (``trajpub worker start``) therefore:

- builds every run's configuration from its own fixed :data:`JOB_TEMPLATE` (the engine command, no environment of
  the run's own, the project root as working directory), never from the pool's template;
- refuses a run (Crashed, with the reason) whose deployment or flow run sets any job variable, whose deployment
  is not one of :data:`ENTRYPOINTS`, loads code from a storage block, or whose pull steps do anything but set the
  project root as the working directory (what ``prefect deploy`` records for ``prefect.yaml``).

The pool it creates, or finds with another template, is of the type ``trajpub`` (which Prefect's stock workers do
not serve) and gets :data:`JOB_TEMPLATE` with no variables (docs/operations.md, "Deploy
and schedule"). Anchor: Prefect's work-pool base job templates, which decide what a run may override.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from prefect.client.schemas.actions import WorkPoolCreate, WorkPoolUpdate
from prefect.exceptions import ObjectNotFound
from prefect.utilities.processutils import command_to_string
from prefect.workers.process import ProcessJobConfiguration, ProcessWorker

from trajpub.config import PROJECT_ROOT
from trajpub.errors import PolicyError

if TYPE_CHECKING:
    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.objects import FlowRun, WorkPool
    from prefect.client.schemas.responses import DeploymentResponse

POOL = "trajpub"
ENTRYPOINTS = frozenset({"flows/release.py:release_flow", "flows/compare.py:compare_flow"})
"""The flows a trajpub deployment may run (``prefect.yaml``)."""
ENGINE_COMMAND = command_to_string([sys.executable, "-m", "prefect.engine"])
SET_PROJECT_ROOT = {"prefect.deployments.steps.set_working_directory": {"directory": str(PROJECT_ROOT)}}
JOB_TEMPLATE: dict[str, Any] = {
    "job_configuration": {"command": ENGINE_COMMAND, "env": {}, "stream_output": True,
                          "working_dir": str(PROJECT_ROOT)},
    "variables": {"type": "object", "properties": {}},
}
"""The one job configuration of every run, with no variable a deployment or a run could set."""


def refusal(flow_run: FlowRun, deployment: DeploymentResponse | None) -> str | None:
    """Why the worker will not run ``flow_run`` (None: it runs)."""
    if deployment is None:
        return "it has no deployment: the trajpub work pool runs trajpub's deployments only"
    set_vars = sorted({*(deployment.job_variables or {}), *(flow_run.job_variables or {})})
    if set_vars:
        return f"it sets job variables ({', '.join(set_vars)}): a trajpub run takes none"
    if deployment.entrypoint not in ENTRYPOINTS:
        return f"its deployment runs {deployment.entrypoint!r}, not one of trajpub's flows"
    if deployment.storage_document_id is not None:
        return "its deployment loads code from a storage block"
    if deployment.pull_steps and deployment.pull_steps != [SET_PROJECT_ROOT]:
        return "its deployment's pull steps do more than set the project's working directory"
    return None


class TrajpubJobConfiguration(ProcessJobConfiguration):
    """A run's configuration: :data:`JOB_TEMPLATE` whatever the pool, the deployment or the run say, for a run
    that :func:`refusal` lets through."""

    @classmethod
    async def resolve_for_flow_run(cls, flow_run: FlowRun, *, client: PrefectClient, work_pool: WorkPool,
                                   worker_name: str, worker_id=None,
                                   deployment: DeploymentResponse | None = None) -> TrajpubJobConfiguration:
        if deployment is None and flow_run.deployment_id:
            deployment = await client.read_deployment(flow_run.deployment_id)
        if why := refusal(flow_run, deployment):
            raise PolicyError(f"flow run {flow_run.name!r} is refused by the trajpub worker: {why}", "work pool")
        configuration = cls(**JOB_TEMPLATE["job_configuration"])
        configuration.prepare_for_flow_run(flow_run=flow_run, deployment=deployment,
                                           flow=await client.read_flow(flow_run.flow_id), work_pool=work_pool,
                                           worker_name=worker_name, worker_id=worker_id)
        return configuration


class TrajpubWorker(ProcessWorker):
    """Prefect's process worker with :class:`TrajpubJobConfiguration` and no job variables. Its pools are of a
    type of their own, ``trajpub``, which Prefect's stock ``prefect worker start`` does not know and so cannot
    serve."""

    type = POOL
    job_configuration = TrajpubJobConfiguration
    job_configuration_variables = None

    @classmethod
    def get_default_base_job_template(cls) -> dict[str, Any]:
        return JOB_TEMPLATE


async def ensure_pool(client: PrefectClient, name: str) -> str:
    """Create the ``trajpub`` pool ``name`` with :data:`JOB_TEMPLATE`, or put that template back on it; says
    which."""
    try:
        pool = await client.read_work_pool(name)
    except ObjectNotFound:
        await client.create_work_pool(WorkPoolCreate(name=name, type=TrajpubWorker.type,
                                                     base_job_template=JOB_TEMPLATE))
        return f"work pool {name!r} created with trajpub's job template (no job variables)"
    if pool.type != TrajpubWorker.type:
        raise PolicyError(f"work pool {name!r} is a {pool.type!r} pool, which Prefect's own workers serve with "
                          f"whatever command a run sets: delete it (`prefect work-pool delete {name}`), start "
                          "this worker again and re-run `prefect deploy --all`", "work pool")
    if pool.base_job_template != JOB_TEMPLATE:
        await client.update_work_pool(name, WorkPoolUpdate(base_job_template=JOB_TEMPLATE))
        return f"work pool {name!r}: its job template was put back to trajpub's (no job variables)"
    return f"work pool {name!r} has trajpub's job template"


async def run_worker(pool: str, say=print) -> None:
    """Serve the pool ``pool`` until interrupted."""
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        say(await ensure_pool(client, pool))
    await TrajpubWorker(work_pool_name=pool).start()
