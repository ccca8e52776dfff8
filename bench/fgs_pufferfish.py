"""Reproduce the comparisons of Ou et al. (2018), FGS-Pufferfish against CTS: ``python -m bench.fgs_pufferfish``.

Paper §VIII; our choices in docs/design.md (FGS-Pufferfish). Pure: no database, no Prefect, no Dask.

Sections:

``sim_a``  the paper's simulated data, literal reading: 9 users x 1 day of an AR(1) series with N = 32 slots and
           tau_c = 4 (shared), no centring, single-day (ergodic) correlation (§VIII-A.2a).
``sim_b``  9 users x 62 days, tau_c,m = m (users differ), centred like real data (variant b).
``tdrive`` real taxis (T-Drive sample, Beijing local days, N = 48), taxis with at least 2 valid days.
``geolife`` real GeoLife users (2), N = 48, days kept with gaps up to 10 h (loggers are off at night).
``throughput`` 300 objects x 7 days x 48 slots (synthetic) and the real T-Drive sample, timed.

For every noise level sigma_L (the location noise standard deviation per slot, the paper's U = sigma_L):
FGS (Eq. 11 scales, p = 0.2, w = 0.9, I = N), CTS (correlated Laplace, not from the paper) and FPA_5 (not from the
paper) release every user ``--realizations`` times. epsilon_hat is the plug-in estimate of docs/design.md,
FGS-Pufferfish (per-day
circular C', moment scale, pooled min scale), the same estimator for every method; FGS also gets the paper's
analytic epsilon (Thm 4). The "floor" is epsilon_hat between two halves of one user's realizations: the
resolution of epsilon_hat at this R (differences below it are Monte-Carlo noise). RMSE is the error of the
released series against the raw centred series, truncation included.

Outputs: ``bench/fgs/*.png``, ``bench/fgs/results.json`` and ``bench/fgs/results.md`` (tables);
``bench/FGS_RESULTS.md`` is the curated record with the written comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from mechanisms.fgs_pufferfish import (
    FgsParams,
    analytic_epsilon,
    ar1_series,
    centre_days,
    correlation_stats,
    empirical_epsilon,
    noisy_correlations,
    object_correlation,
    prepare,
    release_object,
)
from trajpub import config
from trajpub.grid import GridSpec

OUT = Path(__file__).resolve().parent / "fgs"
DATA = config.SHARED_DATA_DIR
BEIJING = GridSpec((115.4, 39.4, 117.6, 41.1), 1000.0)
METHODS = ("fgs", "cts", "fpa")
LABELS = {"fgs": "FGS (paper)", "cts": "CTS (not from paper)", "fpa": "FPA_5 (not from paper)"}
COLOURS = {"fgs": "C0", "cts": "C3", "fpa": "C2"}


def machine() -> dict:
    cpu = "unknown"
    if Path("/proc/cpuinfo").exists():
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kb = 0
    if Path("/proc/meminfo").exists():
        mem_kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
    return {"nproc": os.cpu_count(), "ram_gb": round(mem_kb / 1024**2, 1), "cpu": cpu,
            "python": platform.python_version(), "numpy": np.__version__, "date": datetime.now(UTC).isoformat()}


def method_params(base: dict, method: str, sigma: float) -> FgsParams:
    extra = {"fpa_k": 5} if method == "fpa" else {}
    return FgsParams(**base, method=method, location_std_m=float(sigma), **extra)


def evaluate(users: list[np.ndarray], base: dict, sigmas: np.ndarray, realizations: int, seed: int) -> dict:
    """For each method and sigma_L: epsilon_hat (x, y), its floor, RMSE, and for FGS the analytic epsilon."""
    rng = np.random.default_rng(seed)
    out: dict = {"sigma": sigmas.tolist()}
    fgs_probe = method_params(base, "fgs", 1.0)
    correlations = np.stack([object_correlation(d, fgs_probe) for d in users])
    analytic = [analytic_epsilon(correlations, method_params(base, "fgs", s)) for s in sigmas]
    out["fgs_analytic"] = [[a.epsilon_x, a.epsilon_y] for a in analytic]
    for method in METHODS:
        rows = []
        for sigma in sigmas:
            params = method_params(base, method, sigma)
            stats: dict[str, list] = {k: [] for k in ("day", "day_a", "day_b", "ens", "ens_a", "ens_b")}
            sq_err, n_err = 0.0, 0
            for days in users:
                samples = noisy_correlations(days, params, rng, n_realizations=realizations)
                # realization-major order: the ensemble C' of realization r is the mean over its D days
                # (docs/design.md, G10)
                ensemble = samples.reshape(realizations, len(days), *samples.shape[1:]).mean(axis=1)
                for name, values in (("day", samples), ("ens", ensemble)):
                    half = len(values) // 2
                    stats[name].append(correlation_stats(values))
                    stats[f"{name}_a"].append(correlation_stats(values[:half]))
                    stats[f"{name}_b"].append(correlation_stats(values[half:]))
                reps = 20
                released, _ = release_object(np.tile(days, (reps, 1, 1)), params, rng)
                centred, _ = centre_days(days, params.centre)
                sq_err += float(((released.deviation - np.tile(centred, (reps, 1, 1))) ** 2).sum())
                n_err += released.deviation.size
            row = {"sigma": float(sigma), "rmse": float(np.sqrt(sq_err / n_err))}
            for name, key in (("day", ""), ("ens", "_ensemble")):
                eps = empirical_epsilon(stats[name])
                floors = [empirical_epsilon([a, b]) for a, b in zip(stats[f"{name}_a"], stats[f"{name}_b"],
                                                                    strict=True)]
                row[f"eps_hat{key}"] = [eps.epsilon_x, eps.epsilon_y]
                row[f"floor{key}"] = [max(f.epsilon_x for f in floors), max(f.epsilon_y for f in floors)]
            rows.append(row)
        out[method] = rows
    return out


def c0_histogram(days: np.ndarray, base: dict, sigma: float, realizations: int, seed: int) -> dict:
    """Samples of the noisy lag-0 correlation C'_0 of one user (x), FGS and CTS at the same sigma_L (Fig. 2)."""
    rng = np.random.default_rng(seed)
    out = {}
    for method in ("fgs", "cts"):
        samples = noisy_correlations(days, method_params(base, method, sigma), rng, n_realizations=realizations)
        out[method] = samples[:, :, 0]
    return out


