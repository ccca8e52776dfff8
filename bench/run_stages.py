"""Measure each stage of trajpub on this machine: ``python -m bench.run_stages`` (``make bench``).

Stages (``--only``, comma-separated; default: all):

``load``
    ``tasks.load.load_source`` of the T-Drive sample (300 taxis, 402,428 points) into a fresh dataset,
    ``--repeat`` times, with the loader's own phases (hash, parse, CSV, COPY, INSERT, commit). Target ≤ 15 s.
``release``
    The whole release flow (``trajpub release run --spec ...`` in a subprocess, the demo spec with the dataset
    changed) on a freshly loaded copy of the sample, ``--repeat`` times on that dataset (its ε cap is raised).
    Timed from the process launch until the release is ``awaiting_approval`` in ``governance.releases``; the
    stages come from the ``governance.release_transitions`` timestamps and from the time each line of the
    flow's log was read. Each release is then rejected with ``trajpub reject`` once its flow run is paused,
    so no flow is left waiting (a release the gate blocks ends by itself). Then ``--warm-repeat`` more runs
    with ``TRAJPUB_DASK_ADDRESS`` pointing at a long-lived LocalCluster whose workers have already
    imported Great Expectations. Target ≤ 60 s, excluding the wait for approval.
``prefix_tree``
    The noisy prefix tree alone on synthetic trajectories: |L| = 32 x 32 = 1,024 grid cells, h = 20,
    ``--pt-records`` records (default 0.3 M, 0.6 M, 1.2 M) with geometric lengths of mean 7 (persistent
    random walks on the grid, start cells Zipf-like), expansion policy ``parent_bound`` with the library's
    default ``min_expand_count: auto``, Full release (``consistency: projected``). Measured in-process
    (``mechanisms.prefix_tree.sanitize``) and on the Dask path of the flow
    (``mechanisms.prefix_tree.adapter.PrefixTree.run`` on partitions held by a ``LocalCluster``). Also records what
    ``parent_bound`` alone (``min_expand_count: None``) does at the largest size. Target ≤ 30 s at 1.2 M
    records (the paper's Java: 24 s).
``scaleup``
    A ``--scale``-times T-Drive (default 10): copy k of each taxi gets the id ``k * 1000 + id`` and all its
    points translated by one random offset of 2-5 m (times unchanged, so the demo spec's window still
    applies and the logger's verbatim duplicates stay duplicates). Written to ``bench/out/``, loaded into a
    fresh dataset and released like the ``release`` stage.

Dataset names carry a timestamp, so the script can be re-run; every release it starts is rejected (or ends
blocked/failed) before it exits. Raw results go to ``bench/out/results_<timestamp>.json`` and the tables to
``bench/out/results_<timestamp>.md``; ``bench/RESULTS.md`` is the curated record.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import threading
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trajpub import config

config.apply_environment()

import numpy as np
import pandas as pd
import sqlalchemy as sa
import yaml

from tasks import protect
from trajpub.mechanism import PublicInputs

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"
DEMO_SPEC = config.PROJECT_ROOT / "flows" / "specs" / "tdrive_demo.yaml"
TDRIVE = config.SHARED_DATA_DIR / "tdrive_sample_odd_taxis.csv.gz"
TRAJPUB = str(Path(sys.executable).with_name("trajpub"))
STAGES = ("load", "release", "prefix_tree", "scaleup")
TARGET_S = {"load": 15.0, "release": 60.0, "prefix_tree": 30.0}
SCALEUP_ID_STRIDE = 1000  # T-Drive sample ids are 1..599
SCALEUP_SEED = 20080202  # fixes the synthetic input data only; the mechanism's noise is never seeded here
SYNTHETIC_SEED = 4_000_000  # + number of records: the same synthetic trajectories on every run
STEWARD = "bench"
FINAL_BEFORE_REVIEW = {"awaiting_approval", "blocked", "failed"}


# --- small helpers --------------------------------------------------------------------------------------------
def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def spread(values: list[float]) -> dict:
    """Median, min, max and the values themselves (seconds)."""
    values = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None, "values": []}
    return {"n": len(values), "median": statistics.median(values), "min": min(values), "max": max(values),
            "values": values}


def fmt_s(stats: dict) -> str:
    """``median (min-max)`` in seconds, or ``-``."""
    if not stats or not stats.get("n"):
        return "-"
    if stats["n"] == 1:
        return f"{stats['median']:.2f}"
    return f"{stats['median']:.2f} ({stats['min']:.2f}-{stats['max']:.2f})"


def loadavg() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def machine() -> dict:
    """nproc, RAM, CPU model, date, git commit (read-only git), the command line."""
    cpu = "unknown"
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as fh:
        mem_kb = int(next(line for line in fh if line.startswith("MemTotal")).split()[1])

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=config.PROJECT_ROOT, capture_output=True, text=True,
                                  check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "unknown"

    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"nproc": os.cpu_count(), "ram_gib": round(mem_kb / 2**20, 1), "cpu": cpu,
            "python": platform.python_version(), "kernel": platform.release(),
            "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "git_commit": git("rev-parse", "HEAD"), "git_dirty_tracked_files": dirty.splitlines(),
            "command": " ".join([Path(sys.executable).name, "-m", "bench.run_stages", *sys.argv[1:]]),
            "loadavg_start": loadavg()}


def engine() -> sa.Engine:
    from tasks.db import engine as db_engine

    return db_engine()


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's terminated, waited-for descendants (a process tree's
    workers count once their parents reaped them). Less sensitive to other users of the machine than wall time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([TRAJPUB, *args], check=False, capture_output=True, text=True, timeout=timeout,
                          cwd=config.PROJECT_ROOT)


# --- stage 1: load --------------------------------------------------------------------------------------------
LOAD_PHASES = [("hashing", "hash"), ("parsing", "parse"), ("read ", "time order"),
               ("copying", "CSV + COPY into raw.points"), ("quarantining", "quarantine rejects"),
               ("committing", "commit")]


def bench_load(path: Path, dataset: str, fmt: str = "tdrive") -> dict:
    """One ``load_source`` into a fresh dataset, with its phases from the progress messages."""
    from tasks.load import load_source

    marks: list[tuple[float, str]] = []
    start = time.perf_counter()
    report = load_source(engine(), fmt, path, dataset,
                         progress=lambda m: marks.append((time.perf_counter() - start, m)))
    wall = time.perf_counter() - start
    if report.already_loaded:
        raise RuntimeError(f"{path} was already loaded into {dataset}: the benchmark needs a fresh dataset")
    phases: dict[str, float] = {}
    timed = [(t, label) for t, m in marks for prefix, label in LOAD_PHASES if m.startswith(prefix)]
    ends = [t for t, _ in timed[1:]] + [wall]
    for (t, label), end in zip(timed, ends, strict=True):
        phases[label] = phases.get(label, 0.0) + end - t
    return {"dataset": dataset, "seconds": wall, "n_read": report.n_read, "n_loaded": report.n_loaded,
            "n_quarantined": report.n_quarantined, "points_per_s": report.n_loaded / wall, "phases": phases,
            "loadavg": loadavg()}


def load_runs(path: Path, prefix: str, repeat: int) -> list[dict]:
    """``repeat`` timed loads of ``path``, each into a fresh dataset ``<prefix>_<i>``."""
    runs = []
    for i in range(repeat):
        dataset = f"{prefix}_{i}"
        say(f"load {path.name} into {dataset} (run {i + 1}/{repeat})")
        runs.append(bench_load(path, dataset))
        say(f"  {runs[-1]['seconds']:.2f} s, {runs[-1]['n_loaded']} points")
    return runs


def stage_load(args: argparse.Namespace, tag: str) -> dict:
    runs = load_runs(TDRIVE, f"bench_load_{tag}", args.repeat)
    return {"runs": runs, "seconds": spread([r["seconds"] for r in runs]),
            "phases": {label: spread([r["phases"].get(label) for r in runs if label in r["phases"]])
                       for _, label in LOAD_PHASES},
            "target_s": TARGET_S["load"]}


# --- stage 2: the release flow --------------------------------------------------------------------------------
LOG_MARKS = {"planned": re.compile(r"release (\d+) planned"), "snapshot": re.compile(r"snapshot: (\d+) points of (\d+)"),
             "validation": re.compile(r"validation: (\d+) of (\d+) points quarantined"),
             "prepared": re.compile(r"prepared: (\d+) trajectories of (\d+) objects"),
             "protected": re.compile(r"protected: \S+ released (\d+) trajectories"),
             "audit": re.compile(r"audit: (\S+): success ([\d.]+) .* risk ([\d.]+)"),
             "review": re.compile(r"is awaiting approval")}


def flow_run_state(flow_run_id: str) -> str | None:
    """The Prefect state type of a flow run, read from the server's API (with its authentication string)."""
    import httpx
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(flow_run_id).state
    except (OSError, httpx.HTTPError, ObjectNotFound):
        return None
    return state.type.value if state else None


