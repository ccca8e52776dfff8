"""Server-side client sampling: uniform subsets of the client ids 0..N−1, returned sorted, in O(N).

Uses only N and the server's generator, never the data (Alg. 2 line 15; docs/design.md, FASTPub).
"""

from __future__ import annotations

import numpy as np


def sorted_ids(ids: np.ndarray, n_clients: int) -> tuple[np.ndarray, np.ndarray]:
    """``(np.sort(ids), np.argsort(ids))`` for distinct ids in 0..N−1, by a scatter instead of a sort."""
    position = np.full(n_clients, -1, dtype=np.int64)
    position[ids] = np.arange(len(ids), dtype=np.int64)
    members = np.flatnonzero(position >= 0)
    return members, position[members]


def sample_clients(rng: np.random.Generator, n_clients: int, size: int) -> np.ndarray:
    """A uniformly random ``size``-subset of 0..N−1, sorted."""
    return sorted_ids(rng.choice(n_clients, size, replace=False, shuffle=False), n_clients)[0]
