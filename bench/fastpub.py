"""Reproduce the experiment shape of FASTPub (Wang et al., IEEE TMC 2022, §6) on T-Drive: ``python -m bench.fastpub``.

Paper §6 and App. D. Pure: no database, no Prefect, no Dask.

Data. The T-Drive sample (300 taxis, one week) is cut into trajectories per taxi, per UTC day and at gaps over
30 minutes, projected on a square n×n grid over central Beijing (bbox below, ≈ 39 km a side; n = 4, 8, 16), cut
again where a taxi leaves the grid, with consecutive repeats collapsed (``trajpub.segment.cell_sequences``) and
trajectories shorter than 3 cells dropped (as the paper drops MSNBC sessions shorter than 3). The paper
replicated MSNBC ×100 to N = 4.7e7 clients; here every trajectory is replicated so that N ≈ ``--clients``
(default 10^7), each copy a separate client (docs/design.md, FASTPub), simulated exactly with multiplicities.

Settings (the paper's 15): l ∈ {3, 4, 5} × k ∈ {100k, …, 500k}/4.7e7 · N (the paper's k/N on MSNBC, 0.21%–1.06%),
ε = 10, ρ = 0.2, C = 5, λ = 0.8, ξ = 0.01. Methods: FASTPub, TrieHH (R = l) and SFP (T = 2⌈l/2⌉, 64 sketch
rows instead of the code's 2048 to keep decoding affordable: the estimate is unbiased for any number of rows
and its noise variance does not depend on it; only hash collisions average out less). SFP is not run on the
16×16 grid: its decoder scores 256·257² puzzle pieces per position.

Metrics (paper §6.2–6.3): precision, recall, F1 of the published l-fragments against GT_l(k) = {f : S(f) ≥ k}
("inv" when nothing is published); the median relative count-query error over the legal queries GT_l(k).

One FASTPub run per (k, seed) with l_max = 5 serves l = 3, 4, 5: rounds 1..l of that run have exactly the
distribution of a run with l_max = l (the same ⌊ρN⌋ fresh clients per round, the server's per-round generator
streams, and count queries of length l read only DB entries of length ≤ l), so P_l and the DB after round l are
evaluated as that run's output. TrieHH and SFP are run once per (k, l, seed). Defaults: 3 seeds for FASTPub
and TrieHH, 1 for SFP (the slowest: ≈ 4 s a run at N = 10^7; its F1 barely moves between seeds), 1 on 16×16.

Outputs: ``bench/fastpub/*.png``, ``bench/fastpub/results.json``, ``bench/fastpub/results.md``;
``bench/FASTPUB_RESULTS.md`` is the curated record with the written comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from bench.fgs_pufferfish import load_tdrive, machine
from mechanisms.fastpub import (
    FastPubParams,
    FastPubResult,
    InMemoryPopulation,
    fastpub,
    frequent_fragments,
    group_duplicates,
    median_relative_error,
    precision_recall_f1,
    run_server,
)
from trajpub.grid import GridSpec
from trajpub.segment import cell_sequences, segment, to_grid

OUT = Path(__file__).resolve().parent / "fastpub"
BBOX = (116.17, 39.75, 116.63, 40.10)  # central Beijing, ≈ 39 km × 39 km
PAPER_N = 4.7e7
PAPER_K = (100_000, 200_000, 300_000, 400_000, 500_000)
LENGTHS = (3, 4, 5)
METHODS = ("fastpub", "triehh", "sfp")
LABELS = {"fastpub": "FASTPub", "triehh": "TrieHH (baseline)", "sfp": "SFP (baseline)"}
COLOURS = {"fastpub": "C0", "triehh": "C1", "sfp": "C2"}
SFP_ROWS = 64


def square_grid(n: int) -> GridSpec:
    """An n×n grid over BBOX (cell size = the longer side / n)."""
    x0, y0, x1, y1 = GridSpec(BBOX, 1000.0).extent
    grid = GridSpec(BBOX, max(x1 - x0, y1 - y0) / n * 1.0001)
    assert grid.n_cols == n and grid.n_rows == n, (grid.n_cols, grid.n_rows)
    return grid


def prepare(points: pd.DataFrame, grid: GridSpec, min_cells: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct cell sequences (CSR) with multiplicities, as described in the module docstring."""
    df = to_grid(segment(points, time_gap_s=1800, split_by_day=True), grid)
    outside = df["cell"].to_numpy() < 0
    exits = pd.Series(outside).groupby(df["traj_id"].to_numpy()).cumsum().to_numpy()
    df["traj_id"] = df["traj_id"] * 10_000 + exits  # a new trajectory after each stretch outside the grid
    _, offsets, cells = cell_sequences(df[~outside])
    lengths = np.diff(offsets)
    keep = np.flatnonzero(lengths >= min_cells)
    new_offsets = np.concatenate(([0], np.cumsum(lengths[keep]))).astype(np.int64)
    idx = np.repeat(offsets[keep] - new_offsets[:-1], lengths[keep]) + np.arange(new_offsets[-1])
    return group_duplicates(new_offsets, cells[idx])


