"""One chaos run: private services up, two datasets, ``concurrency`` releases kept alive, ``n_faults`` random
faults (:mod:`bench.chaos.faults`) each followed by ``trajpub recover``, ``trajpub verify`` and the invariants
(:mod:`bench.chaos.invariants`); then no new release, the ones left decided and finished, a last check, and the
services stopped and removed."""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from bench.chaos import faults, invariants
from bench.chaos.releases import FINAL, REQUESTER, STEWARD, Driver, load_datasets
from bench.chaos.services import PrivateServices

TICK_S = 1.0


@dataclass
class Result:
    n_faults: int
    seed: int
    faults: list[faults.Fault] = field(default_factory=list)
    violations: list[tuple[int, invariants.Violation]] = field(default_factory=list)  # (fault number, 0: end)
    hung: set[int] = field(default_factory=set)
    outcomes: Counter = field(default_factory=Counter)  # final status of every release -> count
    commands: Counter = field(default_factory=Counter)  # recover / verify / the releases' commands: exit codes
    wall_s: float = 0.0
    setup_s: float = 0.0
    moments: Counter = field(default_factory=Counter)  # statuses live when a fault hit

    @property
    def broken(self) -> list[tuple[int, invariants.Violation]]:
        return [(n, v) for n, v in self.violations if v.invariant != "hung"]


def run(n_faults: int, seed: int, concurrency: int = 4, n_taxis: int = 40, gap_s: tuple[float, float] = (1, 15),
        hung_s: float = 900, drain_s: float = 900, max_s: float = float("inf"), keep_logs: Path | None = None,
        say=print) -> Result:
    """The bench (module docstring); ``gap_s``: the random wait before each fault, while the releases run;
    ``max_s``: no fault starts later than this many seconds into the run (the count reached is reported);
    ``keep_logs``: where the services' and commands' logs are kept (the reproduction of a violation)."""
    rng = random.Random(seed)
    result = Result(n_faults, seed)
    t0 = time.monotonic()
    services = PrivateServices.make()
    say(f"private services in {services.state} (PostgreSQL :{services.env['TRAJPUB_PG_PORT']}, Prefect "
        f":{services.env['TRAJPUB_PREFECT_PORT']}, Dask {services.dask.address})")
    try:
        services.up((STEWARD,), (REQUESTER,))
        datasets = load_datasets(services, n_taxis)
        driver = Driver(services, datasets, rng, concurrency)
        anchor = services.state / "chaos-anchor.json"
        result.setup_s = time.monotonic() - t0
        say(f"set up in {result.setup_s:.0f} s: datasets {', '.join(datasets)}")
        driver.tick()
        for n in range(1, n_faults + 1):
            if time.monotonic() - t0 > max_s:
                say(f"time is up after {n - 1} faults")
                break
            wait_ticking(driver, rng.uniform(*gap_s))
            wait_for_a_live_release(driver, hung_s)
            kind = rng.choice(faults.KINDS)
            fault = faults.inject(n, kind, services, driver, rng, t0)
            result.faults.append(fault)
            result.moments.update(fault.statuses.values())
            say(f"fault {n}/{n_faults} at {fault.at_s:.0f} s: {kind}: {fault.target} {fault.detail} "
                f"(live: {fault.statuses})")
            check_round(n, services, driver, datasets, anchor, result, hung_s, say)
        drain(driver, drain_s, say)
        check_round(0, services, driver, datasets, anchor, result, hung_s, say)
        for rid, status in driver.statuses().items():
            result.outcomes[status] += 1
            if status not in FINAL:
                result.hung.add(rid)
                result.violations.append((0, invariants.Violation(
                    "hung", f"release {rid}", f"still '{status}' at the end, {drain_s:.0f} s after the last fault")))
        driver.live_fronts()
        driver.live_deciders()
        result.commands.update(driver.exits)
    finally:
        services.down(keep_logs)
    result.wall_s = time.monotonic() - t0
    return result


def wait_ticking(driver: Driver, seconds: float, start_new: bool = True) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            driver.tick(start_new)
        except Exception as exc:  # noqa: BLE001 (a service restarting: the next tick tries again)
            print(f"tick: {type(exc).__name__}: {exc}")
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(TICK_S, left))


def wait_for_a_live_release(driver: Driver, timeout_s: float) -> None:
    """Each fault lands in some release's life: wait (ticking) until one is planned and not ended."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if any(s not in FINAL for s in driver.statuses().values()) and driver.flows():
                return
        except sa.exc.DBAPIError:
            pass
        wait_ticking(driver, 2)


def check_round(n: int, services: PrivateServices, driver: Driver, datasets: list[str], anchor, result: Result,
                hung_s: float, say) -> None:
    """``trajpub recover``, ``trajpub verify`` (its own anchor: ``--new-anchor`` until the first clean check
    wrote one), and the invariants; every violation recorded with the fault's number."""
    recovered_at, t = datetime.now(UTC), time.monotonic()
    recover = services.cli("recover")
    took = {"recover": time.monotonic() - t}
    record = driver.logs / f"round-{n}.log"
    record.write_text(f"$ trajpub recover (exit {recover.returncode})\n{recover.stdout}{recover.stderr}")
    result.commands[f"recover exit {recover.returncode}"] += 1
    found = []
    if recover.returncode != 0:
        found.append(invariants.Violation("recover", "trajpub recover", f"exit {recover.returncode}: "
                                          + (recover.stderr.strip().splitlines() or ["(no output)"])[-1]))

    def verify() -> list[str]:
        args = ["verify", "--anchor", str(anchor)] + ([] if anchor.exists() else ["--new-anchor"])
        t = time.monotonic()
        done = services.cli(*args)
        took["verify"] = time.monotonic() - t
        with record.open("a") as f:
            f.write(f"$ trajpub {' '.join(args)} (exit {done.returncode})\n{done.stdout}{done.stderr}")
        result.commands[f"verify exit {done.returncode}"] += 1
        if done.returncode == 0:
            return []
        return [ln for ln in done.stderr.strip().splitlines() if ln.strip()][-5:] or [f"exit {done.returncode}"]

    t = time.monotonic()
    found += invariants.check(services.engine(), datasets, recovered_at, verify,
                             lambda: set(driver.live_deciders()), hung_s)
    took["invariants"] = time.monotonic() - t - took.get("verify", 0)
    for v in found:
        if v.invariant == "hung":
            result.hung.add(int(v.where.split()[1]))
        result.violations.append((n, v))
        say(f"  VIOLATION after fault {n}: {v.invariant}: {v.where}: {v.what}")
    say(f"  checked after fault {n}: recover exit {recover.returncode}, {len(found)} violation(s) ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in took.items()) + ")")


def drain(driver: Driver, drain_s: float, say) -> None:
    """No new release: decide those awaiting a decision and wait (up to ``drain_s``) until every flow ended."""
    deadline = time.monotonic() + drain_s
    while time.monotonic() < deadline:
        wait_ticking(driver, 5, start_new=False)
        if not driver.flows() and not driver.live_fronts() and not driver.live_deciders():
            open_ = {r: s for r, s in driver.statuses().items() if s == "awaiting_approval"}
            if not open_:
                return
    say(f"drain: flows still alive after {drain_s:.0f} s")
