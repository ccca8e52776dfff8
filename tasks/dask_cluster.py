"""The Dask cluster a release runs on: a LocalCluster sized to the machine, or the operator's scheduler.

Every cluster trajpub starts speaks TLS with certificates generated for it (a CA of its own, client certificates
required): its processes hold raw data, and a scheduler runs the code any connected client sends, so no other
local client may connect (docs/design.md, "Decision codes and the control plane"). The operator's scheduler is
configuration, never a release spec's: ``TRAJPUB_DASK_ADDRESS`` (a ``tls://`` address) with Dask's own TLS
settings (``distributed.comm.tls.*``, e.g. ``DASK_DISTRIBUTED__COMM__TLS__CA_FILE``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import ssl
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dask
import pyarrow as pa
from distributed import Client, LocalCluster
from distributed.security import Security

from trajpub.errors import TrajpubError

#: Set in every worker process before it starts. Dask's nanny sets ``MALLOC_TRIM_THRESHOLD_``, which turns off
#: glibc's dynamic mmap threshold: every array above 128 KiB becomes a fresh mmap and the allocation-heavy attacks
#: ran 2-4x slower on workers than in one process (bench/AUDIT_RESULTS.md). A fixed 32 MiB threshold (the dynamic
#: threshold's ceiling) restores the single-process speed.
WORKER_ENVIRON = {"MALLOC_MMAP_THRESHOLD_": 32 * 1024 * 1024}


#: Dask's diagnostics that only its dashboard shows (trajpub's clusters have none): the statistical profiler
#: (every 10 ms in every worker), the event-loop health check (every 20 ms in every process) and the system
#: monitor (every 0.5 s), slowed or off. An idle two-worker cluster (scheduler, nannies and workers together) then
#: uses about 5% of a core instead of 10-15% (``python -m bench.dask_idle``, bench/SUITE_TIME_RESULTS.md). The
#: workers' memory monitor, which enforces their memory limit, is left as it is.
QUIET_DIAGNOSTICS = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "200ms",
                     "distributed.admin.system-monitor.interval": "2s"}


#: Imported once, in the fork server the worker processes are forked from (multiprocessing's "forkserver" start
#: method, which Dask supports), instead of again in every spawned worker of every cluster: Great Expectations
#: alone takes 5-6 s of CPU to import, which each worker paid before validating (``python -m bench.dask_start``,
#: bench/SUITE_TIME_RESULTS.md). The fork server starts, with :data:`WORKER_ENVIRON` already in its environment
#: (the nanny sets it before its first worker starts), when a process first needs it, and serves every later
#: cluster of that process; a worker the nanny restarts later is spawned (Dask's default).
WORKER_PRELOAD = ["distributed", "numpy", "pandas", "pyarrow", "great_expectations"]


def start_method(method: str) -> dict:
    """The Dask setting that starts worker processes with ``method``: "forkserver" forks them from the fork server,
    its preload set to :data:`WORKER_PRELOAD` (Dask sets a preload of its own on first use: replaced here, before
    the server starts); "spawn" is Dask's default (``python -m bench.dask_start`` compares them)."""
    from distributed.utils import get_mp_context

    setting = {"distributed.worker.multiprocessing-method": method}
    if method == "forkserver":
        with dask.config.set(setting):
            get_mp_context().set_forkserver_preload(WORKER_PRELOAD)
    return setting


def local_cluster(n_workers: int, security: Security | None = None, diagnostics: dict = QUIET_DIAGNOSTICS,
                  workers_start: str = "forkserver", **kwargs) -> LocalCluster:
    """A LocalCluster of single-threaded worker processes started by ``workers_start`` (:func:`start_method`)
    with :data:`WORKER_ENVIRON` and the Dask settings ``diagnostics`` (``{}``: Dask's own), on loopback over TLS
    with ``security`` (default: certificates generated for it, held in memory; ``Client(cluster)`` takes them)."""
    config = ({f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in WORKER_ENVIRON.items()}
              | start_method(workers_start) | diagnostics)
    with dask.config.set(config):
        # No dashboard, and the scheduler's HTTP server (health, metrics, unauthenticated) on a free port of
        # loopback only: the default, 8787 on every interface, is taken by the first cluster on the machine and
        # every other one warned on the console.
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                            dashboard_address="127.0.0.1:0",
                            scheduler_kwargs={"dashboard": False}, silence_logs=40, protocol="tls://", host="127.0.0.1",
                            security=security or Security.temporary(), **kwargs)