def evaluate_fastpub_at(result: FastPubResult, length: int, truth: np.ndarray, counts: np.ndarray,
                        n_locations: int) -> dict:
    """Scores of P_length and of count queries from the DB after round ``length`` (module docstring)."""
    log = next((r for r in result.rounds if r.round == length and r.n_participants), None)
    published = log.candidates[log.admitted] if log is not None else np.empty((0, length), np.int64)
    return score(published, result.answer_count_queries(truth) if len(published) else None, truth, counts,
                 n_locations)


def score(published: np.ndarray, answers: np.ndarray | None, truth: np.ndarray, counts: np.ndarray,
          n_locations: int) -> dict:
    fsm = precision_recall_f1(published, truth, n_locations)
    if fsm is None:  # "inv" (footnote 10): nothing published, no FSM nor CQ score
        return {"inv": True, "n_published": 0, "n_truth": len(truth)}
    return {"inv": False, "precision": fsm.precision, "recall": fsm.recall, "f1": fsm.f1,
            "cq_error": median_relative_error(answers, counts), "n_published": fsm.n_published,
            "n_truth": fsm.n_truth}


def run_grid(points: pd.DataFrame, n: int, args: argparse.Namespace, methods: tuple[str, ...], seeds: int) -> dict:
    grid = square_grid(n)
    n_loc = grid.n_cells
    offsets, cells, mult0 = prepare(points, grid)
    replicas = max(1, args.clients // int(mult0.sum()))
    mult = mult0 * replicas
    n_clients = int(mult.sum())
    ks = [round(k / PAPER_N * n_clients) for k in PAPER_K]
    truth = {(length, k): frequent_fragments(offsets, cells, length, n_loc, k, mult) for length in LENGTHS
             for k in ks}
    info = {"grid": f"{n}x{n}", "n_locations": n_loc, "cell_size_m": grid.cell_size_m,
            "n_trajectories": int(mult0.sum()), "n_distinct": len(mult0), "replicas": replicas,
            "n_clients": n_clients, "mean_length": float(np.average(np.diff(offsets), weights=mult0)),
            "ks": ks, "gt_sizes": {f"l{length}_k{k}": len(truth[(length, k)][0]) for length in LENGTHS for k in ks}}
    print(f"[grid {n}x{n}] {info['n_trajectories']} trajectories ({len(mult0)} distinct), x{replicas} = "
          f"{n_clients} clients, mean length {info['mean_length']:.2f}", flush=True)
    rows, cleaning = [], []
    t_grid = time.perf_counter()
    for seed in range(seeds):
        for k in ks:
            if "fastpub" in methods:
                params = FastPubParams(k=k, l_max=5)
                t0 = time.perf_counter()
                result = fastpub(offsets, cells, n_loc, params, np.random.default_rng([seed, k, 0]), mult)
                elapsed = time.perf_counter() - t0
                for length in LENGTHS:
                    gt, cnt = truth[(length, k)]
                    rows.append({"method": "fastpub", "seed": seed, "k": k, "l": length, "seconds": elapsed / 3,
                                 **evaluate_fastpub_at(result, length, gt, cnt, n_loc)})
                cleaning.append(cleaning_stats(result, offsets, cells, mult, n_loc, k))
            for method in (m for m in methods if m != "fastpub"):
                if method == "sfp" and seed >= args.sfp_seeds:
                    continue
                for length in LENGTHS:
                    params = FastPubParams(k=k, l_max=length, method=method, sfp_rows=SFP_ROWS)
                    t0 = time.perf_counter()
                    result = fastpub(offsets, cells, n_loc, params, np.random.default_rng([seed, k, length]), mult)
                    elapsed = time.perf_counter() - t0
                    gt, cnt = truth[(length, k)]
                    answers = result.answer_count_queries(gt) if result.published else None
                    rows.append({"method": method, "seed": seed, "k": k, "l": length, "seconds": elapsed,
                                 **score(result.published_fragments, answers, gt, cnt, n_loc)})
        print(f"  seed {seed} done ({time.perf_counter() - t_grid:.0f} s)", flush=True)
    return {"info": info, "rows": rows, "cleaning": cleaning}


def cleaning_stats(result: FastPubResult, offsets, cells, mult, n_loc, k) -> dict:
    """Fig. 9's measures at round 4 (= the last round of an l_max = 4 run): cleaning ratio |R_4|/|C_4| before
    cleaning, and cleaning accuracy, the share of R_4 whose true count is < k."""
    log = next((r for r in result.rounds if r.round == 4), None)
    if log is None or log.n_apriori == 0:
        return {"k": k, "ratio": None, "accuracy": None}
    frequent = {tuple(f) for f in frequent_fragments(offsets, cells, 4, n_loc, k, mult)[0].tolist()}
    removed = [tuple(f) for f in log.removed.tolist()]
    accuracy = (sum(f not in frequent for f in removed) / len(removed)) if removed else None
    return {"k": k, "ratio": len(removed) / log.n_apriori, "accuracy": accuracy}


def summarise(rows: list[dict]) -> pd.DataFrame:
    """Per (method, l, k): mean ± sd over seeds of P/R/F1/CQ (inv runs excluded), and the inv count."""
    df = pd.DataFrame(rows)
    for col in ("precision", "recall", "f1", "cq_error"):
        if col not in df:
            df[col] = np.nan
    groups = df.groupby(["method", "l", "k"])
    out = groups[["precision", "recall", "f1", "cq_error", "n_published", "seconds"]].mean()
    out["f1_sd"] = groups["f1"].std()
    out["cq_sd"] = groups["cq_error"].std()
    out["n_runs"] = groups.size()
    out["n_inv"] = groups["inv"].sum()
    out["n_truth"] = groups["n_truth"].first()
    return out.reset_index()


def headline(summary: pd.DataFrame) -> dict:
    """Averages over the 15 settings, as the paper's §6.2–6.3 text; inv settings count as F1 = 0 in
    ``f1_inv0`` and are left out of the other averages."""
    out = {}
    for method, g in summary.groupby("method"):
        out[method] = {
            "precision": float(g["precision"].mean()), "recall": float(g["recall"].mean()),
            "f1": float(g["f1"].mean()), "f1_inv0": float(g["f1"].fillna(0).mean()),
            "cq_error": float(g["cq_error"].mean()), "n_settings_inv": int(g["precision"].isna().sum()),
        }
    if "fastpub" in out:
        for base in ("triehh", "sfp"):
            if base in out and out[base]["f1_inv0"] > 0:
                out[f"f1_ratio_vs_{base}"] = out["fastpub"]["f1_inv0"] / out[base]["f1_inv0"]
            if base in out and out[base]["cq_error"] > 0:
                out[f"cq_ratio_vs_{base}"] = out["fastpub"]["cq_error"] / out[base]["cq_error"]
    return out


def plot(name: str, summary: pd.DataFrame, info: dict) -> None:
    ks = info["ks"]
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5), sharey="row")
    width = 0.8 / len(summary["method"].unique())
    for col, length in enumerate(LENGTHS):
        for row, (metric, label) in enumerate((("f1", "F1"), ("cq_error", "median relative error"))):
            ax = axes[row, col]
            for i, method in enumerate(m for m in METHODS if m in set(summary["method"])):
                g = summary[(summary["method"] == method) & (summary["l"] == length)].set_index("k").reindex(ks)
                x = np.arange(len(ks)) + (i - 1) * width
                values = g[metric].to_numpy(dtype=float)
                sd = g["f1_sd" if metric == "f1" else "cq_sd"].to_numpy(dtype=float)
                ax.bar(x, np.nan_to_num(values), width, yerr=np.nan_to_num(sd), color=COLOURS[method],
                       label=LABELS[method], capsize=2)
                for xi, v in zip(x, values, strict=True):
                    if np.isnan(v):
                        ax.text(xi, 0.02, "inv", ha="center", va="bottom", fontsize=7, rotation=90)
            ax.set_xticks(np.arange(len(ks)), [f"{k / info['n_clients'] * 100:.2f}%" for k in ks], fontsize=8)
            ax.set_title(f"l = {length}", fontsize=10)
            if col == 0:
                ax.set_ylabel(label)
            if row == 1:
                ax.set_xlabel("k / N")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"T-Drive {info['grid']} grid, N = {info['n_clients']:,} clients: frequent fragments (top, "
                 "cf. Fig. 4) and count queries (bottom, cf. Fig. 5)", fontsize=10)
    fig.tight_layout()
    fig.savefig(OUT / f"{name}.png", dpi=110)
    plt.close(fig)