def release_status(release_id: int) -> dict:
    with engine().connect() as conn:
        return dict(conn.execute(sa.text("SELECT status, flow_run_id, failure_reason, snapshot_points, summary"
                                         " FROM governance.releases WHERE release_id = :r"),
                                 {"r": release_id}).mappings().one())


def transitions(release_id: int) -> dict[str, float]:
    """Epoch seconds at which the release entered each status (``release_transitions.at``)."""
    with engine().connect() as conn:
        rows = conn.execute(sa.text("SELECT to_status, at FROM governance.release_transitions"
                                    " WHERE release_id = :r ORDER BY at"), {"r": release_id}).all()
    return {status: at.timestamp() for status, at in rows}


def reject(release_id: int) -> dict:
    """``trajpub reject`` once the flow run is paused (rejecting earlier would leave the flow waiting)."""
    status = release_status(release_id)
    waited_from = time.time()
    paused = False
    while time.time() - waited_from < 120:
        if flow_run_state(str(status["flow_run_id"])) == "PAUSED":
            paused = True
            break
        time.sleep(0.2)
    pause_lag = time.time() - waited_from
    t0, cpu0 = time.time(), children_cpu_s()
    done = run_cli("reject", str(release_id), "--steward", STEWARD, "--comment", "benchmark run")
    return {"paused_seen_after_s": pause_lag, "paused": paused, "reject_s": time.time() - t0,
            "reject_cpu_s": children_cpu_s() - cpu0,
            "reject_rc": done.returncode, "reject_out": (done.stdout + done.stderr).strip()[-500:]}


