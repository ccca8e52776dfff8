"""Shared fixtures of the unit tests (pure: no database, no Prefect)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

# Table II of Chen, Fung, Desai (spec seed-004 §3.9), with L1..L4 mapped to 0..3.
PREFIX_TREE_TOY = [
    [0, 1, 2],
    [0, 1],
    [2, 1, 0],
    [0, 1, 3],
    [0, 1, 2],
    [2, 1],
    [0, 1, 3, 0],
    [2, 0],
]


def _csr(trajectories: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = [len(t) for t in trajectories]
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    locs = np.concatenate([np.asarray(t, dtype=np.int64) for t in trajectories]) if trajectories else []
    return offsets, np.asarray(locs, dtype=np.int64)


@pytest.fixture
def prefix_tree_toy() -> tuple[np.ndarray, np.ndarray]:
    """Table II of the prefix-tree paper as CSR ``(offsets, locs)`` over 4 locations."""
    return _csr(PREFIX_TREE_TOY)


@pytest.fixture(scope="session")
def random_walk_csr() -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """Factory of synthetic trajectories: random walks on a ring of ``n_locations`` cells, steps in
    {−2..2}, start cells from a skewed distribution, geometric lengths with the given mean."""

    def make(n_trajectories: int, n_locations: int, mean_length: float, seed: int):
        rng = np.random.default_rng(seed)
        lengths = rng.geometric(1.0 / mean_length, n_trajectories)
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        start_weights = rng.dirichlet(np.full(n_locations, 0.3))
        start = rng.choice(n_locations, n_trajectories, p=start_weights)
        steps = rng.integers(-2, 3, offsets[-1])
        steps[offsets[:-1]] = 0
        owner = np.repeat(np.arange(n_trajectories), lengths)
        walk = np.cumsum(steps)
        walk -= np.repeat(walk[offsets[:-1]], lengths)
        return offsets, (start[owner] + walk) % n_locations

    return make