def timing(points: pd.DataFrame, n_clients: int, repeats: int) -> dict:
    """Wall time of FASTPub on 10^7 clients (8×8 grid, l_max = 5) with the exact aggregated simulation, and
    the per-client reference path's throughput on a small population for comparison."""
    grid = square_grid(8)
    offsets, cells, mult0 = prepare(points, grid)
    mult = mult0 * max(1, n_clients // int(mult0.sum()))
    params = FastPubParams(k=round(300_000 / PAPER_N * mult.sum()), l_max=5)
    times, rounds = [], None
    for r in range(repeats):
        t0 = time.perf_counter()
        result = fastpub(offsets, cells, grid.n_cells, params, np.random.default_rng(100 + r), mult)
        times.append(time.perf_counter() - t0)
        rounds = [x.metadata() for x in result.rounds]
    answered = sum(x["n_participants"] for x in rounds)
    # the per-client reference path (Algorithm 1 run client by client) on ≈ 20,000 clients, same k/N
    ref_mult = mult0 * 7
    ref_params = FastPubParams(k=round(300_000 / PAPER_N * ref_mult.sum()), l_max=5)
    population = InMemoryPopulation(offsets, cells, grid.n_cells, np.random.default_rng(1), ref_mult,
                                    per_client=True)
    t0 = time.perf_counter()
    ref = run_server(ref_params, population, grid.n_cells, np.random.default_rng(2))
    ref_seconds = time.perf_counter() - t0
    ref_answered = sum(r.n_participants for r in ref.rounds)
    rate = ref_answered / ref_seconds
    return {"n_clients": int(mult.sum()), "l_max": 5, "grid": "8x8", "k": params.k, "seconds": times,
            "median_seconds": float(np.median(times)), "answering_clients": answered, "rounds": rounds,
            "per_client_reference": {"n_clients": int(ref_mult.sum()), "answering_clients": ref_answered,
                                     "seconds": ref_seconds, "answering_clients_per_second": rate,
                                     "extrapolated_seconds_for_the_timed_run": answered / rate}}


def write_tables(results: dict) -> None:
    lines = ["# FASTPub bench: generated tables", "", f"Command: `{results['command']}`", "",
             f"Machine: {results['machine']}", ""]
    for name, grid in results["grids"].items():
        info = grid["info"]
        lines += [f"## {name}: {info['grid']} grid, N = {info['n_clients']:,}", "",
                  (f"{info['n_trajectories']} trajectories ({info['n_distinct']} distinct) × {info['replicas']}, "
                  f"mean length {info['mean_length']:.2f} cells; k = {info['ks']}"), "",
                  "| method | l | k | k/N | |GT| | precision | recall | F1 (sd) | CQ error (sd) | inv runs | s/run |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for _, r in pd.DataFrame(grid["summary"]).iterrows():
            lines.append(
                f"| {r['method']} | {r['l']} | {r['k']} | {r['k'] / info['n_clients'] * 100:.2f}% | "
                f"{int(r['n_truth'])} | {_f(r['precision'])} | {_f(r['recall'])} | {_f(r['f1'])} ({_f(r['f1_sd'])})"
                f" | {_f(r['cq_error'])} ({_f(r['cq_sd'])}) | {int(r['n_inv'])}/{int(r['n_runs'])} | "
                f"{r['seconds']:.1f} |")
        lines += ["", "Averages over the 15 settings:", "", "```", json.dumps(grid["headline"], indent=1), "```",
                  "", "Markov cleaning at round 4 (cf. Fig. 9): " + json.dumps(grid["cleaning_mean"]), ""]
    lines += ["## Timing", "", "```", json.dumps(results["timing"], indent=1), "```", ""]
    (OUT / "results.md").write_text("\n".join(lines))


def _f(x) -> str:
    return "—" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.3f}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=10_000_000, help="N ≈ this many simulated clients")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per setting for FASTPub and TrieHH")
    ap.add_argument("--sfp-seeds", type=int, default=1, help="seeds per setting for SFP (the slowest)")
    ap.add_argument("--grids", default="4,8,16", help="grid sizes n (n×n cells)")
    ap.add_argument("--fine-seeds", type=int, default=1, help="seeds on grids finer than 8×8")
    ap.add_argument("--timing-repeats", type=int, default=3)
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    points = load_tdrive()
    results = {"command": " ".join(["python -m bench.fastpub", *(argv if argv is not None else sys.argv[1:])]),
               "machine": machine(), "grids": {}}
    for n in (int(x) for x in args.grids.split(",")):
        fine = n > 8
        methods = ("fastpub", "triehh") if fine else METHODS
        out = run_grid(points, n, args, methods, args.fine_seeds if fine else args.seeds)
        summary = summarise(out["rows"])
        cleaning = pd.DataFrame(out["cleaning"])
        name = f"grid{n}"
        results["grids"][name] = {
            "info": out["info"], "summary": summary.to_dict(orient="records"), "headline": headline(summary),
            "cleaning_mean": {str(k): {"ratio": _mean(g["ratio"]), "accuracy": _mean(g["accuracy"])}
                              for k, g in cleaning.groupby("k")},
            "rows": out["rows"],
        }
        plot(name, summary, out["info"])
        print(json.dumps(results["grids"][name]["headline"], indent=1), flush=True)
    results["timing"] = timing(points, args.clients, args.timing_repeats)
    results["total_seconds"] = time.perf_counter() - t_start
    print(f"timing: {results['timing']['median_seconds']:.2f} s for {results['timing']['n_clients']:,} clients; "
          f"total {results['total_seconds']:.0f} s", flush=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=1, default=float))
    write_tables(results)


def _mean(series: pd.Series) -> float | None:
    values = pd.to_numeric(series, errors="coerce").dropna()
    return float(values.mean()) if len(values) else None


if __name__ == "__main__":
    main()