def tls_files(directory: Path) -> Security:
    """Generate a self-signed certificate and its key (``Security.temporary``: the certificate is its own CA)
    into ``directory`` (0700, files 0600) and return the Security that uses them for every role, TLS required:
    for a cluster whose processes, or whose clients, are started separately."""
    made = Security.temporary()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    paths = {}
    for name, text in (("cert.pem", made.tls_client_cert), ("key.pem", made.tls_client_key)):
        path = directory / name
        path.unlink(missing_ok=True)
        path.touch(mode=0o600)
        path.write_text(text)
        paths[name] = str(path)
    cert, key = paths["cert.pem"], paths["key.pem"]
    return Security(require_encryption=True, tls_ca_file=cert, tls_client_cert=cert, tls_client_key=key,
                    tls_scheduler_cert=cert, tls_scheduler_key=key, tls_worker_cert=cert, tls_worker_key=key)


def client_environment(address: str, security: Security) -> dict[str, str]:
    """The environment that points a flow at the scheduler at ``address`` with the client certificate of
    ``security`` (files, :func:`tls_files`): ``TRAJPUB_DASK_ADDRESS`` and Dask's own TLS settings."""
    return {"TRAJPUB_DASK_ADDRESS": address, "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True",
            "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": security.tls_ca_file,
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": security.tls_client_cert,
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": security.tls_client_key}


@contextlib.contextmanager
def dask_client() -> Iterator[Client]:
    """A client on the operator's scheduler (``TRAJPUB_DASK_ADDRESS``, over TLS with Dask's configured
    certificates), else on a LocalCluster with one single-threaded worker process per core."""
    logging.getLogger("distributed").setLevel(logging.WARNING)
    address = os.environ.get("TRAJPUB_DASK_ADDRESS")
    if address:
        where = f"TRAJPUB_DASK_ADDRESS {address}"
        if not address.startswith("tls://"):
            raise TrajpubError("the Dask scheduler must be a tls:// address (the flow sends it raw data), with its "
                               "certificates in Dask's configuration distributed.comm.tls.*", where)
        security = Security(require_encryption=True)
        if not (security.tls_ca_file and security.tls_client_cert):
            raise TrajpubError("no TLS certificate for the Dask scheduler: set distributed.comm.tls.ca-file and "
                               "distributed.comm.tls.client.cert/key (e.g. DASK_DISTRIBUTED__COMM__TLS__CA_FILE)",
                               where)
        try:
            client = Client(address, timeout="30s", security=security)
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise TrajpubError(f"cannot reach the Dask scheduler: {exc}", where) from None
        with client:
            yield client
        return
    n = os.cpu_count() or 1
    distributed_log = logging.getLogger("distributed")
    with warnings.catch_warnings():
        # the flow sends each partition to a worker by value on purpose (workers hold no database credential to
        # read it themselves): Dask's advice against large graphs does not apply, and it would reach the console
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        try:
            with local_cluster(n) as cluster, Client(cluster) as client:
                try:
                    yield client
                finally:  # closing: heartbeats and sends to comms that close first fail by design, with tracebacks
                    distributed_log.setLevel(logging.CRITICAL)
        finally:
            distributed_log.setLevel(logging.WARNING)


def n_workers(client: Client) -> int:
    return max(1, len(client.scheduler_info().get("workers", {})))


def release_unused_memory(client: Client) -> None:
    """Hand the memory the workers (and this process) have freed back to the operating system, between stages.

    Freed memory otherwise stays with the allocators: Arrow's pool (mimalloc; the partitions are read and their
    strings held by Arrow) and glibc's heap (pandas' and Great Expectations' smaller allocations). At 40x T-Drive
    that was about 1 GiB per worker after validation, held through the audit, whose large arrays are fresh
    mappings that cannot reuse it (bench/SCALE_RESULTS.md). This is Dask's own advice for unmanaged memory
    ("Memory not released back to the OS": ``client.run`` of ``malloc_trim``). Best effort: a worker that does not
    answer is skipped (the stages themselves deal with lost workers)."""
    client.run(_release_unused, on_error="ignore")
    _release_unused()


def _release_unused() -> None:
    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim this way
        pass


@dataclass
class ProcessCluster:
    """A ``dask scheduler`` and ``dask worker`` processes (:func:`process_cluster`): what a deployment runs
    and points ``TRAJPUB_DASK_ADDRESS`` at, with the certificates of ``security``."""

    address: str
    security: Security
    scheduler: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)

    def environment(self) -> dict[str, str]:
        """What a flow's environment needs to run on this cluster (:func:`client_environment`)."""
        return client_environment(self.address, self.security)


