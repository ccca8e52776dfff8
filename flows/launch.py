"""``trajpub release run`` and ``release compare`` without ``--wait``: the flow runs in a process of its own,
which outlives the command, and the command returns once the release awaits its steward (the comparison, the
steward's pick).

The process is ``trajpub release run --wait`` (``release compare --yes --wait``) on the same spec (written 0600
beside its log, in :data:`RUNS_DIR`), started in a session of its own so that the terminal's Ctrl-C or hang-up
does not reach it. Its flow run is named, so the command finds the run on the Prefect server and the releases
the run recorded; the command relays the run's output until the steward's turn (exit 0, printing the release id
and the next command), or the run ends first: then the command ends as ``--wait`` would have (its output, its
exit code: blocked 3, refused or failed 1). The paused flow run is then answered by ``trajpub
approve|reject|release pick`` or the Prefect UI, and publishes in that process.
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
    steward, or (``exit_code`` set) the run ended before, with ``output``, what it printed on stdout (its outcome;
    its log went to ``log`` and was relayed)."""

    outcome: dict | None
    exit_code: int | None
    log: Path
    output: str = ""


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


def release_awaits(run_id: str) -> dict | None:
    """The release of flow run ``run_id`` once it awaits its steward (None before)."""
    release = transaction(lambda conn: governance.release_of_flow_run(conn, run_id), "find the run's release")
    if release and release["status"] == "awaiting_approval":
        return {"release_id": release["release_id"], "status": "awaiting_approval", "flow_run_id": run_id}
    return None


def comparison_awaits(run_id: str) -> dict | None:
    """The candidates of comparison flow run ``run_id`` once the run pauses for the steward's pick (None before)."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        state = client.read_flow_run(run_id).state
    if state is None or not state.is_paused():
        return None
    from tasks import compare

    releases = transaction(lambda conn: compare.of_flow_run(conn, run_id), "find the candidates")
    return {"status": "awaiting_pick", "flow_run_id": run_id, "releases": releases}


def start(data: dict, say: Callable[[str], None], poll_s: float = 1.0, command: tuple[str, ...] = ("run",),
          awaits: Callable[[str], dict | None] = release_awaits) -> Started:
    """Start ``trajpub release COMMAND --wait`` (``run``; ``compare --yes`` with ``awaits=comparison_awaits``) on
    spec mapping ``data`` (as parsed, a release's window resolved) in the background and relay its output
    log (``say``, line by line: the flow's log, stderr) until ``awaits`` finds the steward's turn or the run
    ends."""
    RUNS_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    name = f"{'release' if command[0] == 'run' else command[0]}-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
    spec_file, log, result = RUNS_DIR / f"{name}.json", RUNS_DIR / f"{name}.log", RUNS_DIR / f"{name}.out"
    with os.fdopen(_private(spec_file), "w") as f:
        json.dump(data, f, default=str)  # the spec as given (its seed too): readable by this user only
    with os.fdopen(_private(log), "wb") as err, os.fdopen(_private(result), "wb") as out:
        # the flow's logs (stderr) go to the log, relayed; its outcome (stdout) to its own file
        proc = subprocess.Popen([sys.executable, "-m", "flows.cli", "release", *command, "--spec", str(spec_file),
                                 "--wait", "--flow-run-name", name], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True)
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
                return Started(None, code, log, result.read_text(encoding="utf-8", errors="replace"))
            run_id = run_id or _flow_run_id(name)
            if run_id and (outcome := awaits(run_id)):
                return Started({**outcome, "log": str(log)}, None, log)
            time.sleep(poll_s)
