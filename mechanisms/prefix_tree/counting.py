"""True prefix counts, one tree level at a time, on one partition of the raw trajectories.

This is the only code of the mechanism that reads raw data. It runs where the data lives (for example on
each Dask partition); the caller sums the returned counts by key over partitions and hands them to
:func:`mechanisms.prefix_tree.tree.build_tree`, which never sees a trajectory.

A candidate child at level ``i`` (depth ``i + 1``) is identified by the key
``parent_node_id * n_locations + location``; its true count is |tr(u)| of Def. 3.4, the number of
trajectories whose first ``i`` locations spell the parent's prefix and whose (i+1)-th location is
``location`` (Procedure 1, line 11).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from trajpub.errors import InputError

Transition = tuple[np.ndarray, np.ndarray]
"""``(keys_sorted, child_node_ids)`` of one level: the tree edges a trajectory may follow."""


class LevelCounter(Protocol):
    """Returns the true candidate counts ``(keys, counts)`` of ``level``, summed over all the data."""

    def __call__(self, level: int, transitions: list[Transition]) -> tuple[np.ndarray, np.ndarray]: ...


def check_csr(offsets: np.ndarray, locs: np.ndarray, n_locations: int) -> None:
    """Raise :class:`InputError` unless ``(offsets, locs)`` is CSR over the public universe 0..|L|−1 (G4)."""
    if n_locations < 1:
        raise InputError(f"the location universe must be non-empty, got n_locations={n_locations}")
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(locs):
        raise InputError("offsets must start at 0 and end at len(locs)", "prefix_tree CSR offsets")
    if np.any(np.diff(offsets) < 0):
        raise InputError("offsets must be non-decreasing", "prefix_tree CSR offsets")
    if len(locs) and (locs.min() < 0 or locs.max() >= n_locations):
        raise InputError(
            f"a location is outside the public universe 0..{n_locations - 1}; the universe must be "
            "public and fixed in advance, not taken from the data",
            "prefix_tree CSR locs",
        )


def count_level(
    offsets: np.ndarray,
    locs: np.ndarray,
    n_locations: int,
    level: int,
    transitions: list[Transition],
) -> tuple[np.ndarray, np.ndarray]:
    """True child-prefix counts at ``level`` for one partition of trajectories in CSR form.

    Trajectory j is ``locs[offsets[j]:offsets[j+1]]`` with locations in 0..n_locations−1.
    ``transitions[l] = (keys_sorted, child_node_ids)`` for every earlier level ``l < level``, where
    ``key = parent_node_id * n_locations + location`` and the root's id is 0. Each trajectory long enough
    (length ≥ level+1) is walked down the tree; one whose key is missing from ``transitions[l]`` has left
    the tree (its prefix was not kept). For the others the result counts
    ``key = node_id_at_level * n_locations + locs[offsets + level]``.

    Returns ``(keys, counts)``: int64 arrays, keys sorted and unique, counts ≥ 1. Raises
    :class:`InputError` when the partition holds a location outside the public universe (G4).
    """
    if level < 0 or len(transitions) < level:
        raise InputError(f"level {level} needs {level} transitions, got {len(transitions)}", "count_level")
    offsets, locs = np.asarray(offsets), np.asarray(locs)
    check_csr(offsets, locs, n_locations)
    lengths = np.diff(offsets)
    starts = np.asarray(offsets[:-1], dtype=np.int64)[lengths > level]
    node = np.zeros(len(starts), dtype=np.int64)
    for depth in range(level):
        keys = node * n_locations + locs[starts + depth]
        edge_keys, child_ids = transitions[depth]
        pos = np.minimum(np.searchsorted(edge_keys, keys), len(edge_keys) - 1)
        inside = edge_keys[pos] == keys if len(edge_keys) else np.zeros(len(keys), dtype=bool)
        starts = starts[inside]
        node = np.asarray(child_ids, dtype=np.int64)[pos[inside]]
    keys = node * n_locations + locs[starts + level]
    unique, counts = np.unique(keys, return_counts=True)
    return unique.astype(np.int64), counts.astype(np.int64)
