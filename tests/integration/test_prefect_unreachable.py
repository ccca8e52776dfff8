"""A Prefect server that does not answer (``PREFECT_API_URL`` on a closed port, the shared server left alone):
every command that needs its API says so in one sentence, with what to start (flows/prefect_api.py), and exits
non-zero without a traceback; a decision recorded before the server was needed stays recorded and the sentence
says how to finish it."""

from __future__ import annotations

import os
import socket
import subprocess
import uuid

import pytest
import sqlalchemy as sa
import yaml

from tests.integration.conftest import TRAJPUB, base_spec, new_release, to_awaiting_approval

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def closed_api() -> str:
    """A Prefect API URL on a loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/api"


def run_without_prefect(api: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRAJPUB_TEST_MODE": "1", "PREFECT_API_URL": api}
    return subprocess.run([TRAJPUB, *args], capture_output=True, text=True, timeout=300, env=env, check=False)


def assert_one_sentence(done: subprocess.CompletedProcess, api: str) -> str:
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output and "ConnectError" not in output, output
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and (
        f"the Prefect server at {api} is not reachable: start it with `trajpub server up`" in last), last
    return last


def test_release_run_says_the_prefect_server_is_not_reachable_and_plans_nothing(engine, loaded_tdrive, tmp_path,
                                                                                  closed_api):
    dataset = loaded_tdrive("noprefect")
    spec = tmp_path / f"spec-{uuid.uuid4().hex[:6]}.yaml"
    spec.write_text(yaml.safe_dump(base_spec(dataset)))
    for wait in ([], ["--wait"]):
        assert_one_sentence(run_without_prefect(closed_api, "release", "run", *wait, "--spec", str(spec)), closed_api)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM governance.releases WHERE dataset = :d"),
                            {"d": dataset}).scalar_one() == 0


def test_approve_records_the_decision_and_says_how_to_publish_when_prefect_is_down(engine, loaded_tdrive,
                                                                                     closed_api):
    dataset = loaded_tdrive("noprefect")
    release_id = new_release(engine, dataset)
    to_awaiting_approval(engine, release_id)
    last = assert_one_sentence(run_without_prefect(closed_api, "approve", str(release_id), "--steward", "alice"),
                               closed_api)
    assert f"release {release_id} is approved (recorded)" in last
    assert f"`trajpub publish-approved {release_id}`" in last
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT status FROM governance.releases WHERE release_id = :r"),
                            {"r": release_id}).scalar_one() == "approved"


@pytest.mark.parametrize("args", [("budget", "show", "--forecast", "release/none"),
                                  ("backfill", "release/none", "--start", "2008-02-02", "--end", "2008-02-04",
                                   "--yes"),
                                  ("worker", "start")])
def test_other_prefect_commands_say_the_server_is_not_reachable(args, closed_api):
    assert_one_sentence(run_without_prefect(closed_api, *args), closed_api)
