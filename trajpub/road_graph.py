"""Shortest-path distances between the nodes of a road network, up to a cutoff, held for vectorised look-ups
(:meth:`trajpub.roads.RoadNetwork.node_distances`)."""

from __future__ import annotations

import math

import numpy as np


class NodeDistances:
    """Shortest-path distances between nodes up to ``cutoff`` metres (undirected, weights ``length_m``), in an
    open-addressing hash table so that millions of look-ups are vectorised. Pairs farther apart than the
    cutoff, or in different components, read as ``inf``."""

    _EMPTY = -1
    _MULT = np.uint64(0x9E3779B97F4A7C15)

    def __init__(self, n_nodes: int, keys: np.ndarray, values: np.ndarray, cutoff: float):
        self.n_nodes = int(n_nodes)
        self.cutoff = float(cutoff)
        bits = max(4, math.ceil(math.log2(2 * len(keys) + 1)))
        self._shift = np.uint64(64 - bits)
        self._mask = (1 << bits) - 1
        self._keys = np.full(1 << bits, self._EMPTY, np.int64)
        self._values = np.zeros(1 << bits, np.float64)
        slot = self._hash(keys)
        pending = np.arange(len(keys))
        while len(pending):  # vectorised linear probing: one winner per empty slot per round
            s = slot[pending]
            free = self._keys[s] == self._EMPTY
            free_slots, first = np.unique(s[free], return_index=True)
            winners = pending[free][first]
            self._keys[free_slots] = keys[winners]
            self._values[free_slots] = values[winners]
            placed = np.zeros(len(keys), bool)
            placed[winners] = True
            pending = pending[~placed[pending]]
            slot[pending] = (slot[pending] + 1) & self._mask

    def _hash(self, keys: np.ndarray) -> np.ndarray:
        return ((keys.astype(np.uint64) * self._MULT) >> self._shift).astype(np.int64)

    def __len__(self) -> int:
        return int((self._keys != self._EMPTY).sum())

    def get(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Distance from node index ``a`` to node index ``b`` (arrays of equal shape), ``inf`` beyond the
        cutoff."""
        a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
        keys = (a * self.n_nodes + b).ravel()
        out = np.full(len(keys), np.inf)
        slot = self._hash(keys)
        pending = np.arange(len(keys))
        while len(pending):
            s = slot[pending]
            stored = self._keys[s]
            hit = stored == keys[pending]
            out[pending[hit]] = self._values[s[hit]]
            pending = pending[~(hit | (stored == self._EMPTY))]
            slot[pending] = (slot[pending] + 1) & self._mask
        return out.reshape(a.shape)
