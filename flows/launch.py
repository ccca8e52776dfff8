"""``trajpub release run`` without ``--wait``: the release flow runs in a process of its own, which outlives the
command, and the command returns once the release awaits its steward.

The process is ``trajpub release run --wait`` on the same spec (written 0600 beside its log, in
:data:`RUNS_DIR`), started in a session of its own so that the terminal's Ctrl-C or hang-up does not reach it. Its
flow run is named, so the command finds the run on the Prefect server and the release the run recorded; the
command relays the run's output until the release awaits its steward (exit 0, printing the release id and the
next command), or the run ends first: then the command ends as ``--wait`` would have (its output, its exit code:
blocked 3, refused or failed 1). The paused flow run is then answered by ``trajpub approve|reject`` or the
Prefect UI, and publishes in that process.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tasks import governance
from tasks.db import transaction
from trajpub.config import STATE_DIR

RUNS_DIR = STATE_DIR / "runs"


@dataclass(frozen=True)
class Started:
    """How a background release run stood when the command returned: ``outcome`` is the release awaiting its
    steward, or (``exit_code`` set) the run ended before."""

    outcome: dict | None
    exit_code: int | None
    log: Path


def _private(path: Path) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def _flow_run_id(name: str) -> str | None:
    """The id of the flow run named ``name``, once the process has made it (None before, and while the Prefect
    server does not answer: the process then fails and the command ends with it)."""
    import httpx
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    try:
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name])),
                                         limit=1)
    except httpx.HTTPError:
        return None
    return str(runs[0].id) if runs else None


def start(data: dict, say: Callable[[str], None], poll_s: float = 1.0) -> Started:
    """Start the release of spec mapping ``data`` (the spec as parsed, its window resolved) in the background and relay its output (``say``, line by line)
    until its release awaits the steward or the run ends."""
    RUNS_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    name = f"release-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
    spec_file, log = RUNS_DIR / f"{name}.json", RUNS_DIR / f"{name}.log"
    with os.fdopen(_private(spec_file), "w") as f:
        json.dump(data, f, default=str)  # the spec as given (its seed too): readable by this user only
    with os.fdopen(_private(log), "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "flows.cli", "release", "run", "--spec", str(spec_file),
                                 "--wait", "--flow-run-name", name], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    run_id, pending = None, b""
    with open(log, "rb") as reader:
        while True:
            code = proc.poll()
            *lines, pending = (pending + reader.read()).split(b"\n")  # a line still being written waits
            for line in lines:
                say(line.decode("utf-8", "replace"))
            if code is not None:
                if pending:
                    say(pending.decode("utf-8", "replace"))
                return Started(None, code, log)
            run_id = run_id or _flow_run_id(name)
            release = run_id and transaction(lambda conn, f=run_id: governance.release_of_flow_run(conn, f),
                                             "find the run's release")
            if release and release["status"] == "awaiting_approval":
                return Started({"release_id": release["release_id"], "status": "awaiting_approval",
                                "flow_run_id": run_id, "log": str(log)}, None, log)
            time.sleep(poll_s)
