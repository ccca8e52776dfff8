"""A whole release at 1x to 40x T-Drive on a separate Dask cluster: ``python -m bench.scale --factors 1 4 10 40``.

For each factor f: the sample replicated f times (``bench.run_stages.build_scaled_tdrive`` with ``shift_days``:
new taxi ids, every copy's points moved by 2-5 m and its days shifted cyclically within the week; 40x is
16.1 M points of 11,960 taxis, past T-Drive's full 15 M points of 10,357 taxis), loaded into a fresh dataset
(``tasks.load.load_source``, timed with its phases), then released with the demo spec (ObjTrace, the dataset's
default gate policy) by ``trajpub release run`` on a cluster of one ``dask scheduler`` and ``--workers`` single-
threaded ``dask worker`` processes started for that factor (``tasks.dask_cluster.process_cluster``; the flow gets
its address as ``TRAJPUB_DASK_ADDRESS`` with the cluster's TLS certificates, not a LocalCluster of its own).
The release is rejected once it awaits review (``bench.run_stages.run_release``).

Stages, from ``governance.release_transitions`` and the flow's log lines: load; ingest (plan → the snapshot line:
the snapshot and its content hash); validate (snapshot → validated: partition reads from PostGIS, Great
Expectations, quarantine); protect (validated → protected: prepare, ObjTrace, output check, staging); audit
(protected → audited: raw points gathered, attacks, utility); review (audited → awaiting_approval: stored audit,
HTML report, review form); launch → review (process start to awaiting_approval).

Memory: a sampler thread sums the proportional set size (PSS, so PostgreSQL's shared buffers count once) of
every process of the bench (this process: the load), the scheduler, the workers (nannies included), the flow
process and the PostGIS cluster (the postmaster and its backends) every ``--sample-s`` seconds; the peak of the
sum is reported per factor, with each group's own peak. The growth exponent of a stage is the least-squares
slope of log(seconds) on log(points) over the factors (1 = linear). Raw results go to
``bench/out/scale_<timestamp>.json``; ``bench/SCALE_RESULTS.md`` is the curated record.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Self

import numpy as np
import psutil

from bench.run_stages import (
    OUT_DIR,
    STEWARD,
    bench_load,
    build_scaled_tdrive,
    loadavg,
    machine,
    run_cli,
    run_release,
    say,
    stage_points,
)
from tasks.dask_cluster import process_cluster
from trajpub import config

STAGES = [  # (name, from, to): release transitions, or flow log marks ("log:")
    ("ingest", "planned", "log:snapshot"),
    ("validate", "log:snapshot", "validated"),
    ("protect", "validated", "protected"),
    ("audit", "protected", "audited"),
    ("review", "audited", "awaiting_approval"),
    ("launch → review", "launch", "awaiting_approval"),
]


class ProcessSampler:
    """Peak PSS (bytes) and CPU seconds of process groups sampled together: ``groups`` maps a name to a function
    returning the root pids of the group (each root counts with all its descendants). CPU is user + system time
    summed over every process seen (a process that ended keeps its last sampled time, so short-lived PostgreSQL
    backends count up to their last sample); ``cpu_between`` reads it between two moments. CPU seconds are less
    sensitive than wall time to the other users of a shared machine."""

    def __init__(self, groups: dict[str, Any], interval_s: float) -> None:
        self.groups, self.interval_s = groups, interval_s
        self.peak_total = 0
        self.peak: dict[str, int] = dict.fromkeys(groups, 0)
        self.at_peak: tuple[float, dict[str, int]] = (0.0, {})  # when the sum peaked, and each group then
        self.memory: list[tuple[float, dict[str, int]]] = []
        self.samples = 0
        self._cpu: dict[tuple[str, int, float], float] = {}
        self.series: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _group(self, name: str, pid: int) -> int:
        """PSS of the tree under ``pid``; records the CPU time of each of its processes."""
        total = 0
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0
        for proc in procs:
            try:
                with proc.oneshot():
                    total += proc.memory_full_info().pss
                    cpu = proc.cpu_times()
                    self._cpu[(name, proc.pid, proc.create_time())] = cpu.user + cpu.system
            except psutil.Error:
                pass
        return total

    def sample(self) -> None:
        seen: dict[str, int] = {}
        for name, roots in self.groups.items():
            seen[name] = sum(self._group(name, pid) for pid in roots())
        for name, value in seen.items():
            self.peak[name] = max(self.peak[name], value)
        now = time.time()
        if sum(seen.values()) > self.peak_total:
            self.peak_total, self.at_peak = sum(seen.values()), (now, seen)
        self.memory.append((now, seen))
        cpu = dict.fromkeys(self.groups, 0.0)
        for (name, _, _), seconds in self._cpu.items():
            cpu[name] += seconds
        self.series.append((now, cpu))
        self.samples += 1

    def cpu_between(self, start: float, end: float) -> float:
        """CPU seconds of all groups between two epoch times (the samples at or before each)."""
        def at(moment: float) -> float:
            before = [cpu for t, cpu in self.series if t <= moment] or [self.series[0][1]]
            return sum(before[-1].values())

        return at(end) - at(start)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> Self:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def to_dict(self) -> dict:
        gib = 2 ** 30
        return {"peak_total_gib": self.peak_total / gib, "samples": self.samples,
                "peak_gib": {k: v / gib for k, v in self.peak.items()},
                "at_peak": {"time": self.at_peak[0], "gib": {k: v / gib for k, v in self.at_peak[1].items()}},
                "memory_gib": [(round(t, 2), {k: round(v / gib, 3) for k, v in seen.items()})
                               for t, seen in self.memory],
                "cpu_s": self.series[-1][1] if self.series else {}}


def postmaster_pid() -> int | None:
    """The local PostGIS cluster's postmaster (its first line of ``postmaster.pid``), None for an external one."""
    pid_file = config.STATE_DIR / "pgdata" / "postmaster.pid"
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def flow_pid() -> int | None:
    """The ``trajpub release run`` process this bench started, if one runs."""
    for child in psutil.Process().children():
        try:
            if "release" in child.cmdline() and "run" in child.cmdline():
                return child.pid
        except psutil.Error:
            pass
    return None