def skewness(x: np.ndarray) -> float:
    c = x - x.mean()
    return float((c**3).mean() / (c**2).mean() ** 1.5)


def plot_histograms(hist: dict, title: str, path: Path, coords: tuple[int, ...] = (0,)) -> dict:
    fig, axes = plt.subplots(1, len(coords), figsize=(4.6 * len(coords), 3.3), squeeze=False)
    skews = {}
    for ax, c in zip(axes[0], coords, strict=True):
        for method in ("fgs", "cts"):
            values = hist[method][:, c]
            key = f"{method}_{'xy'[c]}"
            skews[key] = skewness(values)
            lo, hi = np.quantile(np.concatenate([hist[m][:, c] for m in ("fgs", "cts")]), [0.001, 0.995])
            ax.hist(values, bins=80, range=(lo, hi), density=True, histtype="step", color=COLOURS[method],
                    label=f"{LABELS[method]}, skew {skews[key]:.2f}")
        ax.set_xlabel(f"C'_0 ({'xy'[c]})")
        ax.set_ylabel("density")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return skews


def plot_tradeoff(res: dict, title: str, path: Path, unit: str, coords: tuple[int, ...] = (0,),
                  ensemble: bool = True) -> None:
    """epsilon against sigma_L (Figs. 3/7/8) and against RMSE (total location error), per coordinate."""
    fig, axes = plt.subplots(len(coords), 2, figsize=(9.2, 3.3 * len(coords)), squeeze=False)
    sigma = np.array(res["sigma"])
    for row, c in enumerate(coords):
        for col, xkey in enumerate(("sigma", "rmse")):
            ax = axes[row][col]
            fgs_x = sigma if xkey == "sigma" else np.array([r["rmse"] for r in res["fgs"]])
            ax.plot(fgs_x, [e[c] for e in res["fgs_analytic"]], "o--", color=COLOURS["fgs"], mfc="none",
                    label="FGS analytic (Thm 4)")
            for method in METHODS:
                xs = sigma if xkey == "sigma" else np.array([r["rmse"] for r in res[method]])
                ax.plot(xs, [r["eps_hat"][c] for r in res[method]], "o-", color=COLOURS[method],
                        label=f"{LABELS[method]} empirical")
            if ensemble:
                for method in ("fgs", "cts"):
                    xs = sigma if xkey == "sigma" else np.array([r["rmse"] for r in res[method]])
                    ax.plot(xs, [r["eps_hat_ensemble"][c] for r in res[method]], "x-.", color=COLOURS[method],
                            lw=0.8, label=f"{method.upper()} empirical, ensemble C'")
            ax.plot(sigma if xkey == "sigma" else fgs_x, [r["floor"][c] for r in res["fgs"]], ":",
                    color="grey", label="empirical floor (MC resolution)")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(("sigma_L, noise std per slot" if xkey == "sigma" else "RMSE vs raw (incl. truncation)")
                          + f" [{unit}]")
            ax.set_ylabel(f"epsilon_{'xy'[c]}")
            ax.grid(alpha=0.3, which="both")
            if row == 0 and col == 0:
                ax.legend(fontsize=6.5)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


