"""Fixtures for the release flow tests: a real T-Drive subset in PostGIS, and the real CLI in subprocesses."""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa
import yaml

from audits.gate import GatePolicy
from tests.raw_scan import assert_none_readable
from trajpub import config
from trajpub.guarantee import Guarantee, PrivacyMap

TRAJPUB = str(Path(sys.executable).with_name("trajpub"))
TDRIVE_CSV = config.SHARED_DATA_DIR / "tdrive_sample_odd_taxis.csv.gz"
#: The sample's week in Beijing time (its points lie in 2-8 February 2008, local): a synthesizer's timestamps go here.
TDRIVE_WEEK = {"window_start": "2008-02-02T00:00:00+08:00", "window_end": "2008-02-09T00:00:00+08:00"}
BEIJING = [115.4, 39.4, 117.6, 41.1]


@pytest.fixture(scope="session", autouse=True)
def warm_dask(dask_cluster, dask_client):
    """The session's Dask cluster, given to every flow the tests start as ``TRAJPUB_DASK_ADDRESS`` with its TLS
    certificates (the way a deployment runs on an existing cluster): a flow run then skips starting two worker
    processes and importing Great Expectations in them (about 8 s of a 40-taxi release's 20). Tests about a
    cluster of their own pass its environment to :func:`start_release`."""
    import dask

    from tasks.dask_cluster import client_environment

    dask_client.run(importlib.import_module, "great_expectations")
    environment = client_environment(dask_cluster.scheduler_address, dask_cluster.security)
    os.environ.update(environment)
    dask.config.refresh()  # this process's clients read the certificates from Dask's configuration too
    yield dask_cluster.scheduler_address
    for key in environment:
        os.environ.pop(key, None)
    dask.config.refresh()


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the real ``trajpub`` command line."""
    return subprocess.run([TRAJPUB, *args], capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "TRAJPUB_TEST_MODE": "1"})


def base_spec(dataset: str, **overrides) -> dict:
    """A release of the 40-taxi subset that the default gate publishes: AdaTrace at ε = 10 per record passes both
    the attacks and the utility floor there (measured over 3 seeds: bench/UTILITY_RESULTS.md); the DP synthesizers
    at smaller ε, and the prefix tree at any ε tried, are blocked by the floor on so few taxis."""
    spec = {"dataset": dataset, "bbox": BEIJING, "requested_by": "pytest", "mechanism": "adatrace",
            "params": {"epsilon": 10.0, "max_records_per_object": 7},
            "prepare": {"cell_size_m": 4000}, "approval_timeout_s": 600, "seed": 7}
    spec.update(overrides)
    return spec


def set_dataset_policy(dataset: str, policy: dict, tmp_path: Path) -> str:
    """A steward registers ``policy`` as the dataset's gate policy (``trajpub policy set``); returns the CLI's
    output (it names the registered version)."""
    path = tmp_path / f"policy-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(policy))
    done = cli("policy", "set", dataset, str(path), "--steward", "ada")
    assert done.returncode == 0, done.stderr
    return done.stdout


@dataclass
class RunningRelease:
    """A ``trajpub release run`` subprocess and the release id it printed."""

    proc: subprocess.Popen
    lines: list[str] = field(default_factory=list)
    release_id: int | None = None
    reader: threading.Thread | None = None

    def output(self) -> str:
        return "".join(self.lines)


def start_release(spec: dict, tmp_path: Path, *extra: str, environment: dict | None = None) -> RunningRelease:
    """``trajpub release run`` on ``spec`` in a subprocess, on the session's shared Dask cluster (:func:`warm_dask`)
    unless ``environment`` names another (``ProcessCluster.environment()``)."""
    path = tmp_path / f"spec-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "TRAJPUB_TEST_MODE": "1", **(environment or {})}
    proc = subprocess.Popen([TRAJPUB, "release", "run", "--wait", "--spec", str(path), *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    run = RunningRelease(proc)

    def read() -> None:
        for line in proc.stdout:
            run.lines.append(line)
            m = re.search(r"release (\d+) planned", line)
            if m:
                run.release_id = int(m.group(1))

    run.reader = threading.Thread(target=read, daemon=True)
    run.reader.start()
    return run


POLL_S = 0.5


def wait_until(condition, timeout: float, what: str, poll_s: float = POLL_S):
    """Poll ``condition()`` every ``poll_s`` seconds until it returns something truthy (returned); fail after
    ``timeout`` seconds saying ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def final_state(flow_run_id: str):
    """The Prefect state a flow run ended in (its type, its name, e.g. Blocked, and its message)."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(uuid.UUID(str(flow_run_id))).state


def flow_run_in(output: str) -> str:
    """The id of the flow run a command's output names (Prefect's "View at .../flow-run/ID" line)."""
    [found] = set(re.findall(r"/flow-run/([0-9a-f-]{36})", output))
    return found


def release_status(engine: sa.Engine, release_id: int | None) -> str | None:
    if release_id is None:
        return None
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT status FROM governance.releases WHERE release_id = :r"),
                            {"r": release_id}).scalar()


def wait_for_status(engine: sa.Engine, run: RunningRelease, statuses: set[str], timeout: float = 240) -> str:
    """Poll governance.releases until the release reaches one of ``statuses``; fail if the process ends first."""

    def reached() -> str | None:
        ended = run.proc.poll() is not None
        if ended:
            run.reader.join(timeout=10)  # the last lines carry the release id
        status = release_status(engine, run.release_id)
        if status in statuses:
            return status
        if ended:
            raise AssertionError(f"the release process ended (code {run.proc.returncode}) with status {status}:\n"
                                 + run.output()[-4000:])
        return None

    try:
        return wait_until(reached, timeout, f"release {run.release_id} to reach {statuses}")
    except AssertionError as late:
        raise AssertionError(f"{late}; the release process said:\n{run.output()[-4000:]}") from None


@pytest.fixture(scope="session")
def tdrive_subset(tmp_path_factory) -> Path:
    """The first 40 taxis of the real T-Drive sample (about 50k points), as a T-Drive CSV."""
    df = pd.read_csv(TDRIVE_CSV)
    keep = sorted(df["taxi_id"].unique())[:40]
    path = tmp_path_factory.mktemp("tdrive") / "tdrive_40_taxis.csv"
    df[df["taxi_id"].isin(keep)].to_csv(path, index=False)
    return path


def small_fleet_policy() -> GatePolicy:
    """The gate policy a steward sets for the 40-taxi subset: the default with members against controls measured
    on 28 members and 12 controls (the default asks for 30 of each and an interval at most 0.4 wide, so every
    synthetic release of so few taxis would be "too few objects to measure"), deciding on the point estimate (28
    members put the upper end of a zero rate at 0.13, over the membership attacks' 0.05). The flow's tests need synthetic
    releases that the gate measures; the gate's own tests run the default policy on the 300-taxi sample
    (tests/integration/test_audit_gate.py)."""
    default = GatePolicy.default()
    return replace(default, controls=replace(default.controls, min_objects=10, max_risk_ci_width=1.0),
                   decide_on="point")


@pytest.fixture(scope="session")
def loaded_tdrive(engine, owner, tdrive_subset, stewards):
    """A function that loads the subset into a fresh dataset and returns its name (:func:`load_tdrive_subset`)."""
    return lambda prefix="flow": load_tdrive_subset(tdrive_subset, prefix, engine, owner, stewards["ada"])


def load_tdrive_subset(csv: Path, prefix: str, engine: sa.Engine, owner: sa.Engine, steward: sa.Engine) -> str:
    """Load the subset ``csv`` into a fresh dataset named after ``prefix`` and return its name. Its ε-DP cap is 1000
    per object: :func:`base_spec`'s AdaTrace costs 10 per record x 7 records = 70 per object, and several tests
    release more than once from one dataset (the budget tests set their own caps). Its gate policy is
    :func:`small_fleet_policy`, set by ``steward``."""
    from tasks import policies
    from tasks.load import load_source

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    load_source(engine, "tdrive", csv, name)
    with owner.begin() as conn:  # a steward's decision; the pipeline cannot change a cap
        conn.execute(sa.text("UPDATE governance.datasets SET epsilon_cap = 1000 WHERE dataset = :d"), {"d": name})
    with steward.begin() as conn:
        policies.set_for_dataset(conn, name, "small_fleet", policies.register(conn, "small_fleet",
                                                                            small_fleet_policy()))
    return name


@pytest.fixture
def bare_dataset(owner, dataset_name):
    """A dataset with governance rows and no points: enough for ledger and approval rules and for releases
    refused before any data is read (its cap set by the
    owner: the pipeline cannot choose a cap)."""
    with owner.begin() as conn:
        conn.execute(sa.text("INSERT INTO raw.datasets (dataset) VALUES (:d)"), {"d": dataset_name})
        conn.execute(sa.text("INSERT INTO governance.datasets (dataset, epsilon_cap) VALUES (:d, 5.5)"),
                     {"d": dataset_name})
    return dataset_name


def raw_statistics(engine: sa.Engine, release_id: int) -> dict[str, float]:
    """Exact statistics of a release's raw data, as governance holds them: snapshot and validation counts, the
    prepared counts, the raw points' bbox, and the mechanism's empirical epsilons (FGS)."""
    with engine.connect() as conn:
        rel = conn.execute(sa.text("SELECT dataset, snapshot_points, summary FROM governance.releases "
                                   "WHERE release_id = :r"), {"r": release_id}).mappings().one()
        n_rows, n_quarantined = conn.execute(sa.text(
            "SELECT n_rows, n_quarantined FROM governance.validation_results WHERE release_id = :r"),
            {"r": release_id}).one()
        bbox = conn.execute(sa.text("SELECT min(ST_X(geom)), min(ST_Y(geom)), max(ST_X(geom)), max(ST_Y(geom))"
                                    " FROM raw.points WHERE dataset = :d"), {"d": rel["dataset"]}).one()
    summary = rel["summary"]
    stats = {"snapshot_points": rel["snapshot_points"], "validation_rows": n_rows,
             "snapshot_objects": summary["snapshot"]["n_objects"],
             **{f"prepared_{k}": summary["prepare"][k] for k in ("points_in", "points", "trajectories", "objects")},
             **{f"bbox_{i}": v for i, v in enumerate(bbox)}}
    if n_quarantined:
        stats["quarantined"] = n_quarantined
    empirical = summary.get("mechanism", {}).get("empirical_epsilon") or {}
    stats |= {f"empirical_{k}": v for k, v in empirical.items() if k.startswith("epsilon_") and v is not None}
    return stats


def assert_no_raw_statistic_for_consumers(engine: sa.Engine, release_id: int) -> None:
    """What a consumer reads about a release (as ``trajpub_consumer``: ``published.release_lineage``,
    the comments and columns of the release's published tables and views; and its lineage events, which are meant
    for export) holds no exact raw count, bbox coordinate or empirical epsilon of governance."""
    from tests.integration.exports import consumer_engine

    forbidden = raw_statistics(engine, release_id)
    with engine.connect() as conn:
        events = [r[0] for r in conn.execute(sa.text("SELECT event FROM governance.lineage_events WHERE "
                                                     "release_id = :r"), {"r": release_id})]
    with consumer_engine().connect() as conn:
        lineage_rows = [dict(r) for r in conn.execute(sa.text(
            "SELECT * FROM published.release_lineage WHERE release_id = :r"), {"r": release_id}).mappings()]
        tables = [dict(r) for r in conn.execute(sa.text(
            "SELECT c.relname, obj_description(c.oid, 'pg_class') AS comment,"
            " (SELECT array_agg(attname) FROM pg_attribute WHERE attrelid = c.oid AND attnum > 0) AS columns"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'published'"
            " AND c.relkind IN ('r', 'v') AND has_table_privilege(c.oid, 'SELECT')"
            " AND (c.relname LIKE :own OR c.relname = 'release_lineage')"),
            {"own": f"{lineage_rows[0]['dataset']}%" if lineage_rows else "-"}).mappings()]
    assert lineage_rows, "the consumer sees no lineage of the release"
    readable = {"lineage events": events, "published.release_lineage": json.loads(json.dumps(lineage_rows,
                                                                                             default=str)),
                "published tables": tables}
    assert_none_readable(forbidden, readable, release_id)


STEWARDS = ("alice", "bob", "ada")


@pytest.fixture(scope="session", autouse=True)
def stewards(engine) -> dict[str, sa.Engine]:
    """Steward logins made as an operator makes them (``trajpub steward add``), by name, as engines."""
    from tasks.db import steward_engine

    with open(config.STATE_DIR / "test-stewards.lock", "w") as lock:  # xdist workers: one adds, the others find
        fcntl.flock(lock, fcntl.LOCK_EX)
        for login in STEWARDS:
            out = cli("steward", "add", login)
            assert out.returncode == 0, out.stderr
    return {login: steward_engine(login) for login in STEWARDS}


REQUESTERS = ("pytest", "requester", "r", "x", "demo-engineer", "scheduler", "backfill-operator")


@pytest.fixture(scope="session", autouse=True)
def requesters(stewards) -> tuple[str, ...]:
    """The requesters the tests' releases name, registered as an operator registers them (``trajpub requester
    add``, idempotent); a steward's login is a requester without registration."""
    from flows.services import add_requester

    for name in REQUESTERS:
        add_requester(name)
    return REQUESTERS


