"""The noisy prefix tree (Def. 3.4) and its level-by-level construction (Procedure 1, Sec. IV-A).

Nodes live in flat arrays in level order: the root is node 0, the nodes of depth d are the contiguous
range ``level_start[d]:level_start[d+1]``, sorted by (parent, label). Construction reads only the true
candidate counts a :class:`~mechanisms.prefix_tree.counting.LevelCounter` returns, never trajectories.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.prefix_tree.counting import LevelCounter, Transition
from mechanisms.prefix_tree.params import PrefixTreeParams
from mechanisms.prefix_tree.sampling import sample_complement_labels, sample_empty_passes
from trajpub import noise
from trajpub.errors import InputError, ParameterError

_NO_CAP = np.iinfo(np.int64).max


@dataclass(frozen=True, eq=False)
class NoisyPrefixTree:
    """A noisy prefix tree PT: per node its parent, label (location), depth and noisy count c(v).

    ``count[0]`` is NaN: the root's count is never measured (G20). ``spurious`` marks nodes created by the
    empty-candidate process (true count 0, Thm 4.1). It depends on the raw data beyond the DP output, so it
    is kept only for tests and benchmarks: no release or metadata may read it.
    """

    params: PrefixTreeParams
    n_locations: int
    parent: np.ndarray
    label: np.ndarray
    depth: np.ndarray
    count: np.ndarray
    spurious: np.ndarray
    level_start: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.parent)
        if n < 1 or self.parent[0] != -1 or self.depth[0] != 0:
            raise ValueError("node 0 must be the root (parent −1, depth 0)")
        if not all(len(a) == n for a in (self.label, self.depth, self.count, self.spurious)):
            raise ValueError("node arrays must have one entry per node")
        if n > 1:
            child = np.arange(1, n)
            if np.any(self.parent[1:] >= child) or np.any(self.depth[1:] != self.depth[self.parent[1:]] + 1):
                raise ValueError("nodes must be in level order with depth(v) = depth(parent(v)) + 1")
        if (
            self.level_start[0] != 0
            or self.level_start[-1] != n
            or len(self.level_start) - 1 > (self.params.height + 1)
        ):
            raise ValueError("level_start must cover the nodes with at most h + 1 levels")

    @property
    def n_nodes(self) -> int:
        """Number of non-root nodes."""
        return len(self.parent) - 1

    @property
    def nodes_per_level(self) -> list[int]:
        """|level(d, PT)| for d = 1 .. depth of the tree."""
        return np.diff(self.level_start)[1:].tolist()

    def n_children(self) -> np.ndarray:
        """|children(v)| for every node (root included)."""
        return np.bincount(self.parent[1:], minlength=len(self.parent))

    def metadata(self) -> dict:
        """JSON-serialisable facts about the tree for lineage. Only public parameters and functions of the
        noisy output: no seed, no true count, no spurious-node count (see :meth:`diagnostics`)."""
        p = self.params
        return {
            "mechanism": "prefix_tree",
            "paper": "Chen, Fung, Desai, Differentially Private Trajectory Data Publication (arXiv:1112.2020)",
            "params": p.to_dict(),
            "n_locations": int(self.n_locations),
            "epsilon_bar": p.epsilon_bar,
            "laplace_scale": p.laplace_scale,
            "theta": p.theta,
            "p_theta": p.p_theta,
            "expansion_policy": p.expansion_policy,
            "n_nodes": int(self.n_nodes),
            "nodes_per_level": self.nodes_per_level,
        }

    def diagnostics(self) -> dict:
        """Raw-data-dependent facts for tests and benchmarks. NOT differentially private: whether a node is
        spurious says whether its true count is 0. Never store this in lineage or publish it."""
        per_level = np.add.reduceat(self.spurious.astype(np.int64), self.level_start[:-1])[1:]
        return {"n_spurious_nodes": int(self.spurious.sum()), "spurious_per_level": per_level.tolist()}


def build_tree(
    counter: LevelCounter, n_locations: int, params: PrefixTreeParams, rng: np.random.Generator
) -> NoisyPrefixTree:
    """BuildNoisyPrefixTree (Procedure 1) with the efficient empty-candidate process of Theorem 4.1.

    Level i spends ε̄ = ε/h: every candidate child of every expanded node at depth i gets its true count
    plus Laplace(b), b = Δ/ε̄, and joins the tree when the noisy count is ≥ θ (inclusive, G11). Candidates
    of one level partition the trajectories of length > i, so a level costs ε̄ (Thm 3.4) and h levels cost ε
    (Thm 3.3, Thm 4.3). The expansion policy (G1) then chooses, from noisy counts only, which new nodes are
    expanded at level i + 1. ``counter(level, transitions)`` returns the true counts of the candidates of
    ``level`` with a positive count, keyed ``parent_id * n_locations + location``.
    """
    if isinstance(n_locations, bool) or not isinstance(n_locations, int | np.integer) or n_locations < 1:
        raise ParameterError(f"n_locations must be a positive integer, got {n_locations!r}", "prefix_tree")
    scale, theta = params.laplace_scale, params.theta
    expand_threshold = params.expand_threshold(n_locations)
    parent, label, depth = [np.array([-1])], [np.array([-1])], [np.array([0])]
    count, spurious = [np.array([np.nan])], [np.array([False])]
    n_tree = 1
    frontier, cap = np.array([0], dtype=np.int64), np.array([_NO_CAP], dtype=np.int64)
    transitions: list[Transition] = []
    for level in range(params.height):
        if len(frontier) == 0:
            break
        keys, true_counts = _checked_counts(counter(level, transitions), frontier, n_locations, level)
        owner = np.searchsorted(frontier, keys // n_locations)
        noisy = true_counts + noise.laplace(scale, len(keys), rng)
        passed = noisy >= theta
        n_empty = n_locations - np.bincount(owner, minlength=len(frontier))
        bounded = params.expansion_policy == "parent_bound"
        k, empty_counts = sample_empty_passes(n_empty, cap if bounded else None, scale, theta, rng)
        _guard(n_tree - 1 + int(passed.sum()) + int(k.sum()), params, level, n_locations)
        empty_labels = sample_complement_labels(k, owner, keys % n_locations, n_locations, rng)

        child_owner = np.concatenate((owner[passed], np.repeat(np.arange(len(frontier)), k)))
        child_label = np.concatenate((keys[passed] % n_locations, empty_labels))
        child_count = np.concatenate((noisy[passed], empty_counts))
        child_spurious = np.concatenate((np.zeros(int(passed.sum()), bool), np.ones(len(empty_labels), bool)))
        # Sorting by (parent, label) also makes node ids independent of which children were spurious.
        keep = np.lexsort((child_label, child_owner))
        if bounded:
            keep = keep[_top_per_group(child_owner[keep], child_count[keep], cap)]
        child_owner, child_label = child_owner[keep], child_label[keep]
        child_count, child_spurious = child_count[keep], child_spurious[keep]
        if len(keep) == 0:
            break

        child_id = n_tree + np.arange(len(keep), dtype=np.int64)
        child_parent = frontier[child_owner]
        parent.append(child_parent)
        label.append(child_label)
        depth.append(np.full(len(keep), level + 1))
        count.append(child_count)
        spurious.append(child_spurious)
        n_tree += len(keep)

        expand = np.ones(len(keep), bool)
        if expand_threshold is not None:
            expand = child_count >= expand_threshold
        frontier = child_id[expand]
        cap = np.floor(child_count[expand] / theta).astype(np.int64)
        real = expand & ~child_spurious
        transitions.append((child_parent[real] * n_locations + child_label[real], child_id[real]))

    sizes = [len(a) for a in parent]
    return NoisyPrefixTree(
        params=params,
        n_locations=int(n_locations),
        parent=np.concatenate(parent).astype(np.int64),
        label=np.concatenate(label).astype(np.int64),
        depth=np.concatenate(depth).astype(np.int64),
        count=np.concatenate(count).astype(np.float64),
        spurious=np.concatenate(spurious),
        level_start=np.concatenate(([0], np.cumsum(sizes))).astype(np.int64),
    )


def _checked_counts(
    result: tuple[np.ndarray, np.ndarray], frontier: np.ndarray, n_locations: int, level: int
) -> tuple[np.ndarray, np.ndarray]:
    """The counter's ``(keys, counts)`` as int64, after checking they can come from this tree level."""
    where = f"prefix_tree counter, level {level}"
    keys, counts = (np.asarray(a) for a in result)
    if keys.ndim != 1 or keys.shape != counts.shape:
        raise InputError("keys and counts must be 1-D arrays of the same length", where)
    if not (np.issubdtype(keys.dtype, np.integer) and np.issubdtype(counts.dtype, np.integer)):
        raise InputError("keys and counts must be integer arrays", where)
    keys, counts = keys.astype(np.int64), counts.astype(np.int64)
    if np.any(np.diff(keys) <= 0) or np.any(counts < 1):
        raise InputError("keys must be sorted and unique, counts positive", where)
    parents = keys // n_locations
    pos = np.minimum(np.searchsorted(frontier, parents), len(frontier) - 1)
    if np.any(frontier[pos] != parents) or np.any(keys < 0):
        raise InputError("a key's parent is not a node expanded at this level", where)
    return keys, counts


