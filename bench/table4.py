"""The survey's Table 4 on the T-Drive sample: every release mechanism of trajpub, run through its
flow adapter on a two-worker Dask cluster, then audited as the release flow audits it (every attack that applies,
every utility metric), next to the survey's figures. ``python -m bench.table4`` (``--only w4m,glove`` for some).

Data: the 300-taxi T-Drive sample cleaned by the flow's validation rules and prepared as the flow prepares a release
(:mod:`bench.tdrive`: 30-min gaps, UTC days, >= 2 points, 2 km grid over the Beijing bbox; the prefix tree's and
the DP synthesizers' per-object record cap applied before the mechanism, as the flow does), split by object into
two partitions scattered to the workers. Settings: the survey's where it gives them (k = 5, l = 3, t = 0.1,
delta = r = 500 m, epsilon = 5, 1,000 mix-zones), each seed mechanism at a setting comparable with them.

Table 4's columns (Jin et al., TKDE 2023, Sec. 5, with the metrics of Sec. 4): LA, the
signature linkage attack's success (truthful: Acc@1 of the record's owner among all raw objects; synthetic: the
share of released records whose best match has similarity > 0.5, the survey's threshold variant); INF, the share of
raw points not kept within 100 m (synthetic releases: by any record); DE, TE, FFP (FFP is the F1 of the top-100
patterns, higher is better; the others lower is better). Runtime: the adapter's wall seconds on the cluster.
Scaling: each mechanism's runtime on the first 100, 200 and 300 taxis.

Outputs: ``bench/table4/results.json`` and the tables of ``bench/TABLE4_RESULTS.md`` (between the markers; the
written comparison around them is kept).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from distributed import Client

from bench.audit_runtime import policy
from bench.fgs_pufferfish import machine
from bench.tdrive import BBOX, GRID, GRID_FASTPUB, TZ, load_clean, prepare
from bench.utility_data import TDRIVE_WINDOW
from mechanisms.mixzone import MixzoneParams
from mechanisms.registry import mechanism
from tasks.audit import attack_frames, measure_utility, run_attacks
from tasks.dask_cluster import local_cluster
from tasks.protect import run as run_mechanism
from trajpub.candidate import CandidateRelease, Shape
from trajpub.grid import GridSpec
from trajpub.mechanism import OnRoadNetwork, PublicInputs
from trajpub.road_synthetic import synthetic_grid
from trajpub.roads import RoadNetwork
from trajpub.window import ReleaseWindow

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "table4"
RESULTS_MD = ROOT / "TABLE4_RESULTS.md"
BEGIN, END = "<!-- tables:begin -->", "<!-- tables:end -->"
SCALING_TAXIS = (100, 200, 300)
RAW = "raw"  # the prepared data published unchanged: every figure's reference (LA ceiling, zero errors)

# The survey's Table 4, T-Drive rows: LA, INF, DE, TE, FFP (Jin et al., TKDE 2023, Sec. 5.2.3). The
# survey gives no runtimes in Table 4; its text: W4M ~2 min for 2,000 objects, GLOVE, KLT and Dummy "too
# time-consuming" at 1,000-2,000 taxis on a 20-thread server.
SURVEY_TABLE4 = {
    "W4M": (0.847, 0.285, 0.057, 0.330, 0.994),
    "GLOVE": (0.342, 0.912, 0.587, 0.657, 0.416),
    "KLT": (0.269, 0.929, 0.617, 0.686, 0.330),
    "Mixzone": (0.197, 0.005, 0.554, 0.502, 0.987),
    "Dummy": (0.957, 0.196, 0.114, 0.296, 0.987),
    "DPT": (0.006, 0.995, 0.559, 0.356, 0.591),
    "AdaTrace": (0.000, 0.603, 0.291, 0.064, 0.908),
}


@dataclass(frozen=True)
class Model:
    """One row: a mechanism with its release parameters; ``setup``, when given, builds the adapter's parsed
    parameters itself (a road network in memory instead of one named in PostGIS)."""

    label: str
    mechanism: str
    params: dict
    survey: str | None = None
    grid: GridSpec = GRID
    setup: Callable[[GridSpec], Any] | None = None
    window: ReleaseWindow = TDRIVE_WINDOW

    def inputs(self) -> PublicInputs:
        """The public inputs of the model's release: the synthetic network of central Beijing for mix zones; the
        sample's window for timestamps."""
        if self.mechanism == "mixzone":
            return PublicInputs(self.grid, central_beijing_network(self.grid), "synthetic", window=self.window)
        return PublicInputs(self.grid, window=self.window)

    def parsed(self) -> Any:
        """The adapter's parameters (built once per model: a setup may build a road network)."""
        if self.mechanism == RAW:
            return None
        return self.setup(self.grid) if self.setup else mechanism(self.mechanism).parse_params(dict(self.params))


