"""The chaos bench's own services, beside the shared ones: a PostGIS cluster, a Prefect server and a Dask cluster
(one TLS scheduler on a fixed port, single-threaded workers) in a temporary state folder and on free ports of
their own, started as an operator starts them (``trajpub db up``, ``db migrate``, ``server up``, ``steward add``,
``requester add``), and the crashes the bench inflicts on them. Nothing here touches the shared services of
``make services``: every process this module kills it started itself (or the CLI it ran started, in its state
folder), found by its pid."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import sqlalchemy as sa

from tasks.dask_cluster import SECRET_VARIABLES, WORKER_ENVIRON, client_environment, tls_files
from trajpub import config

BIN = Path(sys.executable).parent
TRAJPUB = str(BIN / "trajpub")
PG_BIN = Path("/usr/lib/postgresql/15/bin")
ROOT = Path(__file__).resolve().parents[2]
#: The size of the tmpfs that holds the bench's state folder (PostgreSQL's data and WAL, Prefect's, Dask's logs)
#: when it runs as root: room for a run's data, small enough to fill in a moment (:meth:`PrivateServices.fill_disk`).
STATE_DISK = "2g"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_tree(pid: int) -> int:
    """SIGKILL a process and its descendants (a crash, no clean-up); returns how many were killed."""
    try:
        root = psutil.Process(pid)
        procs = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        return 0
    killed = 0
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)
            killed += 1
    return killed


@dataclass
class DaskCluster:
    """One ``dask scheduler`` (TLS, a fixed port on loopback, so the releases' TRAJPUB_DASK_ADDRESS outlives its
    restart) and ``n_workers`` ``dask worker`` processes (each a nanny and its worker)."""

    directory: Path
    port: int
    n_workers: int = 2
    scheduler: subprocess.Popen | None = None
    workers: list[subprocess.Popen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.security = tls_files(self.directory / "tls")
        self.address = f"tls://127.0.0.1:{self.port}"
        self._tls = ["--tls-ca-file", self.security.tls_ca_file, "--tls-cert", self.security.tls_scheduler_cert,
                     "--tls-key", self.security.tls_scheduler_key]
        self._count = 0

    def environment(self) -> dict[str, str]:
        return client_environment(self.address, self.security)

    def _start(self, args: list[str], log: str) -> subprocess.Popen:
        env = {**{k: v for k, v in os.environ.items()
                  if k not in SECRET_VARIABLES and not k.startswith(("TRAJPUB_", "DASK_", "PREFECT_"))},
               **{k: str(v) for k, v in WORKER_ENVIRON.items()}}
        with open(self.directory / log, "ab") as out:
            return subprocess.Popen([str(BIN / "dask"), *args], stdout=out, stderr=subprocess.STDOUT, env=env)

    def start_scheduler(self) -> None:
        self.scheduler = self._start(["scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--protocol",
                                      "tls", *self._tls, "--no-dashboard"], "scheduler.log")

    def add_worker(self) -> None:
        self._count += 1
        self.workers.append(self._start(["worker", self.address, "--nthreads", "1", "--no-dashboard", "--host",
                                         "127.0.0.1", *self._tls, "--memory-limit", "0", "--name",
                                         f"worker-{self._count}", "--preload", "great_expectations"],
                                        f"worker-{self._count}.log"))

    def live_workers(self) -> list[subprocess.Popen]:
        self.workers = [w for w in self.workers if w.poll() is None]
        return self.workers

    def start(self, wait_s: float = 600) -> None:
        self.start_scheduler()
        for _ in range(self.n_workers):
            self.add_worker()
        self.wait_ready(wait_s)

    def wait_ready(self, wait_s: float) -> None:
        """Wait until the scheduler answers with every live worker joined."""
        from distributed import Client

        deadline = time.monotonic() + wait_s
        while True:
            try:
                with Client(self.address, timeout="10s", security=self.security) as client:
                    client.wait_for_workers(len(self.live_workers()), timeout=max(1.0, deadline - time.monotonic()))
                return
            except (OSError, TimeoutError):
                if time.monotonic() > deadline:
                    raise

    def stop(self) -> None:
        for proc in [*self.workers, self.scheduler]:
            if proc is not None and proc.poll() is None:
                kill_tree(proc.pid)
                proc.wait(timeout=30)
        self.workers = []

    def restart(self, wait_s: float = 600) -> None:
        """A scheduler lost for good takes its workers' state with it: start the whole cluster again."""
        self.stop()
        self.start(wait_s)


