"""True counts of DPT's model, on one partition of raw trajectories (the only code that reads raw data).

A partition returns :class:`DptCounts`: per reference system the length histogram, the start-cell counts and
the prefix-tree node counts at depths 2..H. A node at depth D is a sequence of D cells (D−1 neighbour moves) and is
keyed ``first_cell * 8**(D−1) + Σ_j direction_j * 8**(D−2−j)``, so the parent of a node (its (D−1)-prefix) is
``key // 8`` and its children are ``key * 8 + direction``. Node counts are occurrence counts of the D-gram
anywhere in a trajectory (the n-gram reading of an l-order Markov prefix tree). The caller sums partitions with
:func:`merge_counts`; the noisy model (:mod:`mechanisms.dpt.model`) never sees a trajectory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mechanisms.dpt.params import N_DIRECTIONS
from mechanisms.dpt.reference import Discretised
from mechanisms.prefix_tree import check_csr

Sparse = tuple[np.ndarray, np.ndarray]
"""``(keys, counts)``: int64, keys sorted and unique, counts ≥ 1."""


@dataclass
class DptCounts:
    """True counts, keyed by ``(kind, level, depth)`` with kind "length" (key = number of cells), "start"
    (key = cell) or "node" (key as in the module docstring; depth 0 for the other kinds)."""

    tables: dict[tuple[str, int, int], Sparse] = field(default_factory=dict)
    n_trajectories: int = 0

    def get(self, kind: str, level: int, depth: int = 0) -> Sparse:
        return self.tables.get((kind, level, depth), (np.empty(0, np.int64), np.empty(0, np.int64)))


def _sparse(keys: np.ndarray) -> Sparse:
    unique, counts = np.unique(keys, return_counts=True)
    return unique.astype(np.int64), counts.astype(np.int64)


def node_keys(disc: Discretised, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys of every depth-``depth`` window of every trajectory, and the window's trajectory index."""
    lengths = disc.lengths
    n = len(disc.cells)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    pos = np.arange(n) - np.repeat(disc.offsets[:-1], lengths)
    remaining = lengths[owner] - 1 - pos  # moves after this cell
    valid = np.flatnonzero(remaining >= depth - 1)
    keys = disc.cells[valid].astype(np.int64)
    for j in range(depth - 1):
        keys = keys * N_DIRECTIONS + disc.directions[valid + j]
    return keys, owner[valid]


def count_discretised(disc: Discretised, n_levels: int, n_cells: list[int], max_height: int) -> DptCounts:
    """:class:`DptCounts` of already discretised trajectories (see :func:`mechanisms.dpt.reference.discretise`)."""
    out = DptCounts(n_trajectories=len(disc.level))
    lengths = disc.lengths
    for k in range(n_levels):
        sel = np.flatnonzero(disc.level == k)
        if len(sel) == 0:
            continue
        sub_len = lengths[sel]
        idx = _ranges(disc.offsets[sel], sub_len)
        sub = Discretised(disc.level[sel], np.r_[0, np.cumsum(sub_len)].astype(np.int64), disc.cells[idx],
                          disc.directions[idx])
        check_csr(sub.offsets, sub.cells, n_cells[k])  # cells inside the public universe of system k
        out.tables[("length", k, 0)] = _sparse(sub_len)
        out.tables[("start", k, 0)] = _sparse(sub.cells[sub.offsets[:-1]])
        for depth in range(2, max_height + 1):
            keys, _ = node_keys(sub, depth)
            if len(keys):
                out.tables[("node", k, depth)] = _sparse(keys)
    return out


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + n)`` for each (s, n), vectorised."""
    total = int(lengths.sum())
    base = np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths)
    return base + np.arange(total)


def merge_counts(parts: list[DptCounts]) -> DptCounts:
    """Sum per-partition counts by key (what the driver does after gathering the partitions' counts)."""
    out = DptCounts(n_trajectories=sum(p.n_trajectories for p in parts))
    names = sorted({name for p in parts for name in p.tables})
    for name in names:
        keys = np.concatenate([p.get(*name)[0] for p in parts])
        counts = np.concatenate([p.get(*name)[1] for p in parts])
        unique, inverse = np.unique(keys, return_inverse=True)
        out.tables[name] = unique, np.bincount(inverse, weights=counts, minlength=len(unique)).astype(np.int64)
    return out
