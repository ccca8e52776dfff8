"""The neighbouring pairs on which the DP audit (:mod:`audits.dp_scenarios`) tests the claim of
AdaTrace (Gursoy et al. 2018): ε-DP per trajectory record
(:mod:`trajpub.dp_scenario` says how a pair is chosen and what is measured)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.adatrace import (
    AdaTraceParams,
    Trajectories,
    adaptive_grid,
    feature_counts,
    noisy_synopsis,
    noisy_top_density,
    top_density,
    top_grid,
)
from trajpub.dp_scenario import N_OBJECTS, RECORDS, Run, Scenario, batched, record_level

_ADA_TILE, _ADA_TILES = 4000.0, 8  # a batch: 8 × 8 tiles of 4 km, each a 2 × 2 top grid


def _ada_base() -> list[np.ndarray]:
    """N_OBJECTS walks of 5 points in the lower-left top cell of a 4 km tile (metres)."""
    rng = np.random.default_rng(20181)
    return [np.clip(rng.uniform(100, 1900, 2) + np.cumsum(rng.normal(0, 150, (5, 2)), axis=0), 1, 1999)
            for _ in range(N_OBJECTS)]


def _adatrace_run(extra_kind: str) -> Run:
    """Trip counts on 90 % of ε. The extra trajectory (two fixes at one point) is a trip from the outlier top
    cell to itself, or repeats the first walk's start ("duplicate"). A batch is one synopsis over 8 × 8 tiles
    (top level 16), each tile a copy of the dataset: every trip count gets its own noise, of a scale that does
    not depend on the extent, so the tiles' counts are independent runs."""
    base = _ada_base()
    point = base[0][0] if extra_kind == "duplicate" else np.array([3500.0, 3500.0])
    datasets = (base, base + [np.array([point, point])] * (RECORDS if extra_kind == "max" else 1))
    level = 2 * _ADA_TILES
    extent = (0.0, 0.0, _ADA_TILE * _ADA_TILES, _ADA_TILE * _ADA_TILES)
    tiles = np.array([(i, j) for j in range(_ADA_TILES) for i in range(_ADA_TILES)], dtype=float) * _ADA_TILE
    frames = []
    for walks in datasets:
        xy = np.concatenate([w + t for t in tiles for w in walks])
        lengths = np.array([len(w) for _ in tiles for w in walks])
        frames.append(pd.DataFrame({"traj_id": np.repeat(np.arange(len(lengths)), lengths),
                                    "seq": np.concatenate([np.arange(k) for k in lengths]),
                                    "x": xy[:, 0], "y": xy[:, 1]}))
    top = ((tiles[:, 1] + point[1]) // (_ADA_TILE / 2)).astype(np.int64) * level \
        + ((tiles[:, 0] + point[0]) // (_ADA_TILE / 2)).astype(np.int64)
    trip = top * level ** 2 + top

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        params = AdaTraceParams(epsilon=epsilon, top_level=level, max_subdivision=2, max_length=10,
                                n_synthetic=1, budget_split=(0.04, 0.03, 0.9, 0.03))
        trajs = Trajectories.from_frame(frames[which])
        true_top = top_density(trajs, top_grid(extent, params))

        def call(r: int) -> np.ndarray:
            noisy_top = noisy_top_density(true_top, params, rng)
            grid = adaptive_grid(extent, noisy_top, params)
            counts = feature_counts(trajs, grid, params.transition_cap, params.max_length)
            return noisy_synopsis(grid, noisy_top, counts, params, rng).noisy_trips.ravel()[trip[:r]]

        return batched(n, len(tiles), call)

    return run


def scenarios() -> list[Scenario]:
    return record_level("adatrace", _adatrace_run("outlier"), _adatrace_run("duplicate"), _adatrace_run("max"))