def new_release(engine: sa.Engine, dataset: str, requested_by: str = "requester") -> int:
    """A release recorded as the flow's plan step records it (status planned), without running anything."""
    from tasks import governance

    with engine.begin() as conn:
        return governance.create_release(conn, {"dataset": dataset, "mechanism": "prefix_tree",
                                                "requested_by": requested_by, "window_start": None,
                                                "window_end": None}, {"epsilon": 1.0}, {"epsilon": 1.0})


def record_validation(conn: sa.Connection, release_id: int) -> None:
    """A validation result for the release, the evidence the database asks of a move to validated."""
    conn.execute(sa.text("INSERT INTO governance.validation_results (release_id, suite, success, n_rows, n_quarantined,"
                         " result) VALUES (:r, 'test', true, 0, 0, '{}') ON CONFLICT DO NOTHING"), {"r": release_id})


def record_audit(conn: sa.Connection, release_id: int, blocked: bool = False) -> None:
    """The audit's evidence as the flow's auditor records it (``conn``: the auditor's login): an audit result, the
    gate's decision, a review report."""
    from tasks import governance

    conn.execute(sa.text("INSERT INTO governance.audit_results (release_id, attack, threshold, passed, outcome, error,"
                         " evidence) VALUES (:r, 'test_attack', NULL, true, 'not applicable', 'staged by a test',"
                         " '{}') ON CONFLICT DO NOTHING"), {"r": release_id})
    governance.record_gate(conn, release_id, {}, {"blocked": blocked, "reasons": []})
    conn.execute(sa.text("INSERT INTO governance.review_reports (release_id, html) VALUES (:r, '<p>test</p>')"),
                 {"r": release_id})