TDRIVE_SAMPLE = DATA / "tdrive_sample_odd_taxis.csv.gz"


def load_tdrive(path: Path = TDRIVE_SAMPLE) -> pd.DataFrame:
    """A T-Drive CSV in the bundled sample's format (``taxi_id,datetime,longitude,latitude``, Beijing time), UTC."""
    d = pd.read_csv(path)
    t = pd.to_datetime(d["datetime"]).dt.tz_localize("Asia/Shanghai").dt.tz_convert("UTC")
    return pd.DataFrame({"object_id": d["taxi_id"].astype(str), "t": t, "lon": d["longitude"],
                         "lat": d["latitude"]})


def load_geolife() -> pd.DataFrame:
    g = pd.read_csv(DATA / "skmob_geolife_sample.txt.gz")
    return pd.DataFrame({"object_id": g["uid"].astype(str), "t": pd.to_datetime(g["datetime"], utc=True),
                         "lon": g["lng"], "lat": g["lat"]})


def throughput(points: pd.DataFrame, repeats: int) -> dict:
    """300 x 7 x 48 release (synthetic commuters) and the real T-Drive sample: prepare, release, epsilon."""
    params = FgsParams(n_slots=48, location_std_m=200.0, day_timezone="Asia/Shanghai")
    rng = np.random.default_rng(5)
    phase = 2 * np.pi * (np.arange(48) + 0.5) / 48
    homes = rng.normal(0, 8000, size=(300, 1, 1, 2))
    shape = np.stack([4000 * np.sin(phase), 3000 * (1 - np.cos(phase))], axis=-1)
    synthetic = homes + shape + rng.normal(0, 200, size=(300, 7, 48, 2)).cumsum(axis=2)

    def release_all(objects: list[np.ndarray]) -> None:
        for days, g in zip(objects, np.random.default_rng(6).spawn(len(objects)), strict=True):
            release_object(days, params, g)

    def accounting(objects: list[np.ndarray]) -> None:
        analytic_epsilon(np.stack([object_correlation(d, params) for d in objects]), params)

    def timed(fn, *args) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    objects = list(synthetic)
    prep_t = timed(prepare, points, BEIJING, params)
    prepared = prepare(points, BEIJING, params)
    real = [days for _, _, days in prepared.objects()]
    return {
        "synthetic": {"objects": 300, "days": 7, "slots": 48,
                      "release_s": timed(release_all, objects), "epsilon_s": timed(accounting, objects)},
        "tdrive": {"points": len(points), "prepare_s": prep_t, "objects": len(real),
                   "object_days": int(sum(len(d) for d in real)),
                   "release_s": timed(release_all, real), "epsilon_s": timed(accounting, real)},
        "repeats": repeats,
    }