def stage_times(release: dict, launched: float, sampler: ProcessSampler) -> tuple[dict, dict]:
    """Wall seconds and CPU seconds (all sampled processes) of each stage."""
    points = stage_points(release["transitions"], release["log_marks"])
    wall, cpu = {}, {}
    for name, a, b in STAGES:
        ok = a in points and b in points
        wall[name] = points[b] - points[a] if ok else None
        cpu[name] = sampler.cpu_between(launched + points[a], launched + points[b]) if ok else None
    return wall, cpu


def stage_at(release: dict, seconds: float) -> str:
    """The stage (of :data:`STAGES`, launch → review aside) that ran ``seconds`` after launch; "start" before the
    plan, "after review" once the release awaits its steward (the bench then rejects it)."""
    points = stage_points(release["transitions"], release["log_marks"])
    for name, a, b in STAGES[:-1]:
        if a in points and b in points and points[a] <= seconds <= points[b]:
            return name
    return "start" if seconds < points.get("planned", 0.0) else "after review"


def one_factor(factor: int, tag: str, args: argparse.Namespace) -> dict:
    path = OUT_DIR / f"tdrive_x{factor}_days.csv.gz"
    if not path.exists():
        say(f"building {path.name}")
        t0 = time.perf_counter()
        made = build_scaled_tdrive(factor, path, shift_days=True)
        say(f"  {made['points']:,} points of {made['taxis']:,} taxis in {time.perf_counter() - t0:.1f} s")
    dataset = f"scale_x{factor}_{tag}"
    out: dict[str, Any] = {"factor": factor, "file": path.name, "dataset": dataset, "loadavg_start": loadavg()}
    pg = postmaster_pid()
    me = os.getpid()
    with ProcessSampler({"bench (load)": lambda: [me], "postgres": lambda: [pg] if pg else []},
                       args.sample_s) as mem:
        say(f"load {path.name} into {dataset}")
        load = bench_load(path, dataset)
    out["load"] = {**load, "memory": mem.to_dict(), "cpu_s": mem.cpu_between(0, time.time())}
    say(f"  {load['seconds']:.1f} s, {load['n_loaded']:,} points; peak PSS {mem.peak_total / 2**30:.2f} GiB")
    for args_ in (("steward", "add", STEWARD), ("budget", "cap", dataset, "100", "--steward", STEWARD)):
        done = run_cli(*args_)
        if done.returncode and args_[0] == "budget":
            raise RuntimeError(f"trajpub budget cap failed: {done.stderr}")
    cluster_dir = OUT_DIR / f"dask_{tag}_x{factor}"
    with process_cluster(args.workers, cluster_dir) as cluster:
        groups = {"flow": lambda: [p] if (p := flow_pid()) else [],
                  "scheduler": lambda: [cluster.scheduler.pid],
                  **{f"worker {i}": (lambda w=w: [w.pid]) for i, w in enumerate(cluster.workers, 1)},
                  "postgres": lambda: [pg] if pg else []}
        with ProcessSampler(groups, args.sample_s) as mem:
            say(f"release on {dataset}, Dask at {cluster.address} ({args.workers} workers)")
            launched = time.time()
            release = run_release(dataset, f"x{factor}", args.timeout_s, dask=cluster.environment())
        release["memory"] = mem.to_dict()
    release["stages"], release["stage_cpu_s"] = stage_times(release, launched, mem)
    release["peak_stage"] = stage_at(release, mem.at_peak[0] - launched)
    out["release"] = release
    out["loadavg_end"] = loadavg()
    say(f"  release {release['release_id']}: {release['status']} then {release.get('final_status')}; "
        + ", ".join(f"{k} {v:.1f} s" for k, v in release["stages"].items() if v is not None)
        + f"; peak PSS {mem.peak_total / 2**30:.2f} GiB during {release['peak_stage']} ("
        + fmt_groups(release["memory"], "at_peak") + ")")
    return out


