"""Utility of synthetic T-Drive and San Francisco releases at 32, 64, 128 cells over the data's bbox (6, 3, 1.5 km
in Beijing; 1.7 x 2.8, 0.8 x 1.4, 0.4 x 0.7 km in San Francisco) and at square metric cells of 250 m to 2 km over
the city's core, with the sampling floor, plus segment-speed and trip-duration plausibility.

Three fleets (``--fleet``, :data:`FLEETS`). ``sf``: the San Francisco sample's cabs split in two halves as the
T-Drive halves are (:func:`bench.utility_data.taxi_halves`), the report half released and scored, the tuning half
its floor; CityTrace's PrivTree variant (:data:`PRIVTREE`) was chosen on the whole sample (its rows here are not
held out), its defaults on the T-Drive tuning half. ``halves``: the sample's taxis split in two halves
(:func:`bench.utility_data.taxi_halves`): hyper-parameters of CityTrace were chosen on the *tuning* half only;
every row is a release of the *report* half, scored against it. ``unseen``: the 299 T-Drive taxis the sample leaves
out (:mod:`bench.tdrive_unseen`), never used to choose anything, released and scored against themselves, the
sample's taxis as their floor: the issue's own setting (299 taxis released, another 299 of the same fleet and week
as the floor). Per fleet:

- **floor**: the other taxis (the tuning half; the sample), scored as if they were a release of the reported ones
  (another fleet of the same week: what no synthesizer can be expected to beat);
- trajpub's mechanisms (ObjTrace with its defaults, CityTrace) through their flow adapters
  (:func:`bench.table4.protect`, two Dask workers), as :mod:`bench.references` runs them;
- PrivTrace and LDPTrace from their authors' code (:func:`bench.references.run_privtrace`,
  :func:`bench.references.run_ldptrace`; set-up in :mod:`bench.references`).

Scoring: :func:`audits.trajectory_utility.trajectory_metrics` at ``grid_size`` 32, 64 and 128 (density, trip, pattern F1,
transition per grid; query and length are grid-free), :func:`square_cells` over the fleet's core (the density JSD
at 250 m, 500 m, 1 km and 2 km, how many of the raw's 10 busiest 500 m cells hold their share within x1.5, the
released share in 500 m cells where the raw has none), and, for timed releases, the p99 segment speed
(:func:`audits.trajectory_utility.segment_speeds`), the speed JSD and the trip-duration JSD, both on 20 buckets up to the
raw p99 (:func:`audits.trajectory_utility.speed_jsd`, :func:`audits.trajectory_utility.duration_jsd`).

    .venv/bin/python -m bench.utility_resolutions run --tool privtrace --epsilon 5 --runs 3 [--fleet unseen]
    .venv/bin/python -m bench.utility_resolutions run --tool ldptrace --epsilon 5 --runs 3 [--fleet unseen]
    .venv/bin/python -m bench.utility_resolutions mechanisms --seeds 0,1,2 [--fleet unseen|sf]
    .venv/bin/python -m bench.utility_resolutions score [--fleet unseen]   # the fleet's table in UTILITY_RESULTS.md
    .venv/bin/python -m bench.utility_resolutions tune '{"snr": 2}' --seeds 0-23   # a choice on the tuning half

``score`` rescores only a release file that is new or changed; a kept run whose file is absent (another
machine's, or not rerun) keeps its scores, so one mechanism can be rerun alone (without the references' clones
in ``bench/ref/``, their commits are those kept with the scores). ``tune`` is how CityTrace's
defaults are chosen: the defaults and each variant (parameters over the defaults) released in memory from the
tuning half and scored against that half, never the report half.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from audits.trajectory_utility import duration_jsd, segment_speeds, speed_jsd, trajectory_metrics
from bench import references, utility_data
from bench.fgs_pufferfish import machine
from bench.sf_data import SF_WINDOW
from trajpub.grid import GridSpec
from trajpub.window import ReleaseWindow

BBOX = utility_data.TDRIVE_BBOX
GRIDS = (32, 64, 128)
GRID_METRICS = ("density", "trip", "pattern_f1", "transition")
CELLS_M = (250, 500, 1000, 2000)
BEIJING_CORE = (116.2, 39.75, 116.55, 40.05)
"""Beijing's core for the square cells: about the 5th ring road (30 x 33 km), from the map."""


