"""The counting database: denoised support estimates of admitted fragments, read through the Markov model.

Paper §5.2 eq. 13 and §6.3; the query base cases are the authors' code (``CountingDatabase.query``). DB maps a
fragment (of any length 1..l_max) to its estimated support count over
all N clients. A count query Q(f) returns DB[f] when f was admitted, otherwise the Markov (n-gram) estimate

    Q(f) = Q(f[:−1]) · Q(f[1:]) / Q(f[1:−1])        (|f| ≥ 3, eq. 13 applied recursively)
    Q(f) = Q(f[:1]) · Q(f[1:]) / N                  (|f| = 2, authors' code)
    Q(f) = k                                        (|f| = 1 and not admitted, their arbitrary fallback)

Every DB value is > k > 0 for FASTPub (Thm 3's threshold), and the fallbacks are products and quotients of
positive numbers, so a query never divides by zero.
"""

from __future__ import annotations

import numpy as np

from mechanisms.fastpub.fragments import decode, encode


class CountingDatabase:
    """Estimated support counts per fragment length, keyed by base-L fragment keys."""

    def __init__(self, n_locations: int, n_clients: int, k: float):
        self.n_locations = n_locations
        self.n_clients = n_clients
        self.k = k
        self._tables: dict[int, dict[int, float]] = {}

    def set(self, fragments: np.ndarray, values: np.ndarray) -> None:
        """DB[f] = value for every row f of the (m, l) array ``fragments``."""
        fragments = np.asarray(fragments, dtype=np.int64)
        table = self._tables.setdefault(fragments.shape[1], {})
        table.update(zip(encode(fragments, self.n_locations).tolist(), np.asarray(values, float).tolist(),
                         strict=True))

    def add(self, fragments: np.ndarray, values: np.ndarray) -> None:
        """DB[f] += value (TrieHH's DB adds each node's estimate to every suffix, the authors' code)."""
        fragments = np.asarray(fragments, dtype=np.int64)
        table = self._tables.setdefault(fragments.shape[1], {})
        for key, value in zip(encode(fragments, self.n_locations).tolist(), np.asarray(values, float).tolist(),
                              strict=True):
            table[key] = table.get(key, 0.0) + value

    def lookup(self, fragments: np.ndarray) -> np.ndarray:
        """DB values of the rows of ``fragments`` (NaN where absent)."""
        fragments = np.asarray(fragments, dtype=np.int64)
        table = self._tables.get(fragments.shape[1], {})
        return np.array([table.get(key, np.nan) for key in encode(fragments, self.n_locations).tolist()],
                        dtype=float)

    def get(self, fragment) -> float | None:
        table = self._tables.get(len(fragment), {})
        return table.get(int(encode(np.asarray([fragment]), self.n_locations)[0]))

    def entries(self, length: int) -> tuple[np.ndarray, np.ndarray]:
        """(fragments, values) of one length, sorted by key."""
        table = self._tables.get(length, {})
        keys = np.array(sorted(table), dtype=np.int64)
        return decode(keys, length, self.n_locations), np.array([table[k] for k in keys.tolist()], dtype=float)

    def sizes(self) -> dict[int, int]:
        return {length: len(t) for length, t in sorted(self._tables.items())}

    def markov_estimate(self, fragments: np.ndarray) -> np.ndarray:
        """Eq. 13 on DB values: DB[h[:−1]]·DB[h[1:]]/DB[h[1:−1]] for (m, l ≥ 3) candidates (Markov cleaning)."""
        fragments = np.asarray(fragments, dtype=np.int64)
        return (self.lookup(fragments[:, :-1]) * self.lookup(fragments[:, 1:])
                / self.lookup(fragments[:, 1:-1]))

    def query(self, fragment) -> float:
        """Q(f): DB[f] if present, else the recursive Markov fallback (module docstring)."""
        return self._query(tuple(int(a) for a in fragment), {})

    def query_many(self, fragments) -> np.ndarray:
        memo: dict[tuple[int, ...], float] = {}
        return np.array([self._query(tuple(int(a) for a in f), memo) for f in fragments], dtype=float)

    def _query(self, f: tuple[int, ...], memo: dict) -> float:
        if f in memo:
            return memo[f]
        value = self.get(f)
        if value is None:
            if len(f) == 1:
                value = float(self.k)
            elif len(f) == 2:
                value = self._query(f[:1], memo) * self._query(f[1:], memo) / self.n_clients
            else:
                value = self._query(f[:-1], memo) * self._query(f[1:], memo) / self._query(f[1:-1], memo)
        memo[f] = value
        return value