TEST_CHARGE = Guarantee(model="epsilon-DP", privacy_unit="one object", statement="a test's charge", proven=True,
                        epsilon=1.0, privacy_map=PrivacyMap("epsilon-DP", "per_object"))


def to_protected(engine: sa.Engine, release_id: int, candidate=None, charged: bool = True) -> None:
    """Walk a planned release to protected as the pipeline does: a ledger charge (epsilon 1 per object, unless it
    has one or not ``charged``), a validation result, ``candidate`` staged and sealed (a
    :class:`trajpub.candidate.CandidateRelease`, by default a tiny synthetic one)."""
    from tasks import governance, publish
    from tests.integration.staged import SHAPES

    with engine.begin() as conn:
        rel = governance.get_release(conn, release_id)
        if charged and governance.release_charge(conn, release_id) is None:
            governance.charge_budget(conn, release_id, rel["dataset"], rel["mechanism"], TEST_CHARGE)
        record_validation(conn, release_id)
        governance.transition(conn, release_id, "validated")
        publish.stage(conn, release_id, candidate or SHAPES["trajectories"]().check())
        governance.transition(conn, release_id, "protected")


def to_awaiting_approval(engine: sa.Engine, release_id: int, candidate=None) -> None:
    """Walk a release through the status machine to awaiting_approval with the evidence the flow records
    (:func:`to_protected`, then the audit's evidence recorded and attested as the auditor's login: sql/036)."""
    from tasks import governance
    from tasks.db import auditor_engine

    to_protected(engine, release_id, candidate)
    with auditor_engine().begin() as conn:
        record_audit(conn, release_id)
        governance.attest_audit(conn, release_id)
    with engine.begin() as conn:
        for status in ("audited", "awaiting_approval"):
            governance.transition(conn, release_id, status)