def halves() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(floor, reported) of the ``halves`` fleet: the sample's tuning half and report half."""
    return utility_data.taxi_halves(utility_data.tdrive_records())


def sf_halves() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(floor, reported) of the ``sf`` fleet: the San Francisco sample's tuning half and report half."""
    return utility_data.taxi_halves(utility_data.sf_records())


def unseen() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(floor, reported) of the ``unseen`` fleet: the whole sample and the taxis it leaves out."""
    from bench.tdrive_unseen import UNSEEN

    if not UNSEEN.exists():
        raise SystemExit(f"no {UNSEEN.name} in {UNSEEN.parent}: write it with python -m bench.tdrive_unseen")
    return utility_data.tdrive_records(), utility_data.tdrive_records(UNSEEN)


@dataclass(frozen=True)
class Fleet:
    """The taxis a fleet's rows release and are scored against (``split``: floor, reported), what its floor and
    reported taxis are called, and where its releases (``bench/out/STEM``), scores
    (``bench/references/STEM.json``) and table (between ``<!-- TAG:begin/end -->``) are kept."""

    split: Callable[[], tuple[pd.DataFrame, pd.DataFrame]]
    floor_label: str
    reported_as: str
    stem: str
    tag: str
    bbox: tuple[float, float, float, float] = BBOX
    core: tuple[float, float, float, float] = BEIJING_CORE
    window: ReleaseWindow = utility_data.TDRIVE_WINDOW

    @property
    def out(self) -> Path:
        return references.ROOT / "out" / self.stem

    @property
    def results(self) -> Path:
        return references.ROOT / "references" / f"{self.stem}.json"

    @property
    def markers(self) -> tuple[str, str]:
        return f"<!-- {self.tag}:begin -->", f"<!-- {self.tag}:end -->"

    def records(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(floor, reported): cleaned as :func:`bench.utility_data.clean` cleans, ``seq`` numbered per record."""
        return tuple(h.assign(seq=h.groupby("traj_id").cumcount()) for h in self.split())  # traj_id, t order


FLEETS = {"halves": Fleet(halves, "floor (the other half of the taxis)", "the report half", "resolutions",
                          "resolutions"),
          "unseen": Fleet(unseen, "floor (the sample's taxis)", "the unseen taxis", "resolutions_unseen",
                          "resolutions-unseen"),
          "sf": Fleet(sf_halves, "floor (the other half of the cabs)", "the San Francisco report half",
                      "resolutions_sf", "resolutions-sf", utility_data.SF_BBOX, utility_data.SF_CORE, SF_WINDOW)}
PRIVTREE = {"density_model": "privtree", "cell_size_m": 500.0, "density_cells": 400}
"""CityTrace's PrivTree variant as chosen on the whole San Francisco sample (500 m model cells: pattern F1 on the 128
grid 0.12 -> 0.34 with the PrivTree density, seeds 0-1; k = 400 fine cells per object:
:class:`mechanisms.citytrace.CityTraceParams`, ``density_model``)."""
PRIVTREE_250 = {**PRIVTREE, "cell_size_m": 250.0}
"""The same at 250 m model cells (its moves counted between blocks of 4 x 4 of them, 1 km): on the whole San
Francisco sample, pattern F1 on the 128 grid 0.35 -> 0.49 and on the 64 grid 0.53 -> 0.50 (seeds 0-2); run on
San Francisco only."""
PRIVTREE_SPACED = {**PRIVTREE, "point_spacing_m": 250.0}
"""The PrivTree variant with each released segment written as points at most 250 m apart (``point_spacing_m``,
post-processing), chosen on the San Francisco tuning half (seeds 2-7, ``tune``'s figures without its defaults
row): pattern F1 on the 128 grid 0.343 -> 0.515, transition 0.327 -> 0.281, every other figure within 0.01 (500 m:
0.488 and 0.279). On the T-Drive report half (3-minute fixes) it does not help: transition 0.312 -> 0.328 at
1.5 km."""
STEMS = {(None, None): "", (500.0, None): "_privtree", (250.0, None): "_privtree250",
         (500.0, 250.0): "_privtree_spaced"}
"""The release files' suffix per (PrivTree model cell, point spacing) of a CityTrace model (one file per model)."""


