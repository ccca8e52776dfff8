"""Fragments: contiguous sub-sequences of cell sequences, their integer keys, and the Apriori join.

Paper Def. 3 (eq. 5): t[p:q] = a_p → … → a_q, of length l = q − p + 1. A fragment f *is a fragment of* t when
it is a contiguous substring of t. Support counts presence, 0/1 per trajectory (eq. 1; docs/design.md, FASTPub):
(a, a, a) holds (a, a) once.

Trajectories are CSR arrays: trajectory i is ``cells[offsets[i]:offsets[i+1]]``, cells in 0..L−1. A fragment of
length l over L locations has the key Σ f[i]·L^{l−1−i} (our choice: base-L integers), which is unique
among fragments of the same length; keys of different lengths are never compared.

Consecutive repeated cells are kept as given: neither the paper nor the authors' code collapses them.
The project's ``trajpub.segment.cell_sequences`` collapses them before this module sees the data (a
project choice shared with the prefix-tree mechanism); the mechanism is correct either way.
"""

from __future__ import annotations

import numpy as np

from trajpub.errors import InputError, ParameterError

KEY_LIMIT = 2**62  # keys and key-derived products stay inside int64


def check_key_space(n_locations: int, length: int) -> None:
    """Refuse fragment lengths whose base-L keys would overflow int64 (L^l ≥ 2^62)."""
    if n_locations < 1:
        raise ParameterError(f"n_locations must be >= 1, got {n_locations}", "fastpub.n_locations")
    if n_locations**length >= KEY_LIMIT:
        raise ParameterError(
            f"{n_locations} locations ** length {length} does not fit a 62-bit fragment key; "
            "use a coarser grid or a smaller l_max",
            "fastpub.l_max",
        )


def check_csr(offsets: np.ndarray, cells: np.ndarray, n_locations: int, where: str = "fastpub.input") -> None:
    """Offsets start at 0, never decrease, end at len(cells); every trajectory has ≥ 1 cell in 0..L−1."""
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(cells):
        raise InputError("offsets must start at 0 and end at len(cells)", where)
    if np.any(np.diff(offsets) < 1):
        raise InputError("every trajectory must have at least one cell", where)
    if len(cells) and (cells.min() < 0 or cells.max() >= n_locations):
        raise InputError(f"cells must lie in 0..{n_locations - 1} (drop points outside the grid first)", where)


def encode(fragments: np.ndarray, n_locations: int) -> np.ndarray:
    """Keys of an (m, l) array of fragments; l = 0 gives key 0 (the empty prefix)."""
    fragments = np.asarray(fragments, dtype=np.int64)
    keys = np.zeros(len(fragments), dtype=np.int64)
    for j in range(fragments.shape[1]):
        keys = keys * n_locations + fragments[:, j]
    return keys


def decode(keys: np.ndarray, length: int, n_locations: int) -> np.ndarray:
    """The (m, length) fragments of ``keys`` (inverse of :func:`encode`)."""
    keys = np.asarray(keys, dtype=np.int64).copy()
    out = np.empty((len(keys), length), dtype=np.int64)
    for j in range(length - 1, -1, -1):
        out[:, j] = keys % n_locations
        keys //= n_locations
    return out


