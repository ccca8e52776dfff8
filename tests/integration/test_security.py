"""Security: identifiers from users are validated (SQL injection through them fails cleanly and changes nothing),
credentials from the environment or a Prefect Secret block never reach logs, artifacts, lineage or governance,
and a fixed test seed never leaves the process."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest
import sqlalchemy as sa
import yaml
from prefect.blocks.system import Secret
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    LogFilter,
    LogFilterFlowRunId,
)

from tests.integration.conftest import TDRIVE_CSV, TRAJPUB, base_spec, cli, to_awaiting_approval
from trajpub import config

pytestmark = pytest.mark.integration
INJECTIONS = ["x'; DROP TABLE raw.points; --", 'x"; DROP SCHEMA governance CASCADE; --', "x; SELECT pg_sleep(5)",
              "Tdrive", "a" * 80, "épsilon", "x--", ""]


def traces(engine, name: str) -> tuple:
    """What the commands could have left of ``name``: its points, dataset, releases and road networks, and whether
    the tables and schemas the injections aim at still stand. (Only this name's rows: the other test worker adds
    points, releases and tables meanwhile.)"""
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT (SELECT count(*) FROM raw.points WHERE dataset = :n), (SELECT count(*) FROM raw.datasets WHERE "
            "dataset = :n), (SELECT count(*) FROM governance.releases WHERE dataset = :n), (SELECT count(*) FROM "
            "roads.networks WHERE network = :n), to_regclass('raw.points') IS NOT NULL, "
            "(SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'governance')"), {"n": name}).one()


@pytest.mark.parametrize("name", INJECTIONS)
def test_identifiers_from_users_are_validated_before_any_sql(engine, name, tmp_path):
    """The real CLI, in-process (click's runner): every command that takes a dataset or network name."""
    from click.testing import CliRunner

    from flows.cli import main

    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**base_spec(name), "seed": None}))
    for args in (["load", "tdrive", str(TDRIVE_CSV), "--dataset", name],
                 ["release", "run", "--wait", "--spec", str(spec)], ["release", "list", "--dataset", name],
                 ["budget", "cap", name, "5", "--steward", "ada"],
                 ["four-eyes", name, "on", "--steward", "ada"], ["budget", "show", "--dataset", name],
                 ["recover", "--dataset", name], ["roads", "load-osm", name, "--pbf", "helsinki_pbf"],
                 ["roads", "synthetic", name, "--lon", "24.9", "--lat", "60.1"]):
        out = CliRunner().invoke(main, args)
        assert out.exit_code == 1, (args, out.output)
        assert out.stderr.startswith("error:") and out.exception.__class__ is SystemExit, (args, out.stderr)
    assert traces(engine, name) == (0, 0, 0, 0, True, 1)


def test_free_text_is_stored_literally(engine, dataset_name):
    """Comments and reasons go through bound parameters: an injection string is just text; a steward is a login,
    so an injection string there names nobody."""
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO raw.datasets (dataset) VALUES (:d)"), {"d": dataset_name})
        conn.execute(sa.text("INSERT INTO governance.datasets (dataset) VALUES (:d)"), {"d": dataset_name})
        rid = conn.execute(sa.text(
            "INSERT INTO governance.releases (dataset, mechanism, params, spec, requested_by) VALUES "
            "(:d, 'prefix_tree', '{}', '{}', 'x') RETURNING release_id"), {"d": dataset_name}).scalar_one()
    to_awaiting_approval(engine, rid)
    evil = "'); DELETE FROM governance.approvals; --"
    nobody = cli("reject", str(rid), "--steward", evil, "--comment", evil, "--wait", "1")
    assert nobody.returncode == 1 and nobody.stderr.startswith("error: no password for the login"), nobody.stderr
    out = cli("reject", str(rid), "--steward", "ada", "--comment", evil, "--wait", "1")
    assert out.returncode == 0, out.stderr
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT steward, comment FROM governance.approvals WHERE release_id = :r"),
                            {"r": rid}).one() == ("ada", evil)


def test_credentials_from_a_secret_block_never_reach_logs_artifacts_or_lineage(engine, loaded_tdrive, tmp_path):
    """The database URL, the pipeline role's real password included, comes from a Prefect Secret block; after a
    whole release the password appears nowhere a user can read."""
    passwords = json.loads(config.CREDENTIALS_FILE.read_text())
    password, auditors = passwords[config.PIPELINE], passwords[config.AUDITOR]
    url = config.database_url()
    assert password in url and len(password) >= 24
    block = f"trajpub-db-{uuid.uuid4().hex[:8]}"
    Secret(value=url).save(block)
    dataset = loaded_tdrive("sec")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**base_spec(dataset, approval_timeout_s=2), "seed": 7}))
    env = {**os.environ, "TRAJPUB_TEST_MODE": "1", "TRAJPUB_DATABASE_SECRET": block,
           "TRAJPUB_AUDITOR_DATABASE_URL": config.database_url(config.AUDITOR)}
    env.pop("TRAJPUB_DATABASE_URL", None)
    run = subprocess.run([TRAJPUB, "release", "run", "--wait", "--spec", str(spec)], capture_output=True, text=True,
                         env=env, timeout=600, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert password not in run.stdout + run.stderr and auditors not in run.stdout + run.stderr
    with engine.connect() as conn:
        rid, flow_run_id = conn.execute(sa.text("SELECT release_id, flow_run_id FROM governance.releases WHERE "
                                                "dataset = :d"), {"d": dataset}).one()
        stored = [json.dumps(r, default=str) for r in conn.execute(sa.text(
            "SELECT r.*, (SELECT json_agg(e) FROM governance.lineage_events e WHERE e.release_id = r.release_id),"
            " (SELECT json_agg(a) FROM governance.audit_results a WHERE a.release_id = r.release_id),"
            " (SELECT json_agg(v) FROM governance.validation_results v WHERE v.release_id = r.release_id),"
            " (SELECT html FROM governance.review_reports w WHERE w.release_id = r.release_id)"
            " FROM governance.releases r WHERE r.release_id = :r"), {"r": rid}).mappings()]
    assert stored and all(password not in s and auditors not in s for s in stored)
    assert all(key not in s for s in stored for key in ('"seed"', "'seed'"))
    with get_client(sync_client=True) as client:
        flow_filter = FlowRunFilter(id={"any_": [flow_run_id]})
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
        flow_run = client.read_flow_runs(flow_run_filter=flow_filter)[0]
    assert logs and artifacts
    assert all(password not in log.message for log in logs)
    assert all(password not in json.dumps(a.data, default=str) + (a.description or "") for a in artifacts)
    assert password not in json.dumps(flow_run.parameters, default=str)


def test_a_missing_secret_block_is_a_clear_error(tmp_path):
    env = {**os.environ, "TRAJPUB_DATABASE_SECRET": f"missing-{uuid.uuid4().hex[:6]}"}
    env.pop("TRAJPUB_DATABASE_URL", None)
    out = subprocess.run([TRAJPUB, "budget", "show"], capture_output=True, text=True, env=env, timeout=120,
                         check=False)
    assert out.returncode == 1 and "Prefect Secret block" in out.stderr and "Traceback" not in out.stderr
