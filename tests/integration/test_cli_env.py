"""``trajpub env``: Prefect's own command line reaches this checkout's server with the variables it prints, and
not without them (the server asks for its API authentication string)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import cli

PREFECT = str(Path(sys.executable).with_name("prefect"))


def prefect_flow_runs(environment: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([PREFECT, "flow-run", "ls", "--limit", "1"], capture_output=True, text=True, timeout=120,
                          env=environment, check=False)


def test_prefect_cli_reaches_the_server_with_trajpub_env_only():
    printed = cli("env")
    assert printed.returncode == 0, printed.stderr
    exported = dict(shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in printed.stdout.splitlines())
    assert {"PREFECT_API_URL", "PREFECT_API_AUTH_STRING", "PREFECT_HOME"} <= exported.keys()
    shell = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    assert prefect_flow_runs({**shell, **exported}).returncode == 0
    without_auth = {k: v for k, v in exported.items() if k != "PREFECT_API_AUTH_STRING"}
    assert prefect_flow_runs({**shell, **without_auth}).returncode != 0
