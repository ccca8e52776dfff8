"""The neighbouring pairs on which the DP audit (:mod:`audits.dp_scenarios`) tests the claim of
the noisy prefix tree (Chen, Fung, Desai 2012): ε-DP per trajectory record
(:mod:`trajpub.dp_scenario` says how a pair is chosen and what is measured)."""

from __future__ import annotations

import numpy as np

from mechanisms.prefix_tree import PrefixTreeParams, build_tree, count_level
from trajpub.dp_scenario import N_OBJECTS, RECORDS, Run, Scenario, batched, record_level

_PT_LOCATIONS, _PT_OUTLIER, _PT_BATCH = 8, 7, 2000


def _pt_base() -> list[list[int]]:
    rng = np.random.default_rng(20121)
    return [[int(v)] for v in rng.integers(0, _PT_LOCATIONS - 2, N_OBJECTS)]


def _prefix_tree_run(extra: list[list[int]], label: int) -> Run:
    """Height 1 (one level: ε on every location count), literal expansion, no consistency step. A batch of R
    runs is one tree over R disjoint blocks of ``_PT_LOCATIONS`` locations, each holding a copy of the dataset:
    every level-1 candidate gets its own noise (explicit or Thm 4.1) with a scale that does not depend on the
    number of locations, so the R block counts are R independent runs."""
    datasets = (_pt_base(), _pt_base() + extra)

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        params = PrefixTreeParams(epsilon=epsilon, height=1, expansion_policy="literal", consistency="none")

        def call(r: int) -> np.ndarray:
            records = [[loc + b * _PT_LOCATIONS for loc in rec] for b in range(r) for rec in datasets[which]]
            offsets = np.concatenate(([0], np.cumsum([len(x) for x in records]))).astype(np.int64)
            locs = np.concatenate(records).astype(np.int64)
            n_loc = r * _PT_LOCATIONS
            tree = build_tree(lambda level, tr: count_level(offsets, locs, n_loc, level, tr), n_loc, params, rng)
            out = np.full(r, -np.inf)
            level1 = np.flatnonzero((tree.depth == 1) & (tree.label % _PT_LOCATIONS == label))
            out[tree.label[level1] // _PT_LOCATIONS] = tree.count[level1]
            return out

        return batched(n, _PT_BATCH, call)

    return run


def scenarios() -> list[Scenario]:
    dup = _pt_base()[0]
    return record_level("prefix_tree", _prefix_tree_run([[_PT_OUTLIER]], _PT_OUTLIER),
                         _prefix_tree_run([dup], dup[0]), _prefix_tree_run([[_PT_OUTLIER]] * RECORDS, _PT_OUTLIER))