def window_keys(offsets: np.ndarray, cells: np.ndarray, length: int, n_locations: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Every window of ``length`` cells that lies inside one trajectory: (trajectory index, key)."""
    n_cells = len(cells)
    if n_cells < length:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    starts = np.arange(n_cells - length + 1, dtype=np.int64)
    owner = np.searchsorted(offsets, starts, side="right") - 1
    inside = starts + length <= offsets[owner + 1]
    starts, owner = starts[inside], owner[inside]
    keys = np.zeros(len(starts), dtype=np.int64)
    for j in range(length):
        keys = keys * n_locations + cells[starts + j]
    return owner, keys


def presence(offsets: np.ndarray, cells: np.ndarray, length: int, n_locations: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (trajectory, fragment key) pairs: trajectory i holds fragment f at least once (0/1 support)."""
    owner, keys = window_keys(offsets, cells, length, n_locations)
    if len(keys) == 0:
        return owner, keys
    order = np.lexsort((keys, owner))
    owner, keys = owner[order], keys[order]
    first = np.r_[True, (owner[1:] != owner[:-1]) | (keys[1:] != keys[:-1])]
    return owner[first], keys[first]


def is_fragment_of(fragment, trajectory) -> bool:
    """True when ``fragment`` is a contiguous substring of ``trajectory`` (Alg. 1 line 4)."""
    f = np.asarray(fragment, dtype=np.int64)
    t = np.asarray(trajectory, dtype=np.int64)
    if len(f) == 0:
        return True
    if len(f) > len(t):
        return False
    windows = np.lib.stride_tricks.sliding_window_view(t, len(f))
    return bool(np.any(np.all(windows == f, axis=1)))


def apriori_join(admitted: np.ndarray, n_locations: int) -> np.ndarray:
    """C_l from P_{l−1} by eq. 12: {f + (g[−1],) : f, g ∈ P_{l−1}, f[1:] = g[:−1]}, sorted by key.

    Equivalently C_l = {h ∈ Ω_l : h[:−1] ∈ P_{l−1} and h[1:] ∈ P_{l−1}}. For l = 2 it is every ordered pair of
    admitted locations, self-pairs a → a included (docs/design.md, FASTPub).
    """
    admitted = np.asarray(admitted, dtype=np.int64)
    m, lm1 = admitted.shape
    if m == 0:
        return np.empty((0, lm1 + 1), dtype=np.int64)
    suffix = encode(admitted[:, 1:], n_locations)
    prefix = encode(admitted[:, :-1], n_locations)
    order = np.argsort(prefix, kind="stable")
    sorted_prefix = prefix[order]
    lo = np.searchsorted(sorted_prefix, suffix, side="left")
    hi = np.searchsorted(sorted_prefix, suffix, side="right")
    counts = hi - lo
    left = np.repeat(np.arange(m), counts)
    # for each f, the matching g's are order[lo:hi]
    offsets_in_run = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    right = order[np.repeat(lo, counts) + offsets_in_run]
    out = np.concatenate([admitted[left], admitted[right, -1:]], axis=1)
    keys = encode(out, n_locations)
    _, first = np.unique(keys, return_index=True)
    return out[first]


def group_duplicates(offsets: np.ndarray, cells: np.ndarray, multiplicity: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Identical trajectories merged: (offsets, cells, multiplicity) of the distinct ones (docs/design.md, FASTPub).

    The order of the distinct trajectories is that of their first occurrence. Input multiplicities (if any)
    are summed.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    cells = np.asarray(cells, dtype=np.int64)
    n = len(offsets) - 1
    weights = np.ones(n, np.int64) if multiplicity is None else np.asarray(multiplicity, dtype=np.int64)
    lengths = np.diff(offsets)
    groups: dict[bytes, int] = {}
    first_of: list[int] = []
    label = np.empty(n, dtype=np.int64)
    for i in range(n):
        key = lengths[i].tobytes() + cells[offsets[i]:offsets[i + 1]].tobytes()
        g = groups.get(key)
        if g is None:
            g = groups[key] = len(first_of)
            first_of.append(i)
        label[i] = g
    firsts = np.asarray(first_of, dtype=np.int64)
    new_lengths = lengths[firsts]
    new_offsets = np.concatenate(([0], np.cumsum(new_lengths))).astype(np.int64)
    idx = np.repeat(offsets[firsts] - new_offsets[:-1], new_lengths) + np.arange(new_offsets[-1])
    return new_offsets, cells[idx], np.bincount(label, weights=weights, minlength=len(firsts)).astype(np.int64)
