"""The neighbouring pairs on which the DP audit (:mod:`audits.dp_scenarios`) tests the claim of
DPT (He et al. 2015): ε-DP per trajectory record
(:mod:`trajpub.dp_scenario` says how a pair is chosen and what is measured)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.dpt import DptParams, Hierarchy, fit
from mechanisms.dpt.mechanism import count_points
from trajpub.dp_scenario import N_OBJECTS, RECORDS, Run, Scenario, batched, record_level

_DPT_COLS, _DPT_ROWS, _DPT_BATCH = 8, 6, 1000


def _dpt_base() -> list[list[tuple[int, int]]]:
    """N_OBJECTS random walks of 4 fixes, (col, row), in the left half of an 8 × 6 grid."""
    rng = np.random.default_rng(20151)
    walks = []
    for _ in range(N_OBJECTS):
        c, r = int(rng.integers(0, _DPT_COLS // 2)), int(rng.integers(0, _DPT_ROWS))
        walk = []
        for _ in range(4):
            walk.append((c, r))
            c = int(np.clip(c + rng.integers(-1, 2), 0, _DPT_COLS // 2 - 1))
            r = int(np.clip(r + rng.integers(-1, 2), 0, _DPT_ROWS - 1))
        walks.append(walk)
    return walks


def _dpt_run(extra_kind: str) -> Run:
    """One reference system, start histograms on 90 % of ε. The extra object stays two fixes in one cell: the
    outlier corner (right half, never visited), or the first walk's start ("duplicate"). A batch of R runs is
    one model over R grids side by side (no move crosses a block; every start cell has its own noise)."""
    base = _dpt_base()
    cell = (_DPT_COLS - 1, _DPT_ROWS - 1) if extra_kind != "duplicate" else base[0][0]
    datasets = (base, base + [[cell, cell]] * (RECORDS if extra_kind == "max" else 1))

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        params = DptParams(epsilon=epsilon, n_levels=1, max_order=1, select_fraction=0.02, length_fraction=0.03,
                           start_fraction=0.9, n_synthetic=1)

        def call(r: int) -> np.ndarray:
            hierarchy = Hierarchy(_DPT_COLS * r, _DPT_ROWS, 1)
            rows = [(b * len(datasets[which]) + i, s, row * hierarchy.n_cols + b * _DPT_COLS + col)
                    for b in range(r) for i, walk in enumerate(datasets[which]) for s, (col, row) in enumerate(walk)]
            counts = count_points(pd.DataFrame(rows, columns=["traj_id", "seq", "cell"]), hierarchy, params)
            starts = fit(counts, hierarchy, params, rng).noisy_starts[0]
            return starts[cell[1] * hierarchy.n_cols + np.arange(r) * _DPT_COLS + cell[0]]

        return batched(n, _DPT_BATCH, call)

    return run


def scenarios() -> list[Scenario]:
    return record_level("dpt", _dpt_run("outlier"), _dpt_run("duplicate"), _dpt_run("max"))
