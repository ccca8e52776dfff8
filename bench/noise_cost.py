"""The cost of the hardened noise (:mod:`trajpub.noise`): ``python -m bench.noise_cost [--label L]``.

Per-draw times of ``noise.laplace`` (one large call and many small ones) and the exponential mechanism, and the
wall time of the three DP mechanisms on the cleaned T-Drive sample (prefix tree, DPT, AdaTrace at their defaults,
ε = 1; in memory, no Dask), median of ``--repeat`` runs. Run it once on this tree and once, with the same
interpreter, on the tree before the hardening (``PYTHONPATH=<old tree>``) to compare; bench/NOISE_RESULTS.md
records both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from bench.fgs_pufferfish import machine
from bench.tdrive import GRID, load_clean, prepare
from mechanisms import adatrace, dpt, prefix_tree
from trajpub import noise
from trajpub.segment import cell_sequences


def _dpt(frame, rng):
    """DPT on one in-memory frame, as its adapter runs it on one partition."""
    params = dpt.DptParams(epsilon=1.0)
    hierarchy = dpt.hierarchy_of(GRID, params)
    dpt.check_model_size(hierarchy, params)
    return dpt.synthesize(dpt.count_points(frame, hierarchy, params), hierarchy, GRID, params, rng)


def _median_seconds(fn, repeat: int) -> float:
    times = []
    for i in range(repeat):
        rng = np.random.default_rng(i)
        t0 = time.perf_counter()
        fn(rng)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def per_draw(repeat: int) -> dict:
    big = 1_000_000
    scores = -np.abs(np.arange(100) - 40.0)
    return {
        "laplace_1e6_us_per_draw": 1e6 * _median_seconds(lambda r: noise.laplace(2.0, big, r), repeat) / big,
        "laplace_100x_size10_us_per_call": 1e6 * _median_seconds(
            lambda r: [noise.laplace(2.0, 10, r) for _ in range(100)], repeat) / 100,
        "exponential_1e4x100_us_per_draw": 1e6 * _median_seconds(
            lambda r: noise.exponential_mechanism(np.tile(scores, (10_000, 1)), 1.0, 1.0, r), repeat) / 10_000,
    }


def mechanisms(repeat: int) -> dict:
    raw = prepare(load_clean()[0])
    _, offsets, cells = cell_sequences(raw)
    frame = raw[["traj_id", "seq", "cell"]]
    xy = raw[["traj_id", "seq", "x", "y"]]
    extent = GRID.extent
    return {
        "records": int(raw["traj_id"].nunique()), "points": len(raw),
        "prefix_tree_s": _median_seconds(lambda r: prefix_tree.sanitize(
            offsets, cells, GRID.n_cells, prefix_tree.PrefixTreeParams(epsilon=1.0), r), repeat),
        "dpt_s": _median_seconds(lambda r: _dpt(frame, r), repeat),
        "adatrace_s": _median_seconds(lambda r: adatrace.sanitize(
            xy, extent, adatrace.AdaTraceParams(epsilon=1.0), r), repeat),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="hardened")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(json.dumps({"label": args.label, "machine": machine(), **per_draw(args.repeat),
                      **mechanisms(args.repeat)}))


if __name__ == "__main__":
    main()