def central_beijing_network(grid: GridSpec) -> RoadNetwork:
    """A synthetic jittered street grid of 200 m blocks over 40 km x 40 km of central Beijing (no Beijing map is
    available offline): where the survey's mix zones sit on real intersections, ours sit on these."""
    x0, y0 = grid.project(116.17, 39.74)
    return synthetic_grid(200, 200, 200.0, rng=np.random.default_rng(1), origin=(float(x0), float(y0)),
                          crs=grid.crs)


def mixzone_setup(grid: GridSpec) -> OnRoadNetwork:
    return OnRoadNetwork(MixzoneParams(radius_m=500.0, n_zones=1000), "synthetic central Beijing", "synthetic")


MODELS = [
    Model("raw data, unprotected", RAW, {}),
    Model("W4M k=5 delta=500 m", "w4m", {"k": 5, "delta_m": 500.0}, "W4M"),
    Model("GLOVE k=5", "glove", {"k": 5}, "GLOVE"),
    Model("KLT k=5 l=3 t=0.1 (synthetic POIs)", "klt",
          {"k": 5, "l": 3, "t": 0.1, "pois": {"synthetic": {"n": 50_000, "categories": 8}}}, "KLT"),
    Model("Mixzone r=500 m, 1,000 zones (synthetic network)", "mixzone", {"radius_m": 500.0, "n_zones": 1000},
          "Mixzone", setup=mixzone_setup),
    Model("Dummy k=5 l=3 (no network)", "dummy", {"k": 5, "l": 3, "road_network": None}, "Dummy"),
    Model("DPT eps=5", "dpt", {"epsilon": 5.0, "max_records_per_object": 7}, "DPT"),
    Model("AdaTrace eps=5", "adatrace", {"epsilon": 5.0, "max_records_per_object": 7}, "AdaTrace"),
    Model("prefix tree eps=5", "prefix_tree", {"epsilon": 5.0, "height": 8, "max_records_per_object": 7}),
    Model("FGS-Pufferfish eps=2", "fgs_pufferfish", {"epsilon": 2.0, "n_slots": 48, "day_timezone": TZ}),
    Model("(k-Psi) k=5 eps=5 delta=500 m, no network", "kpsi_anonymity",
          {"k": 5, "epsilon": 5.0, "road_aware": False, "psi_mode": "constant", "delta_m": 500.0,
           "noise_scale": "data_independent", "max_link_budget_m": 50_000.0, "road_network": None}),
    Model("FASTPub k=5 eps=10 (8 x 8 cells)", "fastpub", {"k": 5, "epsilon": 10.0}, grid=GRID_FASTPUB),
]


def partitions(clean: pd.DataFrame, n_taxis: int, cap: int | None, grid: GridSpec) -> list[pd.DataFrame]:
    """The first ``n_taxis`` taxis prepared on ``grid`` (records capped at ``cap`` per object), in two partitions
    by object as the flow's ingest splits them."""
    taxis = clean["object_id"].drop_duplicates().iloc[:n_taxis]
    points = clean[clean["object_id"].isin(taxis)]
    prepared = prepare(points, cap)
    prepared = prepared.assign(cell=grid.cell_of(prepared["x"].to_numpy(), prepared["y"].to_numpy()))
    half = pd.factorize(prepared["object_id"])[0] % 2
    return [prepared[half == p].reset_index(drop=True) for p in (0, 1)]


