"""Count-mean sketches of Apple's SFP baseline: the public hash family and the server's frequency estimate.

Apple Differential Privacy Team, "Learning with Privacy at Scale" (2017), the private count-mean sketch
(CMS) and the sequence fragment puzzle (SFP); the settings are those of the FASTPub authors' code
(github.com/inslab-ji/FASTPub). Shared by the client (which hashes its word) and the server (which hashes candidates).

Hashes: ``h_j(x) = ((a_j · mix(x) + b_j) mod 2^64) >> (64 − log2 m)`` with a_j odd (multiply-shift on a
splitmix64-mixed key). Apple does not specify its hash family; any public family with small collision
probability serves. The family is public protocol state, derived from ``hash_seed`` and the sketch index.
"""

from __future__ import annotations

import math

import numpy as np

_U64 = np.uint64


def mix(keys: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: spreads structured integer keys over 64 bits (wrapping uint64 arithmetic)."""
    x = np.atleast_1d(np.asarray(keys)).astype(np.uint64)
    with np.errstate(over="ignore"):
        x = x + _U64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


class HashFamily:
    """``rows`` public hash functions from int64 keys to 0..columns−1 (columns a power of two)."""

    def __init__(self, seed: int, sketch: int, rows: int, columns: int):
        g = np.random.default_rng([seed, sketch])
        self.rows, self.columns = rows, columns
        self._shift = _U64(64 - int(math.log2(columns)))
        self._a = g.integers(0, 2**63, rows, dtype=np.uint64) * _U64(2) + _U64(1)
        self._b = g.integers(0, 2**63, rows, dtype=np.uint64)

    def column(self, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """h_{rows[i]}(keys[i]) for aligned arrays."""
        return self.column_of_mixed(rows, mix(keys))

    def column_of_mixed(self, rows: np.ndarray, mixed: np.ndarray) -> np.ndarray:
        """:meth:`column` for keys already passed through :func:`mix` (mix once, hash many times)."""
        with np.errstate(over="ignore"):
            h = self._a[rows] * mixed + self._b[rows]
        return (h >> self._shift).astype(np.int64)

    def all_rows(self, keys: np.ndarray) -> np.ndarray:
        """(len(keys), rows) matrix of h_j(key)."""
        with np.errstate(over="ignore"):
            h = mix(keys)[:, None] * self._a[None, :] + self._b[None, :]
        return (h >> self._shift).astype(np.int64)


def word_buckets(keys: np.ndarray, seed: int, buckets: int) -> np.ndarray:
    """The puzzle's word hash into ``buckets`` values (one public function, sketch index −1)."""
    family = HashFamily(seed, 2**31 - 1, 1, buckets)
    return family.column(np.zeros(len(np.atleast_1d(keys)), dtype=np.int64), keys)


def flip_probability(epsilon: float) -> float:
    """Each ±1 coordinate flips with probability 1/(1 + e^{ε/2}) (Apple's client-side CMS, ε-LDP)."""
    return 1.0 / (1.0 + math.exp(epsilon / 2.0))


def sketch_matrix(ones: np.ndarray, clients: np.ndarray, epsilon: float) -> np.ndarray:
    """Server-side M[j, c] = Σ_{clients of row j} k·(c_ε/2 · ṽ_c + 1/2), from the counts of +1 per cell.

    Σ ṽ_c over the n_j clients of row j is 2·ones[j, c] − n_j; c_ε = (e^{ε/2}+1)/(e^{ε/2}−1).
    """
    rows = ones.shape[0]
    c_eps = (math.exp(epsilon / 2) + 1) / (math.exp(epsilon / 2) - 1)
    n_j = clients[:, None].astype(float)
    return rows * (c_eps / 2 * (2 * ones - n_j) + n_j / 2)


def estimate(matrix: np.ndarray, n_clients: int, family: HashFamily, keys: np.ndarray,
             chunk: int = 20_000) -> np.ndarray:
    """Unbiased counts f̃(d) = m/(m−1)·((1/k)·Σ_j M[j, h_j(d)] − n/m) of the items ``keys`` among n clients."""
    keys = np.asarray(keys, dtype=np.int64)
    k, m = matrix.shape
    out = np.empty(len(keys))
    rows = np.arange(k)
    for lo in range(0, len(keys), chunk):
        cols = family.all_rows(keys[lo:lo + chunk])
        out[lo:lo + chunk] = matrix[rows[None, :], cols].mean(axis=1)
    return m / (m - 1) * (out - n_clients / m)
