"""AdaTrace's density-aware two-level grid (Gursoy et al. CCS 2018, Sec. 4.1; Qardaji, Yang, Li ICDE 2013).

The top level is an L×L grid over a PUBLIC extent (metres in the flow grid's local CRS). Each top cell i is
split into mᵢ×mᵢ leaves, mᵢ chosen from the top cell's NOISY density ñᵢ only (:func:`subdivision`), so the
structure is a function of released values and public parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

#: hop distance used for "unreachable" in :attr:`AdaptiveGrid.hops`
UNREACHABLE = np.iinfo(np.int32).max // 2


def subdivision(noisy_density: np.ndarray, eps_leaf: float, c2: float, m_max: int) -> np.ndarray:
    """mᵢ = ⌈√(max(ñᵢ, 0)·ε_leaf / c₂)⌉, clipped to [1, m_max].

    Qardaji et al.'s adaptive-grid guideline (ICDE 2013, Sec. IV-B: m₂ = ⌈√(N'(1−α)ε/c₂)⌉, c₂ = c/2 = 5), which
    AdaTrace cites for its second level; N'·(1−α)ε is the noisy count times the leaf budget. The Java code uses a
    different, linear rule (⌈5ñ/(|D|·ε)⌉, with the raw |D|), which we do not follow (it reads |D|).
    """
    n = np.maximum(np.asarray(noisy_density, dtype=float), 0.0)
    m = np.ceil(np.sqrt(n * eps_leaf / c2))
    return np.clip(m, 1, m_max).astype(np.int64)


@dataclass(frozen=True)
class AdaptiveGrid:
    """Top level ``top_level``×``top_level`` over ``extent = (x0, y0, x1, y1)``; top cell ``i = row·L + col``
    holds ``splits[i]²`` leaves numbered ``leaf_offsets[i] + r·mᵢ + c``."""

    extent: tuple[float, float, float, float]
    top_level: int
    splits: np.ndarray

    def __post_init__(self) -> None:
        x0, y0, x1, y1 = self.extent
        if not (x1 > x0 and y1 > y0):
            raise ValueError(f"empty extent {self.extent}")
        s = np.asarray(self.splits, dtype=np.int64)
        if s.shape != (self.top_level ** 2,) or (s < 1).any():
            raise ValueError("splits must hold one integer >= 1 per top cell")
        object.__setattr__(self, "splits", s)

    # --- sizes -----------------------------------------------------------------------------------------------

    @property
    def n_top(self) -> int:
        return self.top_level ** 2

    @cached_property
    def leaf_offsets(self) -> np.ndarray:
        return np.r_[0, np.cumsum(self.splits ** 2)].astype(np.int64)

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_offsets[-1])

    @property
    def top_size(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.extent
        return (x1 - x0) / self.top_level, (y1 - y0) / self.top_level

    @property
    def diagonal(self) -> float:
        x0, y0, x1, y1 = self.extent
        return float(np.hypot(x1 - x0, y1 - y0))

    # --- point location --------------------------------------------------------------------------------------

    def _top_rc(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        x0, y0, _, _ = self.extent
        w, h = self.top_size
        fx = (np.asarray(x, dtype=float) - x0) / w
        fy = (np.asarray(y, dtype=float) - y0) / h
        col = np.clip(np.floor(fx), 0, self.top_level - 1).astype(np.int64)
        row = np.clip(np.floor(fy), 0, self.top_level - 1).astype(np.int64)
        return row, col, fx - col, fy - row

    def top_of(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Top cell of each point (points outside the extent go to the nearest border cell)."""
        row, col, _, _ = self._top_rc(x, y)
        return row * self.top_level + col

    def leaf_of(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Leaf cell of each point."""
        row, col, ux, uy = self._top_rc(x, y)
        top = row * self.top_level + col
        m = self.splits[top]
        c = np.clip(np.floor(np.clip(ux, 0, 1) * m), 0, m - 1).astype(np.int64)
        r = np.clip(np.floor(np.clip(uy, 0, 1) * m), 0, m - 1).astype(np.int64)
        return self.leaf_offsets[top] + r * m + c

    # --- leaves ----------------------------------------------------------------------------------------------

    @cached_property
    def leaf_top(self) -> np.ndarray:
        """Top cell of each leaf."""
        return np.repeat(np.arange(self.n_top), self.splits ** 2)

    @cached_property
    def leaf_bounds(self) -> np.ndarray:
        """(K, 4) array of ``xmin, ymin, xmax, ymax`` per leaf."""
        x0, y0, _, _ = self.extent
        w, h = self.top_size
        top = self.leaf_top
        m = self.splits[top]
        local = np.arange(self.n_leaves) - self.leaf_offsets[top]
        r, c = local // m, local % m
        trow, tcol = top // self.top_level, top % self.top_level
        xmin = x0 + tcol * w + c * (w / m)
        ymin = y0 + trow * h + r * (h / m)
        return np.column_stack([xmin, ymin, xmin + w / m, ymin + h / m])

    @cached_property
    def min_leaf_side(self) -> float:
        w, h = self.top_size
        return float(min(w, h) / self.splits.max())

    def sample_points(self, leaves: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """A uniform random point inside each given leaf."""
        b = self.leaf_bounds[np.asarray(leaves, dtype=np.int64)]
        u = rng.random((len(b), 2))
        # stay strictly inside so that the flow grid puts the point in the leaf's own cell
        u = np.clip(u, 1e-9, 1 - 1e-9)
        return b[:, 0] + u[:, 0] * (b[:, 2] - b[:, 0]), b[:, 1] + u[:, 1] * (b[:, 3] - b[:, 1])

    # --- adjacency ---------------------------------------------------------------------------------------------

    @cached_property
    def edges(self) -> np.ndarray:
        """(E, 2) array of ordered pairs (a, b), a ≠ b, of leaves whose closed rectangles touch (side or corner),
        sorted by (a, b): the moves of the mobility model (AdaTrace allows moves to adjacent cells only)."""
        b = self.leaf_bounds
        tol = 1e-6 * self.min_leaf_side
        src, dst = [], []
        for start in range(0, self.n_leaves, 512):
            blk = b[start:start + 512]
            touch = ((blk[:, None, 0] <= b[None, :, 2] + tol) & (b[None, :, 0] <= blk[:, None, 2] + tol)
                     & (blk[:, None, 1] <= b[None, :, 3] + tol) & (b[None, :, 1] <= blk[:, None, 3] + tol))
            i, j = np.nonzero(touch)
            i = i + start
            keep = i != j
            src.append(i[keep])
            dst.append(j[keep])
        e = np.column_stack([np.concatenate(src), np.concatenate(dst)]).astype(np.int64)
        return e[np.lexsort((e[:, 1], e[:, 0]))]

    @cached_property
    def edge_keys(self) -> np.ndarray:
        """Sorted ``a·K + b`` of :attr:`edges` (for :meth:`edge_index`)."""
        return self.edges[:, 0] * self.n_leaves + self.edges[:, 1]

    def edge_index(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Index into :attr:`edges` of each move a → b, or −1 when the leaves are not adjacent."""
        keys = np.asarray(a, dtype=np.int64) * self.n_leaves + np.asarray(b, dtype=np.int64)
        pos = np.searchsorted(self.edge_keys, keys)
        pos = np.minimum(pos, len(self.edge_keys) - 1) if len(self.edge_keys) else np.zeros_like(keys)
        ok = (self.edge_keys[pos] == keys) if len(self.edge_keys) else np.zeros(len(keys), bool)
        return np.where(ok, pos, -1)

    @cached_property
    def hops(self) -> np.ndarray:
        """(K, K) int32 hop distances on the adjacency graph (:data:`UNREACHABLE` if disconnected)."""
        k = self.n_leaves
        g = csr_matrix((np.ones(len(self.edges)), (self.edges[:, 0], self.edges[:, 1])), shape=(k, k))
        d = shortest_path(g, method="D", unweighted=True, directed=False)
        d[~np.isfinite(d)] = UNREACHABLE
        return d.astype(np.int32)

    def to_dict(self) -> dict:
        return {"extent": [float(v) for v in self.extent], "top_level": self.top_level,
                "splits": self.splits.tolist(), "n_leaves": self.n_leaves}