def protect(client: Client, model: Model, params: Any, parts: list[pd.DataFrame],
            seed: int) -> tuple[CandidateRelease, float, str]:
    """The adapter's run on the scattered partitions: (candidate, wall seconds, release kind)."""
    if model.mechanism == RAW:
        return CandidateRelease(Shape.TRUTHFUL, pd.concat(parts, ignore_index=True), {"mechanism": RAW}), 0.0, "truthful"
    mech = mechanism(model.mechanism)
    futures = client.scatter(parts, hash=False)  # fresh keys: the last run's cancelled ones may still be in flight
    started = time.perf_counter()
    candidate = run_mechanism(mech, client, futures, model.inputs(), params, np.random.default_rng(seed))
    wall = time.perf_counter() - started
    client.cancel(futures)
    kind = candidate.shape.audit_kind
    return candidate, wall, kind


def audit(client: Client, raw: pd.DataFrame, candidate: CandidateRelease, kind: str, seed: int) -> dict:
    background, release = attack_frames(raw, candidate)
    started = time.perf_counter()
    results, failures, not_applicable = run_attacks(client, policy(), background, release, kind)
    failures |= {name: f"not applicable: {why}" for name, why in not_applicable.items()}
    attacks_s = time.perf_counter() - started
    started = time.perf_counter()
    utility = measure_utility(raw, candidate, release, seed, BBOX) if kind != "aggregate" or len(
        candidate.fragments) else {"fragments": 0}
    return {"attacks": {r.attack: {"n_targets": r.n_targets, "success_rate": r.success_rate,
                                   "ci": [r.ci_low, r.ci_high], "baseline": r.baseline, "risk": r.risk,
                                   "acc_at_1": r.evidence.get("acc_at_k", {}).get("1")} for r in results},
            "failures": failures, "utility": utility, "attacks_s": attacks_s,
            "utility_s": time.perf_counter() - started}


def la(entry: dict) -> float | None:
    """The survey's LA: Acc@1 of the truthful signature linkage, the > 0.5 rate of the synthetic form."""
    attacks = entry["audit"]["attacks"]
    if entry["kind"] == "truthful" and "signature_linkage" in attacks:
        return attacks["signature_linkage"]["acc_at_1"]
    if entry["kind"] == "synthetic" and "signature_linkage_synthetic" in attacks:
        return attacks["signature_linkage_synthetic"]["success_rate"]
    return None


def fmt(x, digits: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{digits}f}"