def table(res: dict, coord: int, unit: str) -> str:
    lines = [(f"| sigma_L [{unit}] | FGS analytic | FGS emp. | CTS emp. | FPA_5 emp. | floor | FGS emp. ens. | "
              "CTS emp. ens. | floor ens. | RMSE FGS | RMSE CTS | RMSE FPA_5 |"), "|---" * 12 + "|"]
    for i, sigma in enumerate(res["sigma"]):
        f, c, p = res["fgs"][i], res["cts"][i], res["fpa"][i]
        floor = max(r["floor"][coord] for r in (f, c, p))
        floor_ens = max(r["floor_ensemble"][coord] for r in (f, c))
        lines.append(f"| {sigma:.4g} | {res['fgs_analytic'][i][coord]:.3g} | {f['eps_hat'][coord]:.3g} | "
                     f"{c['eps_hat'][coord]:.3g} | {p['eps_hat'][coord]:.3g} | {floor:.3g} | "
                     f"{f['eps_hat_ensemble'][coord]:.3g} | {c['eps_hat_ensemble'][coord]:.3g} | "
                     f"{floor_ens:.3g} | {f['rmse']:.3g} | {c['rmse']:.3g} | {p['rmse']:.3g} |")
    return "\n".join(lines)


def orderings(res: dict, coord: int, key: str = "") -> dict:
    """The paper's orderings (§VIII): FGS below CTS at equal sigma_L (same estimator), and monotone curves."""
    fgs = np.array([r[f"eps_hat{key}"][coord] for r in res["fgs"]])
    cts = np.array([r[f"eps_hat{key}"][coord] for r in res["cts"]])
    floor = np.array([max(r[f"floor{key}"][coord], s[f"floor{key}"][coord])
                      for r, s in zip(res["fgs"], res["cts"], strict=True)])
    resolved = np.abs(fgs - cts) > floor
    return {
        "fgs_below_cts": int(np.sum(fgs < cts)), "of": len(fgs),
        "fgs_below_cts_where_resolved": int(np.sum((fgs < cts) & resolved)), "resolved": int(resolved.sum()),
        "fgs_monotone": bool(np.all(np.diff(fgs) <= 0)), "cts_monotone": bool(np.all(np.diff(cts) <= 0)),
        "fgs_analytic_monotone": bool(np.all(np.diff([e[coord] for e in res["fgs_analytic"]]) < 0)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer realizations (a smoke run, ~1 min)")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    OUT.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict = {"machine": machine(), "command": "python -m bench.fgs_pufferfish" + (" --quick" * args.quick)}
    rng = np.random.default_rng(2018)

    # Simulated, variant (a): 9 users x 1 day, tau_c = 4, no centring (§VIII-A.2a).
    base_a = {"n_slots": 32, "centre": False, "min_days": 1}
    users_a = [np.moveaxis(ar1_series((1, 2), 32, 4.0, rng), 1, -1) for _ in range(9)]
    sig_a = np.geomspace(0.1, 3.0, 8)
    results["sim_a"] = evaluate(users_a, base_a, sig_a, int(20000 * scale), 1)
    hist_a = c0_histogram(users_a[0], base_a, 0.5, int(100_000 * scale), 2)
    results["sim_a"]["skew"] = plot_histograms(hist_a, "Fig. 2 analogue: Pr(C'_0), simulated (a), user 1, "
                                               "sigma_L = 0.5", OUT / "sim_a_c0_hist.png")
    plot_tradeoff(results["sim_a"], "Figs. 3/4 analogue: simulated AR(1), 9 users x 1 day, N = 32, tau_c = 4",
                  OUT / "sim_a_epsilon.png", "data std", ensemble=False)
    print(f"sim_a done {time.perf_counter() - started:.0f}s", flush=True)

    # Simulated, variant (b): 9 users x 62 days, tau_c,m = m, centred.
    base_b = {"n_slots": 32}
    users_b = [np.moveaxis(ar1_series((62, 2), 32, float(m), rng), 1, -1) for m in range(1, 10)]
    results["sim_b"] = evaluate(users_b, base_b, sig_a, int(300 * scale), 3)
    plot_tradeoff(results["sim_b"], "Simulated AR(1), 9 users x 62 days, tau_c,m = m, centred",
                  OUT / "sim_b_epsilon.png", "data std")
    print(f"sim_b done {time.perf_counter() - started:.0f}s", flush=True)

    # Real: T-Drive.
    tdrive_points = load_tdrive()
    params_t = FgsParams(n_slots=48, day_timezone="Asia/Shanghai", location_std_m=1.0)
    prep_t = prepare(tdrive_points, BEIJING, params_t)
    users_t = [days for _, _, days in prep_t.objects()]
    results["tdrive_prepare"] = prep_t.summary()
    sig_m = np.geomspace(50.0, 50_000.0, 7)
    base_t = {"n_slots": 48, "day_timezone": "Asia/Shanghai"}
    results["tdrive"] = evaluate(users_t, base_t, sig_m, int(300 * scale), 4)
    hist_t = c0_histogram(users_t[0], base_t, 500.0, int(20_000 * scale), 5)
    results["tdrive"]["skew"] = plot_histograms(hist_t, "Figs. 5/6 analogue: Pr(C'_0), T-Drive taxi, "
                                                "sigma_L = 500 m", OUT / "tdrive_c0_hist.png", (0, 1))
    plot_tradeoff(results["tdrive"], f"Figs. 7-10 analogue: T-Drive, {len(users_t)} taxis, "
                  f"{sum(len(u) for u in users_t)} days, N = 48", OUT / "tdrive_epsilon.png", "m", (0, 1))
    print(f"tdrive done {time.perf_counter() - started:.0f}s", flush=True)

    # Real: GeoLife (2 users); loggers are off at night, so gaps up to 10 h are interpolated (held).
    params_g = FgsParams(n_slots=48, day_timezone="Asia/Shanghai", max_gap_minutes=600.0, location_std_m=1.0)
    prep_g = prepare(load_geolife(), BEIJING, params_g)
    users_g = [days for _, _, days in prep_g.objects()]
    results["geolife_prepare"] = prep_g.summary()
    base_g = {"n_slots": 48, "day_timezone": "Asia/Shanghai", "max_gap_minutes": 600.0}
    results["geolife"] = evaluate(users_g, base_g, sig_m, int(1000 * scale), 6)
    plot_tradeoff(results["geolife"], f"GeoLife, {len(users_g)} users, {sum(len(u) for u in users_g)} days, "
                  "N = 48", OUT / "geolife_epsilon.png", "m", (0, 1))
    print(f"geolife done {time.perf_counter() - started:.0f}s", flush=True)

    results["throughput"] = throughput(tdrive_points, 3 if args.quick else 5)
    results["orderings"] = {
        f"{name}{key or '_per_day'}": [orderings(results[name], c, key) for c in ((0,) if name.startswith("sim")
                                                                                  else (0, 1))]
        for name in ("sim_a", "sim_b", "tdrive", "geolife") for key in ("", "_ensemble")}
    results["elapsed_s"] = time.perf_counter() - started
    (OUT / "results.json").write_text(json.dumps(results, indent=1))
    md = [f"# FGS bench tables ({results['machine']['date']})", "", f"Command: `{results['command']}`", ""]
    for name, unit, coords in (("sim_a", "data std", (0,)), ("sim_b", "data std", (0,)),
                               ("tdrive", "m", (0, 1)), ("geolife", "m", (0, 1))):
        for c in coords:
            md += [f"## {name}, {'xy'[c]}", "", table(results[name], c, unit), ""]
    md += ["## orderings (the paper's claims, §VIII)", "", "```", json.dumps(results["orderings"], indent=1), "```", "",
           "## throughput", "", "```", json.dumps(results["throughput"], indent=1), "```", ""]
    (OUT / "results.md").write_text("\n".join(md))
    print(json.dumps({"throughput": results["throughput"], "orderings": results["orderings"],
                      "elapsed_s": results["elapsed_s"]}, indent=1))


if __name__ == "__main__":
    main()
