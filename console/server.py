"""``trajpub console up|down``: the steward console served in the background, as ``trajpub server up`` serves
Prefect's (:mod:`flows.services`): idempotent, its process id in the state folder, its log beside it."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
import urllib.request

from console.settings import LOG_FILE, Settings
from trajpub import config
from trajpub.errors import TrajpubError

HEALTH_ANSWER = b"trajpub console"


def console_healthy(settings: Settings) -> bool:
    """Whether this project's console answers at ``settings.url`` (checked on the console's own certificate
    unverified: it is this machine's process, reached on its own address)."""
    context = ssl._create_unverified_context() if settings.tls else None
    try:
        with urllib.request.urlopen(f"{settings.url}/health", timeout=2, context=context) as answer:
            return answer.status == 200 and answer.read() == HEALTH_ANSWER
    except OSError:
        return False


def console_up(timeout_s: float = 60) -> str:
    """Start ``python -m console`` in the background and wait until it answers; nothing when it already does."""
    settings = Settings.from_environment()
    where = (f"at {settings.url} (a steward signs in with their own database login; log in {LOG_FILE})")
    if console_healthy(settings):
        return f"steward console already up {where}"
    config.STATE_DIR.mkdir(parents=True, exist_ok=True)
    with LOG_FILE.open("ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "console"], stdout=log, stderr=subprocess.STDOUT,
                                env=os.environ.copy(), cwd=config.PROJECT_ROOT, start_new_session=True)
    settings.pid_file.write_text(str(proc.pid))
    deadline = time.monotonic() + timeout_s
    while not console_healthy(settings):
        if proc.poll() is not None:
            settings.pid_file.unlink(missing_ok=True)
            raise TrajpubError(f"the steward console exited with code {proc.returncode} (port {settings.port} "
                               "taken, or a setting refused)", str(LOG_FILE))
        if time.monotonic() > deadline:
            raise TrajpubError(f"the steward console did not answer after {timeout_s:.0f} s", str(LOG_FILE))
        time.sleep(0.3)
    return f"steward console up {where}"


def console_down() -> str:
    settings = Settings.from_environment()
    if not settings.pid_file.exists():
        return f"no steward console started by this project on port {settings.port}"
    pid = int(settings.pid_file.read_text())
    try:
        os.killpg(pid, 15)
    except ProcessLookupError:
        pass
    settings.pid_file.unlink()
    return "steward console stopped"
