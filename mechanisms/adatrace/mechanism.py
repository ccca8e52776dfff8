"""AdaTrace end to end on in-memory data (tests, notebooks); the flow adapter runs the same steps on Dask."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms.adatrace.counting import Trajectories, feature_counts, top_density
from mechanisms.adatrace.params import AdaTraceParams
from mechanisms.adatrace.resilience import LocalOracle, RawOracle, SyntheticSet, apply_resilience, fresh
from mechanisms.adatrace.synopsis import (
    Synopsis,
    adaptive_grid,
    noisy_synopsis,
    noisy_top_density,
    top_grid,
)


@dataclass(frozen=True)
class AdaTraceResult:
    """The synthetic points (``traj_id`` 1.., ``seq``, ``leaf``, ``x``, ``y``), the synopsis they come from and a
    JSON-safe report (no seed, no raw count)."""

    points: pd.DataFrame
    synopsis: Synopsis
    report: dict


def synthetic_points(synthetic: SyntheticSet) -> pd.DataFrame:
    lengths = np.diff(synthetic.offsets)
    return pd.DataFrame({
        "traj_id": np.repeat(np.arange(1, synthetic.n + 1), lengths),
        "seq": np.arange(len(synthetic.leaves)) - np.repeat(synthetic.offsets[:-1], lengths),
        "leaf": synthetic.leaves, "x": synthetic.x, "y": synthetic.y,
    })


def release(syn: Synopsis, rng: np.random.Generator, oracle: RawOracle | None = None) -> AdaTraceResult:
    """Synthesis (and, when ``params.attack_resilience``, the three checks, with ``oracle`` answering the raw
    questions) from a synopsis."""
    params = syn.params
    n = syn.n_synthetic()
    synthetic = fresh(syn, n, rng)
    report: dict = {"n_synthetic_target": n, "n_synthetic_source": "public" if params.n_synthetic is not None
                    else "noisy count"}
    if params.attack_resilience:
        if params.resilience_reads_raw and oracle is None:
            raise ValueError("the raw-data resilience checks need an oracle on the raw data")
        synthetic, res = apply_resilience(syn, synthetic, oracle if params.resilience_reads_raw else None, n, rng)
        report["resilience"] = res
    return AdaTraceResult(synthetic_points(synthetic), syn, {**report, **syn.metadata()})


def sanitize(points: pd.DataFrame, extent: tuple[float, float, float, float], params: AdaTraceParams,
             rng: np.random.Generator) -> AdaTraceResult:
    """AdaTrace on a frame of ``traj_id, seq, x, y`` (metres) inside the public ``extent``."""
    trajs = Trajectories.from_frame(points)
    noisy_top = noisy_top_density(top_density(trajs, top_grid(extent, params)), params, rng)
    grid = adaptive_grid(extent, noisy_top, params)
    counts = feature_counts(trajs, grid, params.transition_cap, params.max_length)
    syn = noisy_synopsis(grid, noisy_top, counts, params, rng)
    return release(syn, rng, LocalOracle(trajs) if params.reads_raw_after_synopsis else None)