@dataclass
class PrivateServices:
    """The state folder, the environment that points ``trajpub`` at these services, and the services' crashes."""

    state: Path
    env: dict[str, str]
    dask: DaskCluster
    engines: dict[str, sa.Engine] = field(default_factory=dict)

    @classmethod
    def make(cls) -> PrivateServices:
        # under the system's temporary folder, traversable by the postgres user (who runs the server as root):
        # `db up` would otherwise put the cluster in /var/tmp, beside the shared one's
        state = Path(tempfile.mkdtemp(prefix="trajpub-chaos-"))
        state.chmod(0o711)
        if os.geteuid() == 0:  # a filesystem of its own, which the disk_full fault fills (never the shared disk)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={STATE_DISK},mode=0711", "tmpfs", str(state)],
                           check=True, capture_output=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAJPUB_", "PREFECT_", "DASK_"))}
        env |= {"TRAJPUB_STATE_DIR": str(state), "TRAJPUB_PG_PORT": str(free_port()),
                "TRAJPUB_PREFECT_PORT": str(free_port()), "PYTHONUNBUFFERED": "1"}
        (state / "dask").mkdir()
        dask = DaskCluster(state / "dask", free_port())
        return cls(state, env | dask.environment(), dask)

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """The real ``trajpub`` command line on these services."""
        return subprocess.run([TRAJPUB, *args], capture_output=True, text=True, timeout=timeout, check=False,
                              env=self.env, cwd=ROOT, errors="replace")

    def must(self, *args: str, timeout: float = 600, attempts: int = 1) -> str:
        """``trajpub ARGS``, which must succeed (tried ``attempts`` times, 10 s apart)."""
        for attempt in range(attempts):
            done = self.cli(*args, timeout=timeout)
            if done.returncode == 0:
                return done.stdout
            time.sleep(10 if attempt + 1 < attempts else 0)
        raise RuntimeError(f"trajpub {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")

    def popen(self, args: list[str], log: Path) -> subprocess.Popen:
        """``trajpub ARGS`` in the background, its output to ``log``."""
        with open(log, "ab") as out:
            return subprocess.Popen([TRAJPUB, *args], stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT,
                                    stdin=subprocess.DEVNULL)

    def up(self, stewards: tuple[str, ...], requesters: tuple[str, ...]) -> None:
        for args in (("db", "up"), ("db", "migrate"), ("server", "up"), *(("steward", "add", s) for s in stewards),
                     *(("requester", "add", r) for r in requesters)):
            self.must(*args)
        if not (self.state / "pgdata" / "PG_VERSION").exists():
            raise RuntimeError(f"the private cluster is not in {self.state}")
        self.dask.start()

    def engine(self, login: str = config.OWNER) -> sa.Engine:
        """An engine on the private cluster as ``login`` (the superuser by default), with its generated password."""
        if login not in self.engines:
            password = json.loads((self.state / "credentials.json").read_text())[login]
            url = sa.engine.URL.create("postgresql+psycopg", username=login, password=password, host="127.0.0.1",
                                       port=int(self.env["TRAJPUB_PG_PORT"]), database=config.PG_DATABASE)
            self.engines[login] = sa.create_engine(url, pool_pre_ping=True, pool_size=2)
        return self.engines[login]

    # --- crashes --------------------------------------------------------------------------------------------
    def crash_postgres(self) -> str:
        """PostgreSQL stopped as by a power cut (``pg_ctl stop -m immediate``: no checkpoint, crash recovery at
        the next start), then started again with ``trajpub db up``."""
        cmd = [str(PG_BIN / "pg_ctl"), "-D", str(self.state / "pgdata"), "-m", "immediate", "-w", "stop"]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        stopped = subprocess.run(cmd, capture_output=True, text=True, cwd="/", check=False)
        for eng in self.engines.values():
            eng.dispose()
        self.must("db", "up", attempts=3)
        return stopped.stdout.strip() or stopped.stderr.strip()

    def crash_prefect(self) -> str:
        """kill -9 of the Prefect server's process group (the one `server up` started, by its pid file), then
        ``trajpub server up`` again."""
        pid = int((self.state / "prefect-server.pid").read_text())
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.2)
        self.must("server", "up", attempts=3)
        return f"killed the Prefect server (pid {pid}) and started it again"

    def fill_disk(self, hold_s: float) -> str:
        """Fill the state folder's own filesystem (the tmpfs of :meth:`make`) to the last byte for ``hold_s``
        seconds (PostgreSQL's data and WAL, Prefect's and Dask's logs all meet ENOSPC), free it, then start
        whatever died again as an operator would (``trajpub db up``, ``server up``: both idempotent)."""
        if not os.path.ismount(self.state):
            return "not injected: the state folder has no filesystem of its own (run the bench as root)"
        filler = self.state / "disk-filler"
        with open(filler, "wb") as f:
            free = os.statvfs(self.state).f_bavail * os.statvfs(self.state).f_frsize
            with contextlib.suppress(OSError):
                os.posix_fallocate(f.fileno(), 0, free)
            with contextlib.suppress(OSError):  # whatever fallocate left: written until the device is full
                while True:
                    f.write(b"\0" * (1 << 20))
                    f.flush()
        left = os.statvfs(self.state).f_bavail * os.statvfs(self.state).f_frsize
        time.sleep(hold_s)
        filler.unlink()
        for eng in self.engines.values():
            eng.dispose()
        self.must("db", "up", attempts=3)
        self.must("server", "up", attempts=3)
        return f"{free / 2**20:.0f} MiB filled ({left} bytes left) for {hold_s:.0f} s, then freed"

    def own_processes(self, *words: str) -> list[psutil.Process]:
        """This bench's trajpub commands (their command line names its state folder: a spec in it) whose command
        line holds ``words``."""
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            cmdline = proc.info["cmdline"] or []
            text = " ".join(cmdline)
            if (str(self.state) in text and ("flows.cli" in cmdline or TRAJPUB in cmdline)
                    and all(w in cmdline for w in words)):
                found.append(proc)
        return found

    def down(self, keep_logs: Path | None = None) -> None:
        """Stop everything this bench started and remove its state folder, keeping its logs (the commands', the
        flows', PostgreSQL's, Prefect's and Dask's) in ``keep_logs`` if given."""
        for proc in self.own_processes():
            kill_tree(proc.pid)
        self.dask.stop()
        for eng in self.engines.values():
            eng.dispose()
        self.cli("server", "down", timeout=120)
        self.cli("db", "down", timeout=120)
        if keep_logs is not None:
            keep_logs.mkdir(parents=True, exist_ok=True)
            for name in ("chaos-logs", "runs", "dask"):
                if (self.state / name).exists():
                    shutil.copytree(self.state / name, keep_logs / name, dirs_exist_ok=True,
                                    ignore=shutil.ignore_patterns("tls", "*.json"))
            for path in (self.state / "pgdata" / "server.log", self.state / "prefect-server.log"):
                if path.exists():
                    shutil.copy(path, keep_logs / path.name)
        shutil.rmtree(self.state, ignore_errors=True)
        if os.path.ismount(self.state):
            subprocess.run(["umount", "--lazy", str(self.state)], check=False, capture_output=True)
            self.state.rmdir()
