"""The faults the chaos bench injects, each at a random moment of a random release's life (Jepsen's method: many
random faults, the invariants checked after each): kill -9 of a release's flow process, of a command in flight
(``release run`` relaying its flow, ``approve``/``reject``, or ``recover``), of a Dask worker process (its nanny
starts another), of a whole worker (nanny and worker: lost, replaced later), of the Dask scheduler (the cluster
started again on the same address), of the Prefect server (then ``trajpub server up``), and a PostgreSQL crash
(``pg_ctl stop -m immediate``, then ``trajpub db up``).

Two kinds aim at a moment: ``lost_worker_ingest`` loses a whole worker while some release ingests or validates
(status ``planned``: its partitions are in worker memory or on their way), and ``disk_full`` fills the bench's
own state filesystem (a tmpfs mounted on its state folder when it runs as root, :mod:`bench.chaos.services`:
never the shared disk) for a few seconds."""

from __future__ import annotations

import contextlib
import random
import signal
import time
from dataclasses import dataclass, field

import psutil

from bench.chaos.releases import Driver
from bench.chaos.services import PrivateServices, kill_tree

KINDS = ("flow", "cli", "worker", "lost_worker", "lost_worker_ingest", "scheduler", "prefect", "postgres",
         "disk_full")
#: How long ``lost_worker_ingest`` waits for a release to be ingesting or validating before it loses a worker anyway.
INGEST_WAIT_S = 180.0


@dataclass
class Fault:
    """One injected fault: its kind, when (seconds into the bench), what it hit, and every live release's status
    at that moment."""

    n: int
    kind: str
    at_s: float
    target: str
    statuses: dict[int, str] = field(default_factory=dict)
    detail: str = ""


def inject(n: int, kind: str, services: PrivateServices, driver: Driver, rng: random.Random, t0: float) -> Fault:
    """Inject one fault of ``kind`` now and repair the service it took down (a crashed server is started again
    as an operator would); returns what was done."""
    try:
        live = {r: s for r, s in driver.statuses().items() if s not in ("blocked", "rejected", "published", "failed",
                                                                        "withdrawn")}
    except Exception as exc:  # noqa: BLE001 (the database may be down already: the fault goes on)
        live = {-1: f"unknown ({type(exc).__name__})"}
    fault = Fault(n, kind, round(time.monotonic() - t0, 1), "", live)
    try:
        fault.target, fault.detail = INJECT[kind](services, driver, rng)
    except Exception as exc:  # noqa: BLE001 (the bench's own failure to inject or repair: said, and it goes on)
        fault.target, fault.detail = "BENCH ERROR", f"{type(exc).__name__}: {exc}"[:500]
    return fault


def kill_flow(services: PrivateServices, driver: Driver, rng: random.Random) -> tuple[str, str]:
    flows = driver.flows()
    if not flows:
        return "no flow process alive", ""
    proc, release_id = rng.choice(flows)
    kill_tree(proc.pid)
    return f"flow of release {release_id}" if release_id else "a flow before its plan", f"pid {proc.pid}"


def kill_cli(services: PrivateServices, driver: Driver, rng: random.Random) -> tuple[str, str]:
    """kill -9 of one command (not its background flow): a ``release run`` relaying its flow, a decision in flight,
    or a ``recover`` started now and killed after a random 0.5-8 s."""
    choices = [*driver.clis(), ("recover", None)]
    what, proc = rng.choice(choices)
    if proc is None:
        proc = services.popen(["recover"], driver.logs / "killed-recover.log")
        time.sleep(rng.uniform(0.5, 8.0))
    try:
        psutil.Process(proc.pid).send_signal(signal.SIGKILL)
    except psutil.NoSuchProcess:
        return f"`{what}` (it had ended)", ""
    proc.wait(timeout=30)
    return f"`trajpub {what}`", f"pid {proc.pid}"


def kill_worker_process(services: PrivateServices, driver: Driver, rng: random.Random) -> tuple[str, str]:
    """kill -9 of a worker process; its nanny starts a new one (the tasks it held are lost)."""
    nannies = services.dask.live_workers()
    if not nannies:
        return "no Dask worker alive", ""
    nanny = rng.choice(nannies)
    try:
        children = psutil.Process(nanny.pid).children()
    except psutil.NoSuchProcess:
        children = []
    if not children:
        return "a Dask worker still starting", ""
    victim = rng.choice(children)
    kill_tree(victim.pid)
    return "a Dask worker process", f"pid {victim.pid} (nanny {nanny.pid} restarts it)"


def lose_worker(services: PrivateServices, driver: Driver, rng: random.Random) -> tuple[str, str]:
    """kill -9 of a whole worker (nanny and worker): it is gone; another joins after 5-30 s."""
    nannies = services.dask.live_workers()
    if not nannies:
        return "no Dask worker alive", ""
    nanny = rng.choice(nannies)
    kill_tree(nanny.pid)
    nanny.wait(timeout=30)
    time.sleep(rng.uniform(5, 30))
    services.dask.add_worker()
    return "a whole Dask worker (lost)", f"nanny {nanny.pid}; a new worker started"


def lose_worker_in_ingest(services: PrivateServices, driver: Driver, rng: random.Random) -> tuple[str, str]:
    """:func:`lose_worker` once a release with a live flow is ``planned`` (ingesting or validating; the driver
    ticks meanwhile), or after :data:`INGEST_WAIT_S` whatever the statuses."""
    deadline = time.monotonic() + INGEST_WAIT_S
    planned: list[int] = []
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # a service restarting: look again
            driver.tick()
            planned = [r for r, s in driver.statuses().items() if s == "planned"]
            if planned and driver.flows():
                break
        time.sleep(0.5)
    target, detail = lose_worker(services, driver, rng)
    when = f"while release(s) {', '.join(map(str, planned))} ingested" if planned else "(no release was ingesting)"
    return f"{target} {when}", detail


def fill_disk(services: PrivateServices, driver: Driver, rng: random.Random) -> tuple[str, str]:
    return "the bench's state filesystem (full disk)", services.fill_disk(rng.uniform(2, 10))


def kill_scheduler(services: PrivateServices, driver: Driver, rng: random.Random) -> tuple[str, str]:
    scheduler = services.dask.scheduler
    kill_tree(scheduler.pid)
    scheduler.wait(timeout=30)
    services.dask.restart()
    return "the Dask scheduler", f"pid {scheduler.pid}; the cluster started again on {services.dask.address}"


def crash_prefect(services: PrivateServices, driver: Driver, rng: random.Random) -> tuple[str, str]:
    return "the Prefect server", services.crash_prefect()


def crash_postgres(services: PrivateServices, driver: Driver, rng: random.Random) -> tuple[str, str]:
    return "PostgreSQL", services.crash_postgres()


INJECT = {"flow": kill_flow, "cli": kill_cli, "worker": kill_worker_process, "lost_worker": lose_worker,
          "lost_worker_ingest": lose_worker_in_ingest, "scheduler": kill_scheduler, "prefect": crash_prefect,
          "postgres": crash_postgres, "disk_full": fill_disk}