def models(fleet: Fleet) -> list:
    """ObjTrace at its defaults, CityTrace at its defaults, with :data:`PRIVTREE` and :data:`PRIVTREE_SPACED` (and,
    in San Francisco, :data:`PRIVTREE_250`), ε = 5 per taxi, in the fleet's window."""
    from bench.table4 import Model

    return [Model("ObjTrace eps=5 per taxi", "objtrace", {"epsilon": 5.0}, window=fleet.window),
            Model("CityTrace eps=5 per taxi", "citytrace", {"epsilon": 5.0}, window=fleet.window),
            Model("CityTrace eps=5 per taxi, PrivTree density, 500 m cells", "citytrace",
                  {"epsilon": 5.0, **PRIVTREE}, window=fleet.window),
            Model("CityTrace eps=5 per taxi, PrivTree density, 500 m cells, points every 250 m", "citytrace",
                  {"epsilon": 5.0, **PRIVTREE_SPACED}, window=fleet.window),
            *([Model("CityTrace eps=5 per taxi, PrivTree density, 250 m cells", "citytrace",
                     {"epsilon": 5.0, **PRIVTREE_250}, window=fleet.window)] if fleet.bbox == utility_data.SF_BBOX
              else [])]


def keep(fleet: Fleet, name: str, release: pd.DataFrame, meta: dict) -> None:
    fleet.out.mkdir(parents=True, exist_ok=True)
    release.to_csv(fleet.out / f"{name}.csv.gz", index=False)
    (fleet.out / f"{name}.json").write_text(json.dumps(meta, default=str))


def run_reference(fleet: Fleet, tool: str, epsilon: float, runs: int) -> None:
    records = fleet.records()[1]
    for seed in range(runs):
        if tool == "privtrace":
            release, wall = references.run_privtrace(records, fleet.bbox, epsilon)
        else:
            release, wall = references.run_ldptrace(records, epsilon, seed)
        label = f"{'PrivTrace' if tool == 'privtrace' else 'LDPTrace'} eps={epsilon:g} per record" + (
            ", local DP" if tool == "ldptrace" else "")
        keep(fleet, f"{tool}_eps{epsilon:g}_run{seed}", release, {"label": label, "seed": seed, "wall_s": wall})
        print(f"{label} run {seed}: {wall:.1f} s, {release['traj_id'].nunique()} records", flush=True)


def run_mechanisms(fleet: Fleet, only: set[str], seeds: list[int]) -> None:
    """Each model of :func:`models` on the fleet's reported taxis, as :func:`bench.references.run_mechanisms` runs
    them."""
    from dataclasses import replace

    from distributed import Client

    from bench.table4 import protect
    from mechanisms.registry import mechanism
    from tasks.dask_cluster import local_cluster
    from trajpub.segment import keep_trajectories, to_grid

    records = fleet.records()[1]
    with local_cluster(2, memory_limit="6GB") as cluster, Client(cluster) as client:
        for model in models(fleet):
            if only and model.mechanism not in only:
                continue
            model = replace(model, grid=GridSpec(fleet.bbox, model.grid.cell_size_m))
            params = model.parsed()
            prepared = to_grid(keep_trajectories(records, 2, mechanism(model.mechanism).max_records_per_object(params)),
                               model.grid)
            half = pd.factorize(prepared["object_id"])[0] % 2
            parts = [prepared[half == h].reset_index(drop=True) for h in (0, 1)]
            for seed in seeds:
                candidate, wall, _ = protect(client, model, params, parts, seed)
                release = candidate.points[["traj_id", "seq", "lon", "lat", "t"]]
                privtree = model.params.get("density_model") == "privtree"
                name = model.mechanism + STEMS[(model.params["cell_size_m"] if privtree else None,
                                                model.params.get("point_spacing_m"))]
                keep(fleet, f"{name}_run{seed}", release,
                     {"label": model.label, "seed": seed, "wall_s": wall})
                print(f"{model.label} seed {seed}: {wall:.1f} s, {release['traj_id'].nunique()} records", flush=True)


