"""PrivTrace and LDPTrace run on our cleaned data, side by side with trajpub ("Anchors to beat").

The reference implementations are the authors' public code, fetched into the git-ignored ``bench/ref/`` (never
copied here), each run from its own repository root with its own virtual environment:

- PrivTrace (Du et al., "PrivTrace: Differentially Private Trajectory Synthesis by Adaptive Markov Models",
  USENIX Security 2023; github.com/DpTrace/PrivTrace): ``bench/ref/PrivTrace`` with ``bench/ref/venv-privtrace``
  (numpy < 1.24, torch, cvxpy, networkx). It reads ``datasets/<file>`` ("#i:" / ">0:x,y;x,y;..." lines) and writes
  ``generated_tras.txt`` in the same format with two decimals, so we give it metres of a local equirectangular
  projection about the public bbox's centre (two decimals = 1 cm) and project its output back. It has no seed
  option: each run is one draw. Its ε is per trajectory record.
- LDPTrace (Du et al., "LDPTrace: Locally Differentially Private Trajectory Synthesis", PVLDB 16(8) 2023;
  github.com/zealscott/LDPTrace): ``bench/ref/LDPTrace`` with ``bench/ref/venv-ldptrace``. It accepts only the
  dataset names oldenburg/porto/campus; we write our records as ``data/porto.xz`` (an lzma pickle of lists of
  (lon, lat)) and run ``main.py --dataset porto --re_syn`` (grid 6 x 6, the paper's recommendation). It seeds its
  own generators with 2022 and shuffles the input: our seed permutes the records before they are written, so
  each seed is a different draw. Its ε is per record under local DP.

Setting them up (from the repository root; the commits we ran are in ``bench/UTILITY_RESULTS.md``)::

    git clone <PrivTrace> bench/ref/PrivTrace && git clone <LDPTrace> bench/ref/LDPTrace
    uv venv -p 3.11 bench/ref/venv-privtrace && VIRTUAL_ENV=bench/ref/venv-privtrace uv pip install \
        "numpy<1.24" "scipy<1.12" "cvxpy<1.4" networkx pandas matplotlib torch
    uv venv -p 3.11 bench/ref/venv-ldptrace && VIRTUAL_ENV=bench/ref/venv-ldptrace uv pip install "numpy<1.24"

Caveat from reading both codes: they take exact statistics of the raw data outside their budgets (PrivTrace: the
exact bbox and record count, a noise-free transition mask; LDPTrace: the exact bbox of the data). Their
figures are therefore optimistic for a formal guarantee.

``python -m bench.references run --dataset tdrive --tool privtrace --epsilon 1 --runs 3`` keeps each run's
output as lon/lat records in ``bench/out/references/`` with its wall seconds; ``mechanisms`` runs every trajpub
mechanism of :func:`mechanism_models` (the survey's Table 4 bench, :data:`bench.table4.MODELS`, with its setups,
and ObjTrace) through its flow adapter on the same cleaned records and keeps its output the same way; ``score``
computes the issue's metrics of every kept run with :func:`audits.trajectory_utility.trajectory_metrics` (one function for
the references and trajpub), writes ``bench/references/results.json`` and the tables and the verdict of
``bench/UTILITY_RESULTS.md`` (between its markers).
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import pickle
import re
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from bench import utility_data
from bench.fgs_pufferfish import machine
from trajpub.grid import GridSpec
from trajpub.segment import keep_trajectories, to_grid

ROOT = Path(__file__).resolve().parent
REF = ROOT / "ref"
OUT = ROOT / "out" / "references"
RESULTS = ROOT / "references" / "results.json"
RESULTS_MD = ROOT / "UTILITY_RESULTS.md"
BEGIN, END = "<!-- references:begin -->", "<!-- references:end -->"
BAR_METRICS = ("density", "query", "trip", "length", "pattern_f1", "transition")
"""The six metrics of the ObjTrace-against-PrivTrace bar."""
HIGHER_IS_BETTER = {"pattern_f1"}
COLUMNS = (*BAR_METRICS, "outside_bbox_share")
TIME_COLUMNS = ("start_hour_jsd", "duration_jsd")
RUNTIME_BAR_S = 10.0
DIGITS = {"wall_s": 1, "records": 0}
DATASETS = {"tdrive": (utility_data.tdrive_records, utility_data.TDRIVE_BBOX),
            "geolife": (utility_data.geolife_records, utility_data.GEOLIFE_BBOX)}
WINDOWS = {"tdrive": utility_data.TDRIVE_WINDOW, "geolife": utility_data.GEOLIFE_WINDOW}
EARTH_RADIUS_M = 6_371_008.8
PRIVTRACE_INPUT = "trajpub_input.dat"
LDPTRACE_NAME = "porto"


class LocalPlane:
    """Equirectangular metres about the centre of a public bbox (lon, lat) <-> (x, y); well under 1% distance
    error within a city."""

    def __init__(self, bbox: tuple[float, float, float, float]) -> None:
        self.lon0, self.lat0 = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
        self.k_lon = EARTH_RADIUS_M * math.radians(1) * math.cos(math.radians(self.lat0))
        self.k_lat = EARTH_RADIUS_M * math.radians(1)

    def forward(self, lon: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (lon - self.lon0) * self.k_lon, (lat - self.lat0) * self.k_lat

    def inverse(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return x / self.k_lon + self.lon0, y / self.k_lat + self.lat0


def as_records(trajectories: list[np.ndarray]) -> pd.DataFrame:
    """A list of (n_i, 2) lon/lat arrays -> ``traj_id, seq, lon, lat`` (empty trajectories dropped)."""
    kept = [np.asarray(t, dtype=float).reshape(-1, 2) for t in trajectories]
    kept = [t for t in kept if len(t)]
    lengths = np.array([len(t) for t in kept], dtype=np.int64)
    xy = np.concatenate(kept) if kept else np.empty((0, 2))
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return pd.DataFrame({"traj_id": np.repeat(np.arange(len(kept)), lengths),
                         "seq": np.arange(len(xy)) - starts, "lon": xy[:, 0], "lat": xy[:, 1]})


def read_privtrace_file(path: Path) -> list[np.ndarray]:
    """PrivTrace's trajectory file format (``datasets/data_format.txt`` of its repository)."""
    out = []
    for line in path.read_text().splitlines():
        if line.startswith(">0:"):
            values = [float(v) for v in re.split(r"[,;]+", line[3:]) if v]
            out.append(np.array(values).reshape(-1, 2))
    return out


