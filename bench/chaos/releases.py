"""The releases the chaos bench keeps running: two datasets loaded from small subsets of the T-Drive sample, at
least ``concurrency`` ``trajpub release run --spec`` commands alive at any time (a cheap spec: AdaTrace on 40
taxis), and a steward (``trajpub approve`` / ``reject``) deciding each release that awaits approval, mostly
approving, so that some publish."""

from __future__ import annotations

import random
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
import psutil
import sqlalchemy as sa
import yaml

from bench.chaos.services import PrivateServices
from trajpub import config

TDRIVE_CSV = config.SHARED_DATA_DIR / "tdrive_sample_odd_taxis.csv.gz"
BEIJING = [115.4, 39.4, 117.6, 41.1]
STEWARD = "chaos"
REQUESTER = "chaos-requester"
FINAL = ("blocked", "rejected", "published", "failed", "withdrawn")
APPROVE_SHARE = 0.75


def load_datasets(services: PrivateServices, n_taxis: int) -> list[str]:
    """Two datasets, each ``n_taxis`` different taxis of the sample (the first and the next ``n_taxis``), loaded
    with ``trajpub load``; a steward sets the ε cap to the documented maximum and the bench's gate policy
    (:func:`bench_policy`)."""
    df = pd.read_csv(TDRIVE_CSV)
    taxis = sorted(df["taxi_id"].unique())
    policy = services.state / "small-fleet-policy.yaml"
    policy.write_text(yaml.safe_dump(bench_policy().to_dict()))
    names = []
    for i, name in enumerate(("chaos_a", "chaos_b")):
        csv = services.state / f"{name}.csv"
        df[df["taxi_id"].isin(taxis[i * n_taxis:(i + 1) * n_taxis])].to_csv(csv, index=False)
        services.must("load", "tdrive", str(csv), "--dataset", name)
        services.must("budget", "cap", name, "1000", "--steward", STEWARD)
        services.must("policy", "set", name, str(policy), "--steward", STEWARD)
        names.append(name)
    return names


def bench_policy():
    """The default gate policy with members against controls measured on as few as 10 objects, deciding on the
    point estimate (tests/integration/conftest.py's ``small_fleet_policy``: the default asks for 30 of each, so
    every synthetic release of 40 taxis would be too few to measure), and no utility floor: the bench measures
    faults, not utility, and its one record per object (:func:`release_spec`) misses the floor's route F1 on so
    few taxis, so nothing would publish. Every attack still runs and gates."""
    from audits.gate import GatePolicy

    default = GatePolicy.default()
    return replace(default, controls=replace(default.controls, min_objects=10, max_risk_ci_width=1.0),
                   decide_on="point", utility={})


def release_spec(dataset: str) -> dict:
    """AdaTrace at ε = 10 per record (the tests' spec, which the small-fleet gate publishes on 40 taxis), one record
    per object: ε 10 per object, so the cap (1000) admits 100 releases of each dataset."""
    return {"dataset": dataset, "bbox": BEIJING, "requested_by": REQUESTER, "mechanism": "adatrace",
            "params": {"epsilon": 10.0, "max_records_per_object": 1}, "prepare": {"cell_size_m": 4000},
            "approval_timeout_s": 300, "queue_timeout_s": 1800}