def tuning_half_scores(variants: dict[str, dict], seeds: list[int], fleet: Fleet) -> pd.DataFrame:
    """CityTrace at its defaults and with each variant's parameters (over the defaults), released in memory from
    the tuning half of ``fleet`` (``halves`` or ``sf``; prepared as :func:`run_mechanisms` prepares the report
    half; the adapter's per-partition sums are this one count) and scored against it: mean and sd over ``seeds``
    of :func:`metrics`' grid figures, query, length, the start-hour JSD and the square cells' figures."""
    from mechanisms import citytrace
    from trajpub.segment import keep_trajectories, to_grid

    half = fleet.records()[0]
    window = fleet.window
    defaults = citytrace.CityTraceParams().to_dict()
    chosen = {name: citytrace.CityTraceParams.from_dict({**defaults, **overrides})  # every variant checked first
              for name, overrides in {"defaults": {}, **variants}.items()}
    out = {}
    for name, params in chosen.items():
        grid = GridSpec(fleet.bbox, params.cell_size_m)
        prepared = to_grid(keep_trajectories(half, 2, params.max_records_per_object), grid)
        geometry = citytrace.geometry_of(grid, params)
        counts = citytrace.count_points(prepared, geometry, params, window.timezone)
        runs = []
        for seed in seeds:
            release = citytrace.release_from_counts(counts, geometry, grid, params, window,
                                                    np.random.default_rng(seed)).points
            m = metrics(half, release[["traj_id", "seq", "lon", "lat", "t"]], seed, fleet)
            runs.append({k: m[k] for k in (*(f"{k}_{g}" for g in (128, 64, 32) for k in GRID_METRICS), "query",
                                           "length", "start_hour_jsd", *SQUARE_COLUMNS)})
        frame = pd.DataFrame(runs)
        out[name] = frame.mean().round(3).astype(str) + " ± " + frame.std().fillna(0.0).round(3).astype(str)
        print(name, dict(out[name]), flush=True)
    return pd.DataFrame(out).T


SQUARE_COLUMNS = (*(f"jsd_{m}m" for m in CELLS_M), "hot_500m", "empty_500m")


def square_cells(raw: pd.DataFrame, release: pd.DataFrame, core: tuple[float, float, float, float]) -> dict:
    """The review's figures by resolution (:func:`tasks.report.cell_figures`) on square cells of :data:`CELLS_M`
    over ``core``: the density JSD per cell size; at 500 m, how many of the raw's 10 busiest cells hold a released
    share within x1.5 of the raw's, and the released share in cells where the raw has no point."""
    from tasks.report import cell_figures

    out = {}
    for size in CELLS_M:
        f = cell_figures(raw, release, core, size)
        out[f"jsd_{size}m"] = f["jsd"]
        if size == 500:
            out |= {"hot_500m": f["hot"], "empty_500m": f["empty"]}
    return out


def metrics(raw: pd.DataFrame, release: pd.DataFrame, seed: int, fleet: Fleet) -> dict:
    """The figures of one release of the fleet's reported taxis (module docstring)."""
    out = square_cells(raw, release, fleet.core)
    for g in GRIDS:
        m = trajectory_metrics(raw, release, fleet.bbox, seed, g)
        out |= {f"{k}_{g}": m[k] for k in GRID_METRICS}
        out |= {"query": m["query"], "length": m["length"], "outside_bbox_share": m["outside_bbox_share"]}
    if "t" in release and release["t"].notna().any():
        _, speeds = segment_speeds(raw, release)
        out |= {"speed_p99_kmh": float(np.quantile(speeds, 0.99)) if len(speeds) else None,
                "speed_jsd": speed_jsd(raw, release), "duration_jsd": duration_jsd(raw, release, 20, 0.99),
                "start_hour_jsd": m["start_hour_jsd"], "days": int(release["t"].dt.normalize().nunique())}
    return out


def read_release(path: Path) -> pd.DataFrame:
    release = pd.read_csv(path)
    if "t" in release:
        release["t"] = pd.to_datetime(release["t"], utc=True, format="ISO8601")
    return release


COLUMNS = (*(f"{k}_{g}" for g in GRIDS for k in GRID_METRICS), "query", "length", *SQUARE_COLUMNS, "speed_p99_kmh",
           "speed_jsd", "duration_jsd", "start_hour_jsd", "days", "wall_s")