def _top_per_group(owner: np.ndarray, count: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Mask of the entries among the ``cap[owner]`` largest counts of their owner (parent_bound, G1).

    ``owner`` must be sorted. The cap K(v) = ⌊c(v)/θ⌋ reads released noisy counts only (post-processing).
    """
    order = np.lexsort((-count, owner))
    sorted_owner = owner[order]
    rank = np.arange(len(owner)) - np.searchsorted(sorted_owner, sorted_owner, side="left")
    keep = np.zeros(len(owner), dtype=bool)
    keep[order] = rank < cap[sorted_owner]
    return keep


def _guard(n_nodes: int, params: PrefixTreeParams, level: int, n_locations: int) -> None:
    if n_nodes > params.max_nodes:
        suggestion = params.subcritical_expand_count(n_locations)
        raise ParameterError(
            f"the noisy prefix tree would exceed max_nodes={params.max_nodes} at level {level + 1} "
            f"({n_nodes} nodes) with expansion_policy {params.expansion_policy!r} and min_expand_count="
            f"{params.min_expand_count}: spurious subtrees grow geometrically for |L| = {n_locations}. Use "
            f"expansion_policy 'parent_bound' with min_expand_count >= {suggestion:.1f} "
            "(PrefixTreeParams.subcritical_expand_count), or raise max_nodes",
            "prefix_tree.max_nodes",
        )