def run_privtrace(records: pd.DataFrame, bbox: tuple, epsilon: float) -> tuple[pd.DataFrame, float]:
    repo = REF / "PrivTrace"
    plane = LocalPlane(bbox)
    x, y = plane.forward(records["lon"].to_numpy(), records["lat"].to_numpy())
    lines = []
    for i, (_, idx) in enumerate(records.groupby("traj_id", sort=True).indices.items()):
        pts = ";".join(f"{a:.2f},{b:.2f}" for a, b in zip(x[idx], y[idx], strict=True))
        lines.append(f"#{i}:\n>0:{pts};\n")
    (repo / "datasets" / PRIVTRACE_INPUT).write_text("".join(lines))
    output = repo / "generated_tras.txt"
    output.unlink(missing_ok=True)
    started = time.perf_counter()
    subprocess.run([str(REF / "venv-privtrace" / "bin" / "python"), "main.py", f"--dataset_file_name={PRIVTRACE_INPUT}",
                    f"--total_epsilon={epsilon}"], cwd=repo, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    trajectories = []
    for t in read_privtrace_file(output):
        lon, lat = plane.inverse(t[:, 0], t[:, 1])
        trajectories.append(np.column_stack([lon, lat]))
    return as_records(trajectories), wall


def run_ldptrace(records: pd.DataFrame, epsilon: float, seed: int) -> tuple[pd.DataFrame, float]:
    code = REF / "LDPTrace" / "LDPTrace" / "code"
    data = code.parent / "data"
    groups = list(records.groupby("traj_id", sort=True).indices.values())
    order = np.random.default_rng(seed).permutation(len(groups))
    lon, lat = records["lon"].to_numpy(), records["lat"].to_numpy()
    db = [[(float(lon[i]), float(lat[i])) for i in groups[k]] for k in order]
    with lzma.open(data / f"{LDPTRACE_NAME}.xz", "wb") as f:
        pickle.dump(db, f)
    output = data / LDPTRACE_NAME / f"syn_{LDPTRACE_NAME}_eps_{float(epsilon)}_max_0.9_grid_6.pkl"
    output.unlink(missing_ok=True)
    started = time.perf_counter()
    proc = subprocess.Popen([str(REF / "venv-ldptrace" / "bin" / "python"), "main.py", "--dataset", LDPTRACE_NAME,
                             "--epsilon", str(epsilon), "--re_syn"], cwd=code, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and not output.exists():  # synthesis ends when it writes its output; then it
        time.sleep(0.05)                                # evaluates with its own metrics, which we do not need
    wall = time.perf_counter() - started
    try:
        synthetic = read_pickle_when_written(output, proc)
    except (OSError, EOFError, pickle.UnpicklingError) as e:
        proc.wait()
        raise RuntimeError(f"LDPTrace failed: {proc.stderr.read()[-2000:]}") from e
    proc.terminate()
    proc.wait()
    return as_records([np.array(t, dtype=float) for t in synthetic]), wall


def read_pickle_when_written(path: Path, proc: subprocess.Popen) -> object:
    """The pickle at ``path`` once the running ``proc`` has finished writing it (a partial pickle fails to load)."""
    while True:
        try:
            with open(path, "rb") as f:
                return pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError):
            if proc.poll() is not None:
                raise
            time.sleep(0.1)


def run(dataset: str, tool: str, epsilon: float, runs: int, first_seed: int) -> None:
    load, bbox = DATASETS[dataset]
    records = load()
    target = OUT / dataset
    target.mkdir(parents=True, exist_ok=True)
    for seed in range(first_seed, first_seed + runs):
        if tool == "privtrace":
            release, wall = run_privtrace(records, bbox, epsilon)
        else:
            release, wall = run_ldptrace(records, epsilon, seed)
        stem = target / f"{tool}_eps{epsilon:g}_run{seed}"
        release.to_csv(f"{stem}.csv.gz", index=False)
        Path(f"{stem}.json").write_text(json.dumps({"tool": tool, "epsilon": epsilon, "seed": seed,
                                                     "wall_s": wall, "records": int(release["traj_id"].nunique()),
                                                     "points": len(release)}))
        print(f"{dataset} {tool} eps={epsilon:g} run {seed}: {wall:.1f} s, "
              f"{release['traj_id'].nunique()} records", flush=True)


def objtrace_models() -> list:
    """ObjTrace at ε = 1 and 5 per object, its other parameters at their defaults."""
    from bench.table4 import Model

    return [Model(f"ObjTrace eps={eps} per object", "objtrace", {"epsilon": float(eps)}) for eps in (1, 5)]


def mechanism_models() -> list:
    """The trajpub rows: every model of the survey's Table 4 bench (:data:`bench.table4.MODELS`, its setups) and
    :func:`objtrace_models`."""
    from bench.table4 import MODELS, RAW

    return [m for m in MODELS if m.mechanism != RAW] + objtrace_models()


def run_mechanisms(dataset: str, only: set[str], seeds: list[int]) -> None:
    """Each model of :func:`mechanism_models` on the cleaned records: prepared on a grid of the model's cell size
    over the dataset's public bbox with the adapter's per-object record cap, split in two partitions by object,
    run by :func:`bench.table4.protect`."""
    from distributed import Client

    from bench.table4 import protect
    from mechanisms.registry import mechanism
    from tasks.audit import fragment_utility
    from tasks.dask_cluster import local_cluster
    from trajpub.candidate import Shape

    load, bbox = DATASETS[dataset]
    records = load()
    records = records.assign(seq=records.groupby("traj_id").cumcount())
    target = OUT / dataset
    target.mkdir(parents=True, exist_ok=True)
    with local_cluster(2, memory_limit="6GB") as cluster, Client(cluster) as client:
        for model in mechanism_models():
            if only and model.mechanism not in only:
                continue
            model = replace(model, grid=GridSpec(bbox, model.grid.cell_size_m), window=WINDOWS[dataset])
            params = model.parsed()
            prepared = to_grid(keep_trajectories(records, 2, mechanism(model.mechanism).max_records_per_object(params)),
                               model.grid)
            half = pd.factorize(prepared["object_id"])[0] % 2
            parts = [prepared[half == h].reset_index(drop=True) for h in (0, 1)]
            for seed in seeds:
                candidate, wall, kind = protect(client, model, params, parts, seed)
                stem = target / f"trajpub-{model.mechanism}-{slug(model.label)}_run{seed}"
                meta = {"tool": f"trajpub {model.mechanism}", "label": model.label, "kind": kind, "seed": seed,
                        "wall_s": wall, "params": model.params}
                if candidate.shape is Shape.FRAGMENTS:
                    meta["fragments"] = fragment_utility(prepared, candidate.fragments)
                    Path(f"{stem}.json").write_text(json.dumps(meta, default=str))
                    continue
                release = candidate.points[["traj_id", "seq", "lon", "lat", *(["t"] if "t" in candidate.points
                                                                               else [])]]
                release.to_csv(f"{stem}.csv.gz", index=False)
                meta.update(records=int(release["traj_id"].nunique()), points=len(release))
                Path(f"{stem}.json").write_text(json.dumps(meta, default=str))
                print(f"{dataset} {model.label} seed {seed}: {wall:.1f} s, {meta['records']} records", flush=True)


def slug(label: str) -> str:
    """A file-name part for a model's label ("ObjTrace eps=1 per object" -> "objtrace-eps-1-per-object")."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:40]


def commits() -> dict[str, str]:
    return {name: subprocess.run(["git", "rev-parse", "HEAD"], cwd=REF / name, capture_output=True, text=True,
                                 check=True).stdout.strip() for name in ("PrivTrace", "LDPTrace")}


def score() -> dict:
    """Every kept run scored with the issue's metrics (seed = the run's number for the metric's random queries);
    a run's metrics are kept in ``scored/`` beside it and recomputed when its output file changes. Runs of
    ``results.json`` whose outputs are not here (scored on another machine) are kept: results accumulate."""
    from audits.trajectory_utility import TRAJECTORY_METRICS, trajectory_metrics

    rows = []
    for dataset, (load, bbox) in DATASETS.items():
        runs = sorted((OUT / dataset).glob("*.json")) if (OUT / dataset).exists() else []
        if not runs:
            continue
        raw = load()
        for meta_path in runs:
            meta = json.loads(meta_path.read_text())
            output = meta_path.with_name(meta_path.name.replace(".json", ".csv.gz"))
            if not output.exists():  # fragments: the trajectory metrics do not apply
                rows.append({"dataset": dataset, **meta, "metrics": None})
                continue
            cache = meta_path.parent / "scored" / meta_path.name  # the metrics of this very output file
            scored = json.loads(cache.read_text()) if cache.exists() else {}
            if scored.get("output_mtime") != output.stat().st_mtime:
                release = pd.read_csv(output)
                if "t" in release:
                    release["t"] = pd.to_datetime(release["t"], utc=True, format="ISO8601")
                metrics = (trajectory_metrics(raw, release, bbox, meta["seed"]) if len(release)
                           else dict.fromkeys(TRAJECTORY_METRICS))  # nothing released: no utility to measure
                scored = {"output_mtime": output.stat().st_mtime, "metrics": metrics}
                cache.parent.mkdir(exist_ok=True)
                cache.write_text(json.dumps(scored, default=float))
            rows.append({"dataset": dataset, **meta, "metrics": scored["metrics"]})
    here = {run_key(r) for r in rows}
    if RESULTS.exists():  # runs scored before whose outputs are not on this machine stay as they were scored
        rows += [r for r in json.loads(RESULTS.read_text())["runs"] if run_key(r) not in here]
    results = {"machine": machine(), "references": commits(), "runs": rows}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1, default=float))
    text = RESULTS_MD.read_text() if RESULTS_MD.exists() else f"# Utility\n\n{BEGIN}\n{END}\n"
    before, rest = text.split(BEGIN, 1)
    RESULTS_MD.write_text(before + BEGIN + "\n" + table(results) + END + rest.split(END, 1)[1])
    return results


def run_key(run: dict) -> tuple:
    """What identifies a kept run: its dataset, tool, setting and seed (its run number for the references)."""
    return run["dataset"], run["tool"], run.get("label"), run.get("epsilon"), run["seed"]


def setting(run: dict) -> str:
    """A run's row name: the model's label for trajpub, the tool and its ε per record for the references."""
    if "label" in run:
        return run["label"]
    unit = "per record, local DP" if run["tool"] == "ldptrace" else "per record"
    return f"{'PrivTrace' if run['tool'] == 'privtrace' else 'LDPTrace'} eps={run['epsilon']:g} {unit}"


def summary(results: dict) -> pd.DataFrame:
    """One row per (dataset, setting): the number of runs and, per column (:data:`COLUMNS`, the time metrics,
    wall seconds, records), (mean, sd, n) over the n runs with a value (an empty release has no metric), or None."""
    runs = pd.DataFrame([{"dataset": r["dataset"], "setting": setting(r), "wall_s": r["wall_s"],
                          "records": r.get("records"), **(r["metrics"] or {})} for r in results["runs"]])
    rows = []
    for (dataset, name), group in runs.groupby(["dataset", "setting"], sort=False):
        row = {"dataset": dataset, "setting": name, "runs": len(group)}
        for col in (*COLUMNS, *TIME_COLUMNS, "wall_s", "records"):
            values = pd.to_numeric(group[col], errors="coerce").dropna() if col in group else pd.Series([])
            row[col] = (values.mean(), values.std(ddof=1) if len(values) > 1 else np.nan, len(values)) \
                if len(values) else None
        rows.append(row)
    return pd.DataFrame(rows)


def cell(value: tuple | None, runs: int, digits: int = 3) -> str:
    """mean ± sd (the mean alone for one run; "(k of n)" when only k runs released something)."""
    if value is None:
        return "n/a"
    mean, sd, n = value
    text = f"{mean:.{digits}f}" if np.isnan(sd) else f"{mean:.{digits}f} ± {sd:.{digits}f}"
    return text if n == runs else f"{text} ({n} of {runs})"


def table(results: dict) -> str:
    """Per dataset, mean ± sd over the runs of each setting: the issue's metric columns, the time metrics, the
    wall seconds and the records released; then :func:`verdict`."""
    m = results["machine"]
    lines = [(f"Machine: {m['nproc']} cores ({m['cpu']}), {m['ram_gb']} GB, shared with other jobs; scored "
              f"{m['date'][:16]} UTC. References: PrivTrace {results['references']['PrivTrace'][:12]}, LDPTrace "
              f"{results['references']['LDPTrace'][:12]}."), ""]
    rows = summary(results)
    columns = (*COLUMNS, *TIME_COLUMNS, "wall_s", "records")
    for dataset, part in rows.groupby("dataset", sort=False):
        lines += [f"### {dataset}", "", "| setting | runs | " + " | ".join(columns) + " |",
                  "|---|---|" + "---|" * len(columns)]
        for row in part.itertuples(index=False):
            lines.append(f"| {row.setting} | {row.runs} | " + " | ".join(
                cell(getattr(row, c), row.runs, DIGITS.get(c, 3)) for c in columns) + " |")
        lines += ["", *verdict(part), ""]
    return "\n".join(lines)


def verdict(part: pd.DataFrame) -> list[str]:
    """ObjTrace at ε per object against PrivTrace at the same ε per record, metric by metric (the bar):
    the means, the margin (positive = ObjTrace better) and the margin in standard errors of the difference."""
    by_name = {row.setting: row for row in part.itertuples(index=False)}
    lines = []
    for eps in (5, 1):
        ours, ref = by_name.get(f"ObjTrace eps={eps} per object"), by_name.get(f"PrivTrace eps={eps} per record")
        if ours is None or ref is None:
            continue
        title = (f"ObjTrace ε = {eps} per object against PrivTrace ε = {eps} per record ({ours.runs} and "
                 f"{ref.runs} runs):")
        lines += [title, "", "| metric | ObjTrace | PrivTrace | margin | margin / s.e. | ObjTrace better |",
                  "|---|---|---|---|---|---|"]
        for col in BAR_METRICS:
            a, b = getattr(ours, col), getattr(ref, col)
            if a is None or b is None:
                lines.append(f"| {col} | {cell(a, ours.runs)} | {cell(b, ref.runs)} | n/a | n/a | n/a |")
                continue
            margin = (a[0] - b[0]) if col in HIGHER_IS_BETTER else (b[0] - a[0])
            se = math.sqrt(a[1] ** 2 / a[2] + b[1] ** 2 / b[2]) if a[2] > 1 and b[2] > 1 else math.nan
            ratio = "n/a" if math.isnan(se) or se == 0 else f"{margin / se:.1f}"
            lines.append(f"| {col} | {cell(a, ours.runs)} | {cell(b, ref.runs)} | {margin:+.3f} | {ratio} | "
                         f"{'yes' if margin > 0 else '**no**'} |")
        wall = ours.wall_s
        fast = "yes" if wall and wall[0] <= RUNTIME_BAR_S else "**no**"
        lines += [(f"| runtime s (bar: <= {RUNTIME_BAR_S:g} s) | {cell(wall, ours.runs, 1)} | "
                  f"{cell(ref.wall_s, ref.runs, 1)} | | | {fast} |"), ""]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run one reference tool and keep its outputs in bench/out/references")
    r.add_argument("--dataset", choices=sorted(DATASETS), default="tdrive")
    r.add_argument("--tool", choices=("privtrace", "ldptrace"), required=True)
    r.add_argument("--epsilon", type=float, required=True)
    r.add_argument("--runs", type=int, default=3)
    r.add_argument("--first-seed", type=int, default=0)
    m = sub.add_parser("mechanisms", help="run trajpub's mechanisms (bench.table4's setups) on the same records")
    m.add_argument("--dataset", choices=sorted(DATASETS), default="tdrive")
    m.add_argument("--only", default="", help="comma-separated mechanism names (default: all)")
    m.add_argument("--seeds", default="0,1,2")
    sub.add_parser("score", help="score every kept run into bench/references/results.json")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.dataset, args.tool, args.epsilon, args.runs, args.first_seed)
    elif args.command == "mechanisms":
        run_mechanisms(args.dataset, {x for x in args.only.split(",") if x}, [int(x) for x in args.seeds.split(",")])
    else:
        score()


if __name__ == "__main__":
    main()