def score(fleet: Fleet) -> dict:
    """Every kept run of the fleet (and its floor, seed 0) scored; the results and the fleet's table of
    ``UTILITY_RESULTS.md``."""
    floor, raw = fleet.records()
    raw_speeds, _ = segment_speeds(raw, raw)
    before = json.loads(fleet.results.read_text()) if fleet.results.exists() else {}
    kept = {r.get("file"): r for r in before.get("runs", [])}
    label = fleet.floor_label
    rows = [kept.get(label) if label in kept and "jsd_500m" in kept[label] else
            {"label": label, "file": label, "seed": 0, "wall_s": None, **metrics(raw, floor, 0, fleet)}]
    # a kept run whose release file is not here (not rerun on this machine) keeps its scores
    rows += [r for name, r in kept.items() if name != label and not (fleet.out / name).exists()]
    for meta_path in sorted(fleet.out.glob("*.json")):
        output = meta_path.with_name(meta_path.name.replace(".json", ".csv.gz"))
        if kept.get(output.name, {}).get("mtime") == output.stat().st_mtime and "jsd_500m" in kept[output.name]:
            rows.append(kept[output.name])
            continue
        meta = json.loads(meta_path.read_text())
        rows.append({**meta, "file": output.name, "mtime": output.stat().st_mtime,
                     **metrics(raw, read_release(output), meta["seed"], fleet)})
        print(f"scored {meta_path.name}", flush=True)
    rows = rows[:1] + sorted(rows[1:], key=lambda r: r["file"])  # the floor, then the runs by file name
    cloned = all((references.REF / name).is_dir() for name in ("PrivTrace", "LDPTrace"))
    not_run = {"PrivTrace": "not run", "LDPTrace": "not run"}
    results = {"machine": machine(), "references": references.commits() if cloned else before.get("references", not_run),
               "raw_speed_p99_kmh": float(np.quantile(raw_speeds, 0.99)), "raw_taxis": int(raw["object_id"].nunique()),
               "raw_records": int(raw["traj_id"].nunique()), "runs": rows}
    fleet.results.parent.mkdir(exist_ok=True)
    fleet.results.write_text(json.dumps(results, indent=1, default=float))
    render(fleet)
    return results