def run_release(dataset: str, label: str, timeout_s: float, dask: dict | None = None) -> dict:
    """One release flow in a subprocess, on its own LocalCluster or on the cluster ``dask`` names (the
    environment of :func:`tasks.dask_cluster.client_environment`); returns its timings. Always leaves the release
    out of review."""
    spec = yaml.safe_load(DEMO_SPEC.read_text())
    spec.update(dataset=dataset, requested_by="bench", approval_timeout_s=900)
    spec_path = OUT_DIR / f"spec_{dataset}_{label}.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    log_path = OUT_DIR / f"release_{dataset}_{label}.log"
    lines: list[tuple[float, str]] = []
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(dask or {})}
    cpu_before = children_cpu_s()
    launched = time.time()
    proc = subprocess.Popen([TRAJPUB, "release", "run", "--wait", "--spec", str(spec_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1, cwd=config.PROJECT_ROOT, env=env)

    def read() -> None:
        for line in proc.stdout:
            lines.append((time.time(), line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    release_id: int | None = None
    status: str | None = None
    result: dict[str, Any] = {"dataset": dataset, "label": label, "log": str(log_path.relative_to(BENCH_DIR)),
                              "dask": (dask or {}).get("TRAJPUB_DASK_ADDRESS") or "LocalCluster started by the flow",
                              "spec": {k: spec[k] for k in ("mechanism", "params", "prepare", "validation") if k in spec}}
    rejected = False
    try:
        while time.time() - launched < timeout_s:
            if release_id is None:
                for _, line in lines[:]:
                    m = LOG_MARKS["planned"].search(line)
                    if m:
                        release_id = int(m.group(1))
                        break
            if release_id is not None:
                status = release_status(release_id)["status"]
                if status in FINAL_BEFORE_REVIEW:
                    break
            if proc.poll() is not None and (release_id is None or status not in FINAL_BEFORE_REVIEW):
                time.sleep(0.5)  # let the last lines and the last transition arrive
                if release_id is not None:
                    status = release_status(release_id)["status"]
                break
            time.sleep(0.2)
        seen = time.time()
        result.update(release_id=release_id, status=status, seen_after_s=seen - launched)
        if release_id is None:
            raise RuntimeError(f"the flow did not plan a release within {timeout_s:.0f} s")
        at = transitions(release_id)
        result["transitions"] = {k: v - launched for k, v in at.items()}
        if status == "awaiting_approval":
            result["reject"] = reject(release_id)
            rejected = True
        proc.wait(timeout=300)
        result["exit_code"] = proc.returncode
        final = release_status(release_id)
        result["final_status"], result["failure_reason"] = final["status"], final["failure_reason"]
        result["flow_exit_after_s"] = time.time() - launched
        if not dask:  # the flow's own workers are its descendants; a warm cluster's are not
            result["cpu_s"] = children_cpu_s() - cpu_before - result.get("reject", {}).get("reject_cpu_s", 0.0)
    finally:
        if release_id is not None and not rejected:
            try:
                if release_status(release_id)["status"] == "awaiting_approval":
                    result["reject"] = reject(release_id)
            except Exception as exc:  # noqa: BLE001 - cleanup must not mask the original error
                result["cleanup_error"] = repr(exc)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        reader.join(timeout=5)
        log_path.write_text("\n".join(f"{t - launched:9.3f} {line}" for t, line in lines) + "\n")
    marks: dict[str, float] = {}
    facts: dict[str, Any] = {}
    for t, line in lines:
        for name, pattern in LOG_MARKS.items():
            m = pattern.search(line)
            if m and name not in marks:
                marks[name] = t - launched
                facts[name] = m.groups()
    result["log_marks"] = marks
    result["facts"] = {"snapshot_points": _int(facts, "snapshot", 0), "objects": _int(facts, "snapshot", 1),
                       "quarantined": _int(facts, "validation", 0),
                       "trajectories": _int(facts, "prepared", 0),
                       "released_trajectories": _int(facts, "protected", 0),
                       "audit": [line for _, line in lines if "audit: " in line][-3:]}
    result["stages"] = release_stages(result["transitions"], marks)
    return result


def _int(facts: dict, key: str, index: int) -> int | None:
    return int(facts[key][index]) if key in facts else None


RELEASE_STAGES = [
    # (name, from, to): points are DB transitions (plain) or log lines ("log:")
    ("process start + plan (imports, Prefect flow run)", "launch", "planned"),
    ("ingest + validate (planned→validated)", "planned", "validated"),
    ("  Dask LocalCluster + snapshot hash", "planned", "log:snapshot"),
    ("  read partitions, GX validation, store quarantine", "log:snapshot", "log:validation"),
    ("  policy check + transition", "log:validation", "validated"),
    ("prepare + protect (validated→protected)", "validated", "protected"),
    ("  prepare (segment, grid)", "validated", "log:prepared"),
    ("  prefix tree + stage candidate", "log:prepared", "protected"),
    ("audit + gate (protected→audited)", "protected", "audited"),
    ("flow: planned→awaiting_approval", "planned", "awaiting_approval"),
    ("total: launch→awaiting_approval", "launch", "awaiting_approval"),
]


def stage_points(at: dict[str, float], marks: dict[str, float]) -> dict[str, float]:
    """Seconds from launch of each point a stage starts or ends at: the release's status transitions (``at``) and
    its flow's log marks (``marks``, as ``log:<mark>``); a blocked release's review ends when the gate decided."""
    points = {"launch": 0.0, **at, **{f"log:{k}": v for k, v in marks.items()}}
    if "awaiting_approval" not in points and "blocked" in points:
        points["awaiting_approval"] = points["blocked"]
    return points


def release_stages(at: dict[str, float], marks: dict[str, float]) -> dict[str, float | None]:
    points = stage_points(at, marks)
    out: dict[str, float | None] = {}
    for name, a, b in RELEASE_STAGES:
        out[name] = points[b] - points[a] if a in points and b in points else None
    return out


def snapshot_query(dataset: str, spec: dict) -> float:
    """``tasks.ingest.take_snapshot`` alone (the content hash is one ``string_agg`` over the snapshot)."""
    from tasks.ingest import take_snapshot
    from trajpub.spec import ReleaseSpec

    parsed = ReleaseSpec.from_dict({**spec, "dataset": dataset})
    t0 = time.perf_counter()
    take_snapshot(engine(), dataset, parsed.window_start, parsed.window_end)
    return time.perf_counter() - t0


def _preload_worker() -> None:
    """Runs on each worker of the warm cluster: the imports a fresh worker pays for during the flow."""
    import great_expectations  # noqa: F401

    import tasks.ingest
    import tasks.prepare
    import tasks.protect
    import tasks.validate  # noqa: F401


def stage_table(runs: list[dict]) -> dict:
    return {name: spread([r["stages"].get(name) for r in runs if r["stages"].get(name) is not None])
            for name, _, _ in RELEASE_STAGES}


def releases_on(dataset: str, repeat: int, warm_repeat: int, timeout_s: float, what: str) -> dict:
    """``repeat`` releases as the flow runs them (its own LocalCluster), then ``warm_repeat`` on a long-lived
    LocalCluster whose workers already imported Great Expectations (``TRAJPUB_DASK_ADDRESS``)."""
    run_cli("steward", "add", STEWARD)  # idempotent: the steward login that caps and rejects the bench's runs
    done = run_cli("budget", "cap", dataset, str(max(100.0, 2.0 * (repeat + warm_repeat))), "--steward", STEWARD)
    if done.returncode:
        raise RuntimeError(f"trajpub budget cap failed: {done.stderr}")

    def one(label: str, dask: dict | None) -> dict:
        r = run_release(dataset, label, timeout_s, dask)
        r["loadavg"] = loadavg()
        total = r["stages"].get("total: launch→awaiting_approval")
        say(f"  release {r['release_id']}: {r['status']} after {total if total is None else round(total, 2)} s; "
            f"then {r.get('final_status')}")
        return r

    runs, warm = [], []
    for i in range(repeat):
        say(f"{what}: release flow on {dataset} (run {i + 1}/{repeat})")
        runs.append(one(f"run{i}", None))
    if warm_repeat:
        from distributed import Client

        from tasks.dask_cluster import client_environment, local_cluster, tls_files

        say(f"{what}: starting a warm LocalCluster (workers import Great Expectations first)")
        security = tls_files(OUT_DIR / "warm-dask-tls")
        with local_cluster(os.cpu_count() or 1, security=security) as cluster, Client(cluster) as client:
            client.run(_preload_worker)
            for i in range(warm_repeat):
                say(f"{what}: release flow on {dataset}, warm cluster {cluster.scheduler_address} "
                    f"(run {i + 1}/{warm_repeat})")
                warm.append(one(f"warm{i}", client_environment(cluster.scheduler_address, security)))
    spec = yaml.safe_load(DEMO_SPEC.read_text())
    snap = [snapshot_query(dataset, spec) for _ in range(3)]
    return {"runs": runs, "warm_runs": warm, "snapshot_query_s": spread(snap), "stages": stage_table(runs),
            "cpu_s": spread([r["cpu_s"] for r in runs if r.get("cpu_s") is not None]),
            "warm_stages": stage_table(warm), "statuses": [r["status"] for r in runs + warm]}


def stage_release(args: argparse.Namespace, tag: str) -> dict:
    dataset = f"bench_rel_{tag}"
    say(f"load {TDRIVE.name} into {dataset} for the release runs")
    loaded = bench_load(TDRIVE, dataset)
    out = releases_on(dataset, args.repeat, args.warm_repeat, args.release_timeout, "1x")
    return {"load": loaded, **out, "target_s": TARGET_S["release"]}


# --- stage 4: scale-up ----------------------------------------------------------------------------------------
def build_scaled_tdrive(factor: int, path: Path, shift_days: bool = False) -> dict:
    """``factor`` copies of the sample: copy k of taxi i is taxi ``k * 1000 + i``, every point moved by one
    offset of 2-5 m in a random direction (drawn per copied taxi); times unchanged, or with ``shift_days``
    moved by k days cyclically within the sample's days (day d becomes day (d + k) mod 7 of the same week, each
    copy's rows then in time order), so that copies do not drive alongside their original and the demo spec's
    window still holds them all. Copy 0 is the original."""
    df = pd.read_csv(TDRIVE, dtype={"taxi_id": "int64", "datetime": str, "longitude": "float64",
                                    "latitude": "float64"})
    times = pd.to_datetime(df["datetime"])
    first_day = times.min().normalize()
    day = (times - first_day).dt.days.to_numpy()
    n_days = int(day.max()) + 1
    if df["taxi_id"].max() >= SCALEUP_ID_STRIDE:
        raise RuntimeError("taxi ids do not fit under the copy stride")
    ids = np.sort(df["taxi_id"].unique())
    rng = np.random.default_rng(SCALEUP_SEED)
    lat0 = math.radians(float(df["latitude"].median()))
    parts = []
    for k in range(factor):
        part = df.copy()
        if k:
            radius, angle = rng.uniform(2.0, 5.0, len(ids)), rng.uniform(0.0, 2 * math.pi, len(ids))
            dx = pd.Series(radius * np.cos(angle), index=ids)
            dy = pd.Series(radius * np.sin(angle), index=ids)
            part["longitude"] = part["longitude"] + part["taxi_id"].map(dx) / (111_320.0 * math.cos(lat0))
            part["latitude"] = part["latitude"] + part["taxi_id"].map(dy) / 110_574.0
            part["taxi_id"] = part["taxi_id"] + k * SCALEUP_ID_STRIDE
            if shift_days:
                new_day = (day + k) % n_days
                dates = (first_day + pd.to_timedelta(np.arange(n_days), unit="D")).strftime("%Y-%m-%d").to_numpy()
                part["datetime"] = dates[new_day] + df["datetime"].str[10:].to_numpy()
                part = part.iloc[np.lexsort((times.to_numpy() + (new_day - day) * np.timedelta64(1, "D"),
                                             part["taxi_id"].to_numpy()))]
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    tmp = path.with_suffix(".tmp")
    out.to_csv(tmp, index=False, float_format="%.6f", compression={"method": "gzip", "compresslevel": 1})
    tmp.rename(path)
    return {"path": str(path), "points": len(out), "taxis": int(out["taxi_id"].nunique())}


def stage_scaleup(args: argparse.Namespace, tag: str) -> dict:
    factor = args.scale
    path = OUT_DIR / f"tdrive_x{factor}.csv.gz"
    t0 = time.perf_counter()
    if path.exists():
        say(f"reusing {path}")
        made = {"path": str(path), "reused": True}
    else:
        say(f"building {path}")
        made = build_scaled_tdrive(factor, path)
    made["build_s"] = time.perf_counter() - t0
    loads = load_runs(path, f"bench_x{factor}_{tag}", args.scaleup_load_repeat)
    out = releases_on(loads[0]["dataset"], args.scaleup_repeat, args.scaleup_warm_repeat,
                      args.release_timeout * factor, f"{factor}x")
    return {"factor": factor, "file": made, "loads": loads,
            "load_seconds": spread([r["seconds"] for r in loads]),
            "load_phases": {label: spread([r["phases"].get(label) for r in loads if label in r["phases"]])
                            for _, label in LOAD_PHASES},
            **out}


# --- stage 3: the prefix tree alone ---------------------------------------------------------------------------
_MOVES = np.array([(-1, -1), (-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1)])  # a ring: ±1 = 45°


def synthetic_trajectories(n: int, side: int = 32, mean_length: float = 7.0, persistence: float = 0.7,
                           seed: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """``n`` trajectories in CSR form ``(offsets, locs)`` over the ``side`` x ``side`` grid cells.

    Lengths are geometric with mean ``mean_length`` (≥ 1). A trajectory starts in a cell drawn from a
    Zipf-like popularity (weight ∝ rank^-0.8 over a random ranking of the cells), with a random heading of 8;
    every step keeps its heading with probability ``persistence``, else turns by ±45° or ±90°, and moves to the
    neighbouring cell in that direction (reflected at the border). Consecutive cells always differ.
    """
    rng = np.random.default_rng(seed)
    n_locations = side * side
    lengths = rng.geometric(1.0 / mean_length, n)
    total = int(lengths.sum())
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    first = offsets[:-1]
    weight = 1.0 / np.arange(1, n_locations + 1) ** 0.8
    start = rng.permutation(n_locations)[rng.choice(n_locations, n, p=weight / weight.sum())]
    turn = np.where(rng.random(total) < persistence, 0, rng.choice([-2, -1, 1, 2], total))
    turn[first] = 0
    cum = np.cumsum(turn)
    heading = (np.repeat(rng.integers(0, 8, n), lengths) + cum - np.repeat(cum[first], lengths)) % 8
    step = _MOVES[heading]
    step[first] = 0

    def walk(delta: np.ndarray, origin: np.ndarray) -> np.ndarray:
        pos = np.cumsum(delta)
        pos = pos - np.repeat(pos[first], lengths) + np.repeat(origin, lengths)
        period = 2 * (side - 1)
        pos = np.mod(pos, period)
        return np.where(pos >= side, period - pos, pos)

    locs = walk(step[:, 0], start // side) * side + walk(step[:, 1], start % side)
    return offsets, locs.astype(np.int64), n_locations


def pt_params(min_expand_count: float | str | None = "auto", max_nodes: int = 10_000_000):
    """ε = 1, h = 20, parent_bound, Full release with projected consistency; ``min_expand_count`` "auto" is the
    library default (the subcritical θ_exp from public inputs), ``None`` is parent_bound alone."""
    from mechanisms.prefix_tree import PrefixTreeParams

    return PrefixTreeParams(epsilon=1.0, height=20, expansion_policy="parent_bound", consistency="projected",
                            min_expand_count=min_expand_count, max_nodes=max_nodes)


def sanitize_breakdown(offsets: np.ndarray, locs: np.ndarray, n_locations: int, params, grid) -> dict:
    """The pieces of ``sanitize``: true counts per level, the noisy build, inference, release; then the
    per-point output the flow's adapter builds from it (one row per released point, cell centres)."""
    from mechanisms.prefix_tree import build_tree, count_level, generate_release, node_estimates

    count_s: list[float] = []

    def counter(level, transitions):
        t = time.perf_counter()
        out = count_level(offsets, locs, n_locations, level, transitions)
        count_s.append(time.perf_counter() - t)
        return out

    rng = np.random.default_rng()
    t0 = time.perf_counter()
    tree = build_tree(counter, n_locations, params, rng)
    t1 = time.perf_counter()
    estimates = node_estimates(tree, params.consistency)
    t2 = time.perf_counter()
    rel = generate_release(tree, estimates, params.rounding, rng)
    t3 = time.perf_counter()
    _, cells = rel.expanded()
    grid.cell_centre(cells)
    t4 = time.perf_counter()
    return {"count_level_s": sum(count_s), "count_level_per_level_s": count_s,
            "build_without_counting_s": t1 - t0 - sum(count_s), "inference_s": t2 - t1, "release_s": t3 - t2,
            "expand_and_cell_centres_s": t4 - t3, "n_released_records": rel.n_records}


def square_grid(side: int = 32):
    """A public GridSpec of ``side`` x ``side`` cells over a square box around Beijing (for the Dask path)."""
    from trajpub.grid import GridSpec

    half_x_m = half_y_m = 64_000.0
    lon0, lat0 = 116.4, 39.9
    bbox = (lon0 - half_x_m / (111_320.0 * math.cos(math.radians(lat0))), lat0 - half_y_m / 110_574.0,
            lon0 + half_x_m / (111_320.0 * math.cos(math.radians(lat0))), lat0 + half_y_m / 110_574.0)
    x, y = GridSpec(bbox, 1000.0).project(np.array(bbox[::2] * 2), np.repeat(bbox[1::2], 2))
    grid = GridSpec(bbox, max(np.ptp(x), np.ptp(y)) / side * (1 + 1e-9))
    if (grid.n_cols, grid.n_rows) != (side, side):
        raise RuntimeError(f"grid is {grid.n_cols} x {grid.n_rows}, not {side} x {side}")
    return grid


def stage_prefix_tree(args: argparse.Namespace, tag: str) -> dict:
    from mechanisms.prefix_tree import sanitize
    from mechanisms.prefix_tree.adapter import PrefixTree
    from tasks.dask_cluster import dask_client, n_workers
    from trajpub.errors import ParameterError

    sizes = [int(float(s)) for s in args.pt_records.split(",")]
    grid = square_grid()
    results: dict[str, Any] = {"sizes": sizes, "n_locations": grid.n_cells, "height": 20, "epsilon": 1.0,
                               "in_process": {}, "dask": {}, "target_s": TARGET_S["prefix_tree"]}
    params = pt_params()
    mec = params.expand_threshold(grid.n_cells)
    results.update(theta=params.theta, laplace_scale=params.laplace_scale, min_expand_count=mec)
    data = {}
    for n in sizes:
        t0 = time.perf_counter()
        data[n] = synthetic_trajectories(n, seed=SYNTHETIC_SEED + n)
        off = data[n][0]
        results.setdefault("data", {})[n] = {"generate_s": time.perf_counter() - t0, "points": int(off[-1]),
                                             "mean_length": float(off[-1] / n),
                                             "max_length": int(np.diff(off).max())}

    # parent_bound alone, as the issue asks: record what happens at the largest size
    n = max(sizes)
    offsets, locs, n_locations = data[n]
    say(f"prefix tree: parent_bound without min_expand_count on {n} records (default max_nodes)")
    t0 = time.perf_counter()
    try:
        res = sanitize(offsets, locs, n_locations, pt_params(None), np.random.default_rng())
        results["parent_bound_alone"] = {"ok": True, "seconds": time.perf_counter() - t0,
                                         "nodes_per_level": res.tree.nodes_per_level}
    except ParameterError as exc:
        results["parent_bound_alone"] = {"ok": False, "seconds": time.perf_counter() - t0, "error": str(exc)}
    say(f"  {results['parent_bound_alone']}")

    for n in sizes:
        offsets, locs, n_locations = data[n]
        runs = []
        for i in range(args.pt_repeat):
            say(f"prefix tree in-process: {n} records, min_expand_count auto = {mec:.1f} (run {i + 1}/{args.pt_repeat})")
            t0 = time.perf_counter()
            res = sanitize(offsets, locs, n_locations, params, np.random.default_rng())
            runs.append({"seconds": time.perf_counter() - t0, "nodes_per_level": res.tree.nodes_per_level,
                         "n_nodes": res.tree.n_nodes, "n_released_records": res.release.n_records,
                         "spurious_per_level": res.tree.diagnostics()["spurious_per_level"]})
            say(f"  {runs[-1]['seconds']:.2f} s, {runs[-1]['n_nodes']} nodes")
        results["in_process"][n] = {"runs": runs, "seconds": spread([r["seconds"] for r in runs]),
                                    "breakdown": sanitize_breakdown(offsets, locs, n_locations, params, grid)}

    say("prefix tree on Dask: starting the LocalCluster the flow uses")
    t0 = time.perf_counter()
    with dask_client(None) as client:
        results["dask_cluster_start_s"] = time.perf_counter() - t0
        workers = n_workers(client)
        results["dask_workers"] = workers
        adapter = PrefixTree()
        for n in sizes:
            offsets, locs, n_locations = data[n]
            lengths = np.diff(offsets)
            frame = pd.DataFrame({"traj_id": np.repeat(np.arange(n, dtype=np.int64), lengths), "cell": locs})
            bounds = np.linspace(0, n, 2 * workers + 1).astype(np.int64)  # as many partitions as the flow
            parts = [frame.iloc[offsets[a]:offsets[b]].reset_index(drop=True)
                     for a, b in itertools.pairwise(bounds)]
            t0 = time.perf_counter()
            futures = client.scatter(parts)
            client.gather(client.map(len, futures))
            scatter_s = time.perf_counter() - t0
            del frame, parts
            runs = []
            for i in range(args.pt_repeat):
                say(f"prefix tree on Dask: {n} records (run {i + 1}/{args.pt_repeat})")
                t0 = time.perf_counter()
                protected = protect.run(adapter, client, futures, PublicInputs(grid), params, np.random.default_rng())
                runs.append({"seconds": time.perf_counter() - t0,
                             "nodes_per_level": protected.metadata["nodes_per_level"],
                             "n_nodes": protected.metadata["n_nodes"],
                             "released_records": protected.metadata["released_records"],
                             "released_points": protected.metadata["released_points"]})
                say(f"  {runs[-1]['seconds']:.2f} s, {runs[-1]['n_nodes']} nodes")
            client.cancel(futures)
            results["dask"][n] = {"scatter_s": scatter_s, "partitions": len(bounds) - 1, "runs": runs,
                                  "seconds": spread([r["seconds"] for r in runs])}
    return results


FLOW_TOTAL = "flow: planned→awaiting_approval"
TOTAL = "total: launch→awaiting_approval"


def release_markdown(key: str, r: dict) -> list[str]:
    if key == "scaleup":
        out = [f"## Scale-up {r['factor']}x T-Drive", "", f"file: {r['file']}", "",
               "| load run | dataset | points | seconds | points/s |", "|---|---|---|---|---|"]
        out += [f"| {i + 1} | {x['dataset']} | {x['n_loaded']:,} | {x['seconds']:.2f} | {x['points_per_s']:,.0f} |"
                for i, x in enumerate(r["loads"])]
        out += ["", "| load phase | median (min-max) s |", "|---|---|"]
        out += [f"| {k} | {fmt_s(v)} |" for k, v in r["load_phases"].items() if v["n"]]
        out += ["", f"### Release on the {r['factor']}x dataset {r['loads'][0]['dataset']}", ""]
    else:
        out = ["## Whole release, 1x T-Drive", "",
               f"load of the release dataset {r['load']['dataset']}: {r['load']['seconds']:.2f} s", ""]
    runs, warm = r["runs"], r.get("warm_runs", [])
    if runs:
        out += [(f"spec: `{DEMO_SPEC.relative_to(config.PROJECT_ROOT)}` with the dataset changed; "
                f"`{json.dumps(runs[0].get('spec', {}), default=str)}`"), ""]
    cols = [f"run {i + 1} (r{x['release_id']})" for i, x in enumerate(runs)]
    cols += [f"warm {i + 1} (r{x['release_id']})" for i, x in enumerate(warm)]
    out += ["| stage (s) | " + " | ".join(cols) + " | median (min-max), cold runs |", "|---" * (len(cols) + 2) + "|"]
    for name, _, _ in RELEASE_STAGES:
        vals = [x["stages"].get(name) for x in runs + warm]
        out.append(f"| {name} | " + " | ".join("-" if v is None else f"{v:.2f}" for v in vals)
                   + f" | {fmt_s(r['stages'][name])} |")
    out += ["", ("cold: the flow starts its own LocalCluster (as in production without TRAJPUB_DASK_ADDRESS); warm: "
            "TRAJPUB_DASK_ADDRESS points at a long-lived LocalCluster whose workers imported Great "
            "Expectations beforehand."), "",
            ("| run | status | then | points | trajectories | released | points/s (flow) | CPU s (flow process "
             "tree) | pause seen after s | reject s |"), "|---|---|---|---|---|---|---|---|---|---|"]
    for i, x in enumerate(runs + warm):
        f, rj = x.get("facts", {}), x.get("reject", {})
        flow = x["stages"].get(FLOW_TOTAL)
        pps = f"{f['snapshot_points'] / flow:,.0f}" if flow and f.get("snapshot_points") else "-"
        name = f"run {i + 1}" if i < len(runs) else f"warm {i + 1 - len(runs)}"
        cpu = f"{x['cpu_s']:.1f}" if x.get("cpu_s") is not None else "-"
        out.append(f"| {name} | {x.get('status')} | {x.get('final_status')} | {f.get('snapshot_points')} | "
                   f"{f.get('trajectories')} | {f.get('released_trajectories')} | {pps} | {cpu} | "
                   f"{rj.get('paused_seen_after_s', float('nan')):.2f} | {rj.get('reject_s', float('nan')):.2f} |")
    out += ["", f"`take_snapshot` alone (the content-hash query): {fmt_s(r['snapshot_query_s'])} s", ""]
    return out


def scaling_markdown(results: dict) -> list[str]:
    """Median stage times at 1x and at the scale-up, and their ratio (near-linear: ratio ≈ factor)."""
    one, big = results["release"], results["scaleup"]
    factor = big["factor"]
    one_load = results["load"]["seconds"] if "load" in results else spread([one["load"]["seconds"]])
    out = [f"## 1x vs {factor}x (medians; near-linear means a ratio near {factor})", "",
           f"| stage | 1x cold s | {factor}x cold s | ratio | 1x warm s | {factor}x warm s | ratio |",
           "|---|---|---|---|---|---|---|"]

    def ratio(a: dict, b: dict) -> str:
        return f"{b['median'] / a['median']:.1f}" if a.get("n") and b.get("n") and a["median"] else "-"

    none = spread([])
    rows = [("load", one_load, big["load_seconds"], none, none)]
    rows += [(name, one["stages"][name], big["stages"][name], one.get("warm_stages", {}).get(name, none),
              big.get("warm_stages", {}).get(name, none)) for name, _, _ in RELEASE_STAGES]
    rows.append(("take_snapshot alone", one["snapshot_query_s"], big["snapshot_query_s"], none, none))
    rows.append(("CPU s of the flow process tree (not PostgreSQL)", one.get("cpu_s", none), big.get("cpu_s", none),
                 none, none))
    for name, a, b, wa, wb in rows:
        out.append(f"| {name} | {fmt_s(a)} | {fmt_s(b)} | {ratio(a, b)} | {fmt_s(wa)} | {fmt_s(wb)} | "
                   f"{ratio(wa, wb)} |")
    return [*out, ""]


# --- report ---------------------------------------------------------------------------------------------------
def markdown(results: dict) -> str:
    m = results["machine"]
    out = [f"# trajpub stage benchmarks, {m['date_utc']}", "",
           (f"- machine: {m['nproc']} CPUs ({m['cpu']}), {m['ram_gib']} GiB RAM, Python {m['python']}, "
            f"kernel {m['kernel']}"),
           f"- git commit {m['git_commit']}" + (f" (tracked files modified: {', '.join(m['git_dirty_tracked_files'])})"
                                                 if m["git_dirty_tracked_files"] else ""),
           f"- command: `{m['command']}`",
           f"- load average at start {m['loadavg_start']}, at end {results.get('loadavg_end')}", ""]
    if "load" in results:
        r = results["load"]
        out += ["## Load of the T-Drive sample (402,428 points)", "", "| run | dataset | seconds | points/s |",
                "|---|---|---|---|"]
        out += [f"| {i + 1} | {x['dataset']} | {x['seconds']:.2f} | {x['points_per_s']:,.0f} |"
                for i, x in enumerate(r["runs"])]
        out += ["", f"median (min-max): **{fmt_s(r['seconds'])} s**, target ≤ {r['target_s']:g} s", "",
                "| phase | median (min-max) s |", "|---|---|"]
        out += [f"| {k} | {fmt_s(v)} |" for k, v in r["phases"].items() if v["n"]]
        out.append("")
    for key in ("release", "scaleup"):
        if key not in results or "runs" not in results[key]:
            continue
        out += release_markdown(key, results[key])
    if "runs" in results.get("release", {}) and "runs" in results.get("scaleup", {}):
        out += scaling_markdown(results)
    if "prefix_tree" in results:
        r = results["prefix_tree"]
        out += ["## Prefix tree alone (|L| = 1,024, h = 20, ε = 1, parent_bound, Full/projected)", "",
                (f"θ = {r['theta']:.2f}, Laplace scale b = {r['laplace_scale']:g}, "
                 f"min_expand_count auto = {r['min_expand_count']:.1f}; Dask: {r.get('dask_workers')} workers, "
                 f"cluster start {r.get('dask_cluster_start_s', float('nan')):.2f} s"), "",
                f"parent_bound alone (min_expand_count None) at {max(r['sizes']):,} records: {r['parent_bound_alone']}", "",
                ("| records | points | in-process sanitize s | Dask adapter.run s | scatter s | nodes | "
                 "released records |"), "|---|---|---|---|---|---|---|"]
        for n in r["sizes"]:
            ip, dk = r["in_process"].get(n, {}), r["dask"].get(n, {})
            nodes = ip["runs"][0]["n_nodes"] if ip.get("runs") else None
            rel = ip["runs"][0]["n_released_records"] if ip.get("runs") else None
            out.append(f"| {n:,} | {r['data'][n]['points']:,} | {fmt_s(ip.get('seconds'))} | "
                       f"{fmt_s(dk.get('seconds'))} | {dk.get('scatter_s', float('nan')):.2f} | {nodes} | {rel} |")
        out += ["", ("| records | count_level s | build (noise, sampling) s | inference s | release s | "
                "expand + cell centres s |"), "|---|---|---|---|---|---|"]
        for n in r["sizes"]:
            b = r["in_process"][n]["breakdown"]
            out.append(f"| {n:,} | {b['count_level_s']:.2f} | {b['build_without_counting_s']:.2f} | "
                       f"{b['inference_s']:.2f} | {b['release_s']:.2f} | {b['expand_and_cell_centres_s']:.2f} |")
        out += ["", "nodes per level (first in-process run; spurious nodes in brackets):", ""]
        for n in r["sizes"]:
            run = r["in_process"][n]["runs"][0]
            levels = ", ".join(f"{a} [{b}]" for a, b in zip(run["nodes_per_level"], run["spurious_per_level"],
                                                            strict=False))
            out.append(f"- {n:,}: {levels}")
        out.append("")
    if results.get("errors"):
        out += ["## Errors", ""] + [f"- {k}: {v.splitlines()[-1]}" for k, v in results["errors"].items()] + [""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run_stages", description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(STAGES),
                        help=f"comma-separated stages to run, of {', '.join(STAGES)} (default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of the load and the 1x release")
    parser.add_argument("--scale", type=int, default=10, help="scale-up factor of the synthetic T-Drive")
    parser.add_argument("--scaleup-repeat", type=int, default=2, help="release runs at the scale-up")
    parser.add_argument("--warm-repeat", type=int, default=1,
                        help="1x releases on a warm, long-lived Dask cluster (0: none)")
    parser.add_argument("--scaleup-warm-repeat", type=int, default=1,
                        help="scale-up releases on a warm, long-lived Dask cluster (0: none)")
    parser.add_argument("--scaleup-load-repeat", type=int, default=1, help="loads of the scale-up file")
    parser.add_argument("--pt-records", default="300000,600000,1200000",
                        help="comma-separated record counts of the prefix-tree benchmark")
    parser.add_argument("--pt-repeat", type=int, default=3, help="repetitions of each prefix-tree run")
    parser.add_argument("--release-timeout", type=float, default=600.0,
                        help="seconds a 1x release may take to reach review (times the scale at scale-up)")
    args = parser.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(STAGES))
    if unknown:
        parser.error(f"unknown stage(s) {', '.join(unknown)}; choose from {', '.join(STAGES)}")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    tag = time.strftime("%Y%m%d_%H%M%S")
    results: dict[str, Any] = {"machine": machine(), "args": vars(args), "errors": {}}
    json_path, md_path = OUT_DIR / f"results_{tag}.json", OUT_DIR / f"results_{tag}.md"
    runners = {"load": stage_load, "release": stage_release, "prefix_tree": stage_prefix_tree,
               "scaleup": stage_scaleup}
    for stage in STAGES:
        if stage not in only:
            continue
        say(f"=== stage {stage} ===")
        try:
            results[stage] = runners[stage](args, tag)
        except Exception:  # noqa: BLE001 - record and go on with the other stages
            results["errors"][stage] = traceback.format_exc()
            say(f"stage {stage} failed:\n{results['errors'][stage]}")
        results["loadavg_end"] = loadavg()
        json_path.write_text(json.dumps(results, indent=1, default=str))
    report = markdown(results)
    md_path.write_text(report)
    print(report)
    say(f"raw results: {json_path.relative_to(config.PROJECT_ROOT)}; tables: {md_path.relative_to(config.PROJECT_ROOT)}")
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