def tables(results: dict) -> str:
    m = results["machine"]
    lines = [(f"Run: `.venv/bin/python -m bench.table4` at commit {results['commit']}, {m['date'][:16]} UTC, "
              f"{m['nproc']} cores ({m['cpu']}), {m['ram_gb']} GB, shared machine; 2 Dask workers."), "",
             "### Table 4: ours on the 300-taxi sample, the survey's T-Drive figures beside them", "",
             ("| model | LA | INF | DE | TE | FFP | runtime s | survey LA | survey INF | survey DE | survey TE | "
              "survey FFP |"), "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in results["models"]:
        u = e["audit"]["utility"]
        s = SURVEY_TABLE4.get(e["survey"] or "", (None,) * 5)
        ffp = 1 - u["ffp_error"] if "ffp_error" in u else None
        lines.append(f"| {e['label']} ({e['kind']}) | {fmt(la(e))} | {fmt(u.get('information_loss'))} | "
                     f"{fmt(u.get('diameter_error'))} | {fmt(u.get('trip_error'))} | {fmt(ffp)} | "
                     f"{e['runtime_s']:.1f} | " + " | ".join(fmt(x) for x in s) + " |")
    lines += ["", "### Every attack (success rate [95% CI], baseline-corrected risk)", "",
              "| model | attack | targets | success [95% CI] | baseline | risk |", "|---|---|---|---|---|---|"]
    for e in results["models"]:
        for name, a in sorted(e["audit"]["attacks"].items()):
            lines.append(f"| {e['label']} | {name} | {a['n_targets']} | {a['success_rate']:.3f} "
                         f"[{a['ci'][0]:.3f}, {a['ci'][1]:.3f}] | {a['baseline']:.4f} | {a['risk']:.3f} |")
        for name, why in sorted(e["audit"]["failures"].items()):
            lines.append(f"| {e['label']} | {name} | | **failed**: {why} | | |")
    names = ["count_query_re", "density_jsd", "length_jsd_points", "point_error_m", "fragment_count_re_median"]
    lines += ["", "### Other utility figures of the audit, released volume, audit seconds", "",
              "| model | " + " | ".join(names) + " | released records | released points | audit s |",
              "|---|" + "---|" * (len(names) + 3)]
    for e in results["models"]:
        u = e["audit"]["utility"]
        lines.append(f"| {e['label']} | " + " | ".join(fmt(u.get(n)) for n in names) +
                     f" | {e['released_records']} | {e['released_points']} | "
                     f"{e['audit']['attacks_s'] + e['audit']['utility_s']:.1f} |")
    lines += ["", "### Runtime (s) by number of taxis", "",
              "| model | " + " | ".join(f"{n} taxis" for n in SCALING_TAXIS) + " | 300 / 100 |",
              "|---|" + "---|" * (len(SCALING_TAXIS) + 1)]
    for e in results["models"]:
        t = [e["scaling"].get(str(n)) for n in SCALING_TAXIS]
        ratio = t[-1] / t[0] if t[0] and t[-1] else None
        lines.append(f"| {e['label']} | " + " | ".join(fmt(x, 1) for x in t) + f" | {fmt(ratio, 2)} |")
    return "\n".join(lines) + "\n"


def write_report(results: dict) -> None:
    text = RESULTS_MD.read_text() if RESULTS_MD.exists() else (
        "# The survey's Table 4 on T-Drive\n\n" + BEGIN + "\n" + END + "\n")
    before, rest = text.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    RESULTS_MD.write_text(before + BEGIN + "\n" + tables(results) + END + after)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated mechanism names (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-scaling", action="store_true", help="skip the 100/200-taxi runs")
    args = parser.parse_args(argv)
    only = {x for x in args.only.split(",") if x}
    models = [m for m in MODELS if not only or m.mechanism in only]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                            check=True).stdout.strip()
    OUT.mkdir(exist_ok=True)
    path = OUT / "results.json"
    previous = {e["mechanism"]: e for e in json.loads(path.read_text())["models"]} if path.exists() else {}
    clean, _ = load_clean()
    results = {"machine": machine(), "commit": commit, "models": []}
    with local_cluster(2, memory_limit="9GB") as cluster, Client(cluster) as client:
        for model in models:
            params = model.parsed()
            cap = None if model.mechanism == RAW else mechanism(model.mechanism).max_records_per_object(params)
            scaling = {}
            for n in (SCALING_TAXIS if not args.no_scaling else SCALING_TAXIS[-1:]):
                parts = partitions(clean, n, cap, model.grid)
                candidate, wall, kind = protect(client, model, params, parts, args.seed)
                scaling[str(n)] = wall
                print(f"{model.label}: {n} taxis {wall:.1f} s", flush=True)
            raw = pd.concat(parts, ignore_index=True)
            entry = {"label": model.label, "mechanism": model.mechanism, "survey": model.survey,
                     "params": model.params, "kind": kind, "runtime_s": wall, "scaling": scaling,
                     "released_records": int(candidate.points["traj_id"].nunique()) if len(candidate.points)
                     else (len(candidate.fragments) if candidate.fragments is not None else 0),
                     "released_points": len(candidate.points),
                     "metadata": json.loads(json.dumps(candidate.metadata, default=str)),
                     "audit": audit(client, raw, candidate, kind, args.seed)}
            previous[model.mechanism] = entry
            print(f"{model.label}: LA {fmt(la(entry))}, audit {entry['audit']['attacks_s']:.1f} s", flush=True)
    order = [m.mechanism for m in MODELS]
    results["models"] = sorted(previous.values(), key=lambda e: order.index(e["mechanism"]))
    path.write_text(json.dumps(results, indent=1, default=str))
    write_report(results)


if __name__ == "__main__":
    main()