def table(fleet: Fleet, results: dict) -> str:
    """Mean ± sd over the runs of each release, one column per figure of :data:`COLUMNS`."""
    m = results["machine"]
    runs = pd.DataFrame(results["runs"])
    lines = [(f"Machine: {m['nproc']} cores ({m['cpu']}), {m['ram_gb']} GB, shared with other jobs; scored "
              f"{m['date'][:16]} UTC. References: PrivTrace {results['references']['PrivTrace'][:12]}, LDPTrace "
              f"{results['references']['LDPTrace'][:12]}. Raw ({fleet.reported_as}): {results['raw_taxis']} taxis, "
              f"{results['raw_records']} records, p99 segment speed {results['raw_speed_p99_kmh']:.1f} km/h."), ""]
    for title, cols in (("32 x 32 over the raw's box", [f"{k}_32" for k in GRID_METRICS] + ["query", "length"]),
                        ("64 x 64", [f"{k}_64" for k in GRID_METRICS]),
                        ("128 x 128", [f"{k}_128" for k in GRID_METRICS]),
                        ("square cells over the core", list(SQUARE_COLUMNS)),
                        ("time", ["speed_p99_kmh", "speed_jsd", "duration_jsd", "start_hour_jsd", "days", "wall_s"])):
        names = [re.sub(r"_\d+$", "", c) for c in cols]
        lines += [f"#### {title}", "", "| release | runs | " + " | ".join(names) + " |",
                  "|---|---|" + "---|" * len(cols)]
        for label, group in runs.groupby("label", sort=False):
            cells = []
            for c in cols:
                v = pd.to_numeric(group[c], errors="coerce").dropna() if c in group else pd.Series([], dtype=float)
                digits = 1 if c in ("speed_p99_kmh", "wall_s", "hot_500m") else 0 if c == "days" else 4 if \
                    c == "empty_500m" else 3
                cells.append("n/a" if v.empty else f"{v.mean():.{digits}f}" if len(v) == 1
                             else f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}")
            lines.append(f"| {label} | {len(group)} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines + halfway(fleet, runs))


def halfway(fleet: Fleet, runs: pd.DataFrame) -> list[str]:
    """The issue's bar on this fleet: at 128 cells (query and length grid-free), CityTrace's mean at least halfway
    from PrivTrace's mean to the floor, on every metric."""
    means = runs.groupby("label", sort=False)[[*(f"{k}_128" for k in GRID_METRICS), "query", "length"]].mean()
    ours, ref = "CityTrace eps=5 per taxi", "PrivTrace eps=5 per record"
    if ours not in means.index or ref not in means.index:
        return []
    lines = ["#### The bar: halfway from PrivTrace to the floor at 1.5 km", "",
             "| metric | floor | PrivTrace | halfway | CityTrace | met |", "|---|---|---|---|---|---|"]
    for col in means.columns:
        floor, peer, got = means.loc[fleet.floor_label, col], means.loc[ref, col], means.loc[ours, col]
        target = (floor + peer) / 2
        met = got >= target if col.startswith("pattern_f1") else got <= target
        name = re.sub(r"_\d+$", "", col)
        lines.append(f"| {name} | {floor:.3f} | {peer:.3f} | {target:.3f} | {got:.3f} | "
                     f"{'yes' if met else '**no**'} |")
    return [*lines, ""]


def render(fleet: Fleet) -> None:
    """The fleet's table of ``UTILITY_RESULTS.md`` from its kept scores (no rescoring)."""
    results = json.loads(fleet.results.read_text())
    text = references.RESULTS_MD.read_text()
    begin, end = fleet.markers
    before, rest = text.split(begin, 1)
    references.RESULTS_MD.write_text(before + begin + "\n" + table(fleet, results) + end + rest.split(end, 1)[1])


def seed_list(text: str) -> list[int]:
    """``--seeds``: "first-last" (both included) or a comma-separated list; a clear exit on anything else."""
    first, dash, last = text.partition("-")
    try:
        return list(range(int(first), int(last) + 1)) if dash else [int(x) for x in text.split(",")]
    except ValueError:
        raise SystemExit(f"--seeds: {text!r} is neither first-last nor a comma-separated list of integers") from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleet", choices=sorted(FLEETS), default="halves",
                        help="halves: the sample's report half; unseen: the taxis the sample leaves out; sf: the San "
                             "Francisco sample's report half (tune: the fleet's tuning half, halves or sf)")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run one reference tool on the fleet's reported taxis")
    r.add_argument("--tool", choices=("privtrace", "ldptrace"), required=True)
    r.add_argument("--epsilon", type=float, default=5.0)
    r.add_argument("--runs", type=int, default=3)
    m = sub.add_parser("mechanisms", help="run trajpub's mechanisms (models()) on the fleet's reported taxis")
    m.add_argument("--only", default="")
    m.add_argument("--seeds", default="0,1,2", help="first-last, or a comma-separated list")
    sub.add_parser("score", help="score every kept run and the floor into bench/UTILITY_RESULTS.md")
    sub.add_parser("table", help="rewrite the table of bench/UTILITY_RESULTS.md from the kept scores")
    t = sub.add_parser("tune", help="CityTrace's defaults against variants on the tuning half")
    t.add_argument("variants", help='JSON: {"name": {param: value, ...}, ...} or one {param: value, ...}')
    t.add_argument("--seeds", default="0-23", help="first-last, or a comma-separated list")
    args = parser.parse_args(argv)
    fleet = FLEETS[args.fleet]
    if args.command == "run":
        run_reference(fleet, args.tool, args.epsilon, args.runs)
    elif args.command == "mechanisms":
        run_mechanisms(fleet, {x for x in args.only.split(",") if x}, seed_list(args.seeds))
    elif args.command == "score":
        score(fleet)
    elif args.command == "tune":
        from trajpub.errors import ParameterError

        seeds = seed_list(args.seeds)
        try:
            variants = json.loads(args.variants)
        except json.JSONDecodeError as err:
            raise SystemExit(f"tune: {err}") from None
        if isinstance(variants, dict) and not all(isinstance(v, dict) for v in variants.values()):
            variants = {args.variants: variants}  # one variant's parameters, named by its text
        if not isinstance(variants, dict) or not all(isinstance(v, dict) for v in variants.values()):
            raise SystemExit("tune: the variants must be a JSON object, {param: value, ...} or "
                             "{name: {param: value, ...}, ...}")
        try:
            print(tuning_half_scores(variants, seeds, fleet).to_string())
        except ParameterError as err:
            raise SystemExit(f"tune: {err}") from None
    else:
        render(fleet)


if __name__ == "__main__":
    main()