def exponents(runs: list[dict]) -> dict[str, float | None]:
    """Least-squares slope of log(seconds) on log(snapshot points) per stage (and of the load on loaded points)."""
    def slope(xs: list[float], ys: list[float | None]) -> float | None:
        pairs = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x and y and y > 0]
        if len(pairs) < 2:
            return None
        return float(np.polyfit(*zip(*pairs, strict=True), 1)[0])

    points = [r["load"]["n_loaded"] for r in runs]
    wall = {"load": slope(points, [r["load"]["seconds"] for r in runs])}
    cpu = {"load": slope(points, [r["load"]["cpu_s"] for r in runs])}
    for name, _, _ in STAGES:
        wall[name] = slope(points, [r["release"]["stages"].get(name) for r in runs])
        cpu[name] = slope(points, [r["release"]["stage_cpu_s"].get(name) for r in runs])
    return {"wall": wall, "cpu": cpu}


def markdown(results: dict) -> str:
    runs = results["runs"]
    m = results["machine"]
    out = [(f"machine: {m['nproc']} CPUs ({m['cpu']}), {m['ram_gib']} GiB RAM; commit {m['git_commit'][:10]}; "
            f"command `{m['command']}`"), "",
           "| factor | points | taxis | load s | " + " | ".join(f"{n} s" for n, _, _ in STAGES)
           + " | status | peak PSS load GiB | peak PSS release GiB | load avg start/end |",
           "|---" * (len(STAGES) + 9) + "|"]
    for r in runs:
        rel, st = r["release"], r["release"]["stages"]
        out.append(f"| {r['factor']}x | {r['load']['n_loaded']:,} | {rel.get('facts', {}).get('objects') or '-'} | "
                   f"{r['load']['seconds']:.1f} | "
                   + " | ".join("-" if st.get(n) is None else f"{st[n]:.1f}" for n, _, _ in STAGES)
                   + f" | {rel.get('status')} | {r['load']['memory']['peak_total_gib']:.2f} | "
                   f"{rel['memory']['peak_total_gib']:.2f} | {r['loadavg_start']} / {r['loadavg_end']} |")
    out += ["", "| factor | load CPU s | " + " | ".join(f"{n} CPU s" for n, _, _ in STAGES) + " |",
            "|---" * (len(STAGES) + 2) + "|"]
    for r in runs:
        st = r["release"]["stage_cpu_s"]
        out.append(f"| {r['factor']}x | {r['load']['cpu_s']:.1f} | "
                   + " | ".join("-" if st.get(n) is None else f"{st[n]:.1f}" for n, _, _ in STAGES) + " |")
    for kind, exp in results.get("exponents", {}).items():
        out += ["", f"growth exponent of {kind} (slope of log seconds on log points): "
                + ", ".join(f"{k} {v:.2f}" for k, v in exp.items() if v is not None)]
    out.append("")
    for r in runs:
        out.append(f"- {r['factor']}x peak PSS by group, load: {fmt_groups(r['load']['memory'])}; release: "
                   f"{fmt_groups(r['release']['memory'])}; at the release's peak (during "
                   f"{r['release']['peak_stage']}): {fmt_groups(r['release']['memory'], 'at_peak')}")
    return "\n".join(out) + "\n"


def fmt_groups(memory: dict, which: str = "peak_gib") -> str:
    """Each group's own peak, or (``at_peak``) each group's PSS when the sum peaked."""
    gib = memory["at_peak"]["gib"] if which == "at_peak" else memory[which]
    return ", ".join(f"{k} {v:.2f}" for k, v in gib.items()) + " GiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n")[0])
    parser.add_argument("--factors", type=int, nargs="+", default=[1, 4, 10, 40])
    parser.add_argument("--workers", type=int, default=2, help="dask worker processes (one thread each)")
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="seconds a release may take to review")
    parser.add_argument("--sample-s", type=float, default=0.5, help="memory sampling interval")
    args = parser.parse_args(argv)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    tag = time.strftime("%Y%m%d_%H%M%S")
    results: dict[str, Any] = {"machine": {**machine(), "command": " ".join(
        [Path(sys.executable).name, "-m", "bench.scale", *sys.argv[1:]])},
        "uptime": subprocess.run(["uptime"], check=False, capture_output=True, text=True).stdout.strip(), "runs": []}
    json_path = OUT_DIR / f"scale_{tag}.json"
    for factor in args.factors:
        results["runs"].append(one_factor(factor, tag, args))
        results["exponents"] = exponents(results["runs"])
        json_path.write_text(json.dumps(results, indent=1, default=str))
    results["uptime_end"] = subprocess.run(["uptime"], check=False, capture_output=True, text=True).stdout.strip()
    json_path.write_text(json.dumps(results, indent=1, default=str))
    print(markdown(results))
    say(f"raw results: {json_path.relative_to(config.PROJECT_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
