"""DPT's two halves: :func:`count_points` next to the data (one partition at a time; the partitions' counts are
summed with :func:`~mechanisms.dpt.counting.merge_counts`), and :func:`synthesize` from the summed counts only
(noise, model selection, sampling, the released points).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms.dpt.counting import DptCounts, count_discretised
from mechanisms.dpt.model import NoisyModel, fit
from mechanisms.dpt.params import DptParams
from mechanisms.dpt.reference import Hierarchy, discretise
from mechanisms.dpt.synthesis import Synthetic, synthesize_from_model
from trajpub.grid import GridSpec


def hierarchy_of(grid: GridSpec, params: DptParams) -> Hierarchy:
    """The reference systems over the release grid (public)."""
    return Hierarchy(grid.n_cols, grid.n_rows, params.n_levels)


def count_points(points: pd.DataFrame, hierarchy: Hierarchy, params: DptParams) -> DptCounts:
    """True counts of one partition: ``points`` has ``traj_id, seq, cell`` (cell −1 = outside the grid, dropped)."""
    df = points.loc[points["cell"] >= 0, ["traj_id", "seq", "cell"]].sort_values(["traj_id", "seq"], kind="stable")
    disc = discretise(df["traj_id"].to_numpy(), df["cell"].to_numpy(), hierarchy, params.max_transitions,
                      params.jump_tolerance)
    return count_discretised(disc, hierarchy.n_levels, [hierarchy.n_cells(k) for k in range(hierarchy.n_levels)],
                             params.max_height)


def to_points(synth: Synthetic, hierarchy: Hierarchy, grid: GridSpec) -> pd.DataFrame:
    """Released points ``traj_id, seq, cell, t (NaT), lon, lat, x, y``: each synthetic cell's position is the
    centre of its system cell (the block of 2**k × 2**k base cells, clipped to the grid); ``cell`` is the base
    grid cell of that position."""
    lengths = np.diff(synth.offsets)
    n = len(synth.cells)
    traj_id = np.repeat(np.arange(1, len(lengths) + 1, dtype=np.int64), lengths)
    seq = np.arange(n, dtype=np.int64) - np.repeat(synth.offsets[:-1], lengths)
    col_c, row_c = np.empty(n), np.empty(n)
    lvl = np.repeat(synth.level, lengths)
    for k in np.unique(lvl):
        sel = lvl == k
        col_c[sel], row_c[sel] = hierarchy.block_centre(int(k), synth.cells[sel])
    s = grid.cell_size_m
    cx0, cy0 = grid.project(*grid.cell_centre(np.array([0])))
    x = cx0[0] - s / 2 + col_c * s if n else np.empty(0)
    y = cy0[0] - s / 2 + row_c * s if n else np.empty(0)
    lon, lat = grid.unproject(x, y) if n else (np.empty(0), np.empty(0))
    cell = grid.cell_of(x, y) if n else np.empty(0, np.int64)
    return pd.DataFrame({
        "traj_id": traj_id, "seq": seq, "cell": np.asarray(cell, dtype=np.int64),
        "t": pd.Series(pd.NaT, index=range(n), dtype="datetime64[ns, UTC]"),
        "lon": lon, "lat": lat, "x": x, "y": y,
    })


@dataclass(frozen=True, eq=False)
class DptResult:
    """The noisy model and the synthetic trajectories drawn from it."""

    model: NoisyModel
    synthetic: Synthetic
    points: pd.DataFrame


def synthesize(counts: DptCounts, hierarchy: Hierarchy, grid: GridSpec, params: DptParams,
               rng: np.random.Generator) -> DptResult:
    """DPT from the true counts of all the data (``hierarchy`` over ``grid``): noise, select, sample."""
    model = fit(counts, hierarchy, params, rng)
    synth = synthesize_from_model(model, rng)
    return DptResult(model, synth, to_points(synth, hierarchy, grid))