@dataclass
class Driver:
    """Keeps ``concurrency`` releases alive over ``datasets`` and decides the ones awaiting approval."""

    services: PrivateServices
    datasets: list[str]
    rng: random.Random
    concurrency: int = 4
    fronts: list[subprocess.Popen] = field(default_factory=list)
    deciders: dict[int, subprocess.Popen] = field(default_factory=dict)
    decisions: dict[int, str] = field(default_factory=dict)
    started: int = 0
    exits: Counter = field(default_factory=Counter)  # "command exit code" -> how many ended so

    def __post_init__(self) -> None:
        self.logs = self.services.state / "chaos-logs"
        self.logs.mkdir(exist_ok=True)
        self.specs = {}
        for name in self.datasets:
            self.specs[name] = self.services.state / f"spec-{name}.yaml"
            self.specs[name].write_text(yaml.safe_dump(release_spec(name)))

    # --- what runs ------------------------------------------------------------------------------------------
    def flows(self) -> list[tuple[psutil.Process, int | None]]:
        """The live flow processes (``release run --wait``, started by the commands in the background) and the
        release each has planned (None before)."""
        found = []
        for proc in self.services.own_processes("release", "run", "--wait"):
            try:
                cmdline = proc.cmdline()
            except psutil.NoSuchProcess:
                continue
            spec = Path(cmdline[cmdline.index("--spec") + 1])
            found.append((proc, planned_release(spec.with_suffix(".log"))))
        return found

    def live_fronts(self) -> list[subprocess.Popen]:
        self.exits.update(f"release run exit {f.returncode}" for f in self.fronts if f.poll() is not None)
        self.fronts = [f for f in self.fronts if f.returncode is None]
        return self.fronts

    def live_deciders(self) -> dict[int, subprocess.Popen]:
        self.exits.update(f"{self.decisions[r]} exit {p.returncode}" for r, p in self.deciders.items()
                          if p.poll() is not None)
        self.deciders = {r: p for r, p in self.deciders.items() if p.returncode is None}
        return self.deciders

    def statuses(self) -> dict[int, str]:
        with self.services.engine().connect() as conn:
            return dict(conn.execute(sa.text("SELECT release_id, status FROM governance.releases")).all())

    # --- keeping it going -----------------------------------------------------------------------------------
    def tick(self, start_new: bool = True) -> None:
        """Start releases until ``concurrency`` are alive (a flow process, or a command that has not started its
        flow yet); start a decision for each release awaiting one that has none in flight."""
        flows = self.flows()
        if start_new:
            pending = [f for f in self.live_fronts() if not _has_children(f)]
            for _ in range(self.concurrency - len(flows) - len(pending)):
                self.start_release(self.datasets[self.started % len(self.datasets)])
        self.decide_waiting()

    def start_release(self, dataset: str) -> None:
        self.started += 1
        self.fronts.append(self.services.popen(["release", "run", "--spec", str(self.specs[dataset])],
                                               self.logs / f"run-{self.started}.log"))

    def decide_waiting(self) -> None:
        try:
            with self.services.engine().connect() as conn:
                waiting = conn.execute(sa.text(
                    "SELECT r.release_id FROM governance.releases r WHERE r.status = 'awaiting_approval'"
                    " AND NOT EXISTS (SELECT 1 FROM governance.approvals a WHERE a.release_id = r.release_id)"
                    " ORDER BY r.release_id")).scalars().all()
        except sa.exc.DBAPIError:  # the database is down or restarting: next tick
            return
        for release_id in waiting:
            if release_id in self.live_deciders():
                continue
            decision = self.decisions.setdefault(
                release_id, "approve" if self.rng.random() < APPROVE_SHARE else "reject")
            args = ["approve", str(release_id), "--steward", STEWARD, "--wait", "120"]
            if decision == "reject":
                args = ["reject", str(release_id), "--steward", STEWARD, "--comment", "the chaos bench rejects it",
                        "--wait", "120"]
            self.deciders[release_id] = self.services.popen(args, self.logs / f"decide-{release_id}.log")

    def clis(self) -> list[tuple[str, subprocess.Popen]]:
        """The commands in flight: release run commands still relaying their flow, decisions."""
        return ([("release run", f) for f in self.live_fronts()]
                + [(f"{self.decisions[r]} {r}", p) for r, p in self.live_deciders().items()])


def planned_release(log: Path) -> int | None:
    try:
        found = re.search(r"release (\d+) planned", log.read_text(errors="replace"))
    except FileNotFoundError:
        return None
    return int(found.group(1)) if found else None


def _has_children(proc: subprocess.Popen) -> bool:
    try:
        return bool(psutil.Process(proc.pid).children())
    except psutil.NoSuchProcess:
        return False