#: Left out of the environment of the worker processes trajpub starts: they never need a password.
SECRET_VARIABLES = ("TRAJPUB_DATABASE_URL", "TRAJPUB_AUDITOR_DATABASE_URL", "PREFECT_API_AUTH_STRING",
                    "PREFECT_SERVER_API_AUTH_STRING")


def _dask_command(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("dask")), *args]


@contextlib.contextmanager
def process_cluster(n_workers: int, directory: Path, memory_limit: str = "auto",
                    timeout_s: float = 600.0) -> Iterator[ProcessCluster]:
    """Start ``dask scheduler`` on loopback and ``n_workers`` single-threaded ``dask worker`` processes (each a
    nanny and its worker, with :data:`WORKER_ENVIRON`, Great Expectations imported at start as on a long-lived
    cluster: 7 s of CPU per worker otherwise paid by the first validation), wait until every worker has joined,
    and stop them all on exit. Every connection is TLS with certificates generated for the cluster
    (:func:`tls_files`). ``directory`` holds the scheduler file, the certificates (``tls/``) and the logs
    (``scheduler.log``, ``worker-<i>.log``)."""
    directory.mkdir(parents=True, exist_ok=True)
    scheduler_file = directory / "scheduler.json"
    scheduler_file.unlink(missing_ok=True)
    security = tls_files(directory / "tls")
    tls = ["--tls-ca-file", security.tls_ca_file, "--tls-cert", security.tls_scheduler_cert,
           "--tls-key", security.tls_scheduler_key]
    env = {**{k: v for k, v in os.environ.items() if k not in SECRET_VARIABLES},
           **{k: str(v) for k, v in WORKER_ENVIRON.items()}}
    procs: list[subprocess.Popen] = []

    def start(args: list[str], log: str) -> subprocess.Popen:
        with open(directory / log, "wb") as out:
            procs.append(subprocess.Popen(_dask_command(*args), stdout=out, stderr=subprocess.STDOUT, env=env))
        return procs[-1]

    try:
        scheduler = start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--protocol", "tls", *tls,
                           "--no-dashboard", "--scheduler-file", str(scheduler_file)], "scheduler.log")
        address = _wait_for(lambda: scheduler_file.exists() and json.loads(scheduler_file.read_text())["address"],
                            scheduler, timeout_s, "the dask scheduler to write its address")
        workers = [start(["worker", address, "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1", *tls,
                          "--memory-limit", memory_limit, "--name", f"worker-{i}",
                          "--preload", "great_expectations"], f"worker-{i}.log")
                   for i in range(n_workers)]
        with Client(address, timeout="30s", security=security) as client:
            client.wait_for_workers(n_workers, timeout=timeout_s)
        yield ProcessCluster(address, security, scheduler, workers)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_for(condition, proc: subprocess.Popen, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TrajpubError(f"the process ended (code {proc.returncode}) before {what}", " ".join(proc.args))
        with contextlib.suppress(OSError, ValueError, KeyError):
            value = condition()
            if value:
                return value
        time.sleep(0.1)
    raise TrajpubError(f"timed out after {timeout_s:g} s waiting for {what}", " ".join(proc.args))
