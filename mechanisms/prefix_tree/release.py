"""GeneratePrivateRelease (Sec. IV-B): the sanitized database D̃ from the noisy tree alone (post-processing).

Every node v emits N(v) = max(0, round(n(v))) copies of prefix(v), where n(v) = value(v) − Σ_{children u}
value(u) is the number of trajectories estimated to end at v (for a leaf, n(v) = value(v); a leaf at depth h
also stands for the longer trajectories truncated there, G10). "Basic" uses the noisy counts c, "Full" the
consistent estimates c̄ (Sec. IV-B; G9).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from mechanisms.prefix_tree.inference import node_estimates
from mechanisms.prefix_tree.params import PrefixTreeParams
from mechanisms.prefix_tree.tree import NoisyPrefixTree
from trajpub.errors import ParameterError


@dataclass(frozen=True, eq=False)
class SanitizedRelease:
    """The multiset D̃, stored as its distinct trajectories with multiplicities.

    Distinct trajectory i is ``locs[offsets[i]:offsets[i+1]]`` (locations 0..|L|−1, length 1..h) and occurs
    ``multiplicity[i] ≥ 1`` times. :meth:`expanded` gives one row per released record.
    """

    offsets: np.ndarray
    locs: np.ndarray
    multiplicity: np.ndarray

    def __post_init__(self) -> None:
        if len(self.offsets) != len(self.multiplicity) + 1 or np.any(self.multiplicity < 1):
            raise ValueError("one multiplicity ≥ 1 per distinct trajectory")

    @property
    def n_records(self) -> int:
        """|D̃|: random, and not equal to |D| in general."""
        return int(self.multiplicity.sum())

    def expanded(self) -> tuple[np.ndarray, np.ndarray]:
        """D̃ as CSR ``(offsets, locs)`` with one trajectory per released record."""
        rows = np.repeat(np.arange(len(self.multiplicity)), self.multiplicity)
        lengths = np.diff(self.offsets)[rows]
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        starts = np.repeat(self.offsets[:-1][rows] - offsets[:-1], lengths)
        locs = self.locs[np.arange(offsets[-1]) + starts]
        return offsets, locs


def terminating_counts(tree: NoisyPrefixTree, values: np.ndarray) -> np.ndarray:
    """n(v) = value(v) − Σ_{u ∈ children(v)} value(u); entry 0 (the root, which emits nothing) is 0."""
    n = values - np.bincount(tree.parent[1:], values[1:], minlength=len(values))
    n[0] = 0.0
    return n


def round_counts(n: np.ndarray, rounding: str, rng: np.random.Generator) -> np.ndarray:
    """N = max(0, round(n)) with round half up, or stochastic rounding floor(n) + Bernoulli(frac) (G9)."""
    if rounding == "half_up":
        rounded = np.floor(n + 0.5)
    elif rounding == "stochastic":
        floor = np.floor(n)
        rounded = floor + (rng.random(len(n)) < n - floor)
    else:
        raise ValueError(f"unknown rounding {rounding!r}")
    return np.maximum(rounded, 0).astype(np.int64)


def generate_release(
    tree: NoisyPrefixTree, values: np.ndarray, rounding: str, rng: np.random.Generator
) -> SanitizedRelease:
    """Phase D: emit max(0, round(n(v))) copies of prefix(v) for every non-root node, in node order."""
    copies = round_counts(terminating_counts(tree, values), rounding, rng)
    copies[0] = 0
    nodes = np.flatnonzero(copies)
    lengths = tree.depth[nodes]
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    locs = np.empty(offsets[-1], dtype=np.int64)
    position = offsets[1:] - 1
    node = nodes
    while len(node):  # write each prefix backwards, from v up to its level-1 ancestor
        locs[position] = tree.label[node]
        above = tree.parent[node] > 0
        node, position = tree.parent[node][above], position[above] - 1
    return SanitizedRelease(offsets=offsets, locs=locs, multiplicity=copies[nodes])


def release(tree: NoisyPrefixTree, params: PrefixTreeParams, rng: np.random.Generator) -> SanitizedRelease:
    """GeneratePrivateRelease: "Basic" (``consistency="none"``) or "Full" (constrained inference first).

    ``params`` may differ from the tree's build parameters only in ``consistency`` and ``rounding``, which
    are post-processing choices (for example Basic and Full from one tree).
    """
    build_params = dataclasses.replace(
        params, consistency=tree.params.consistency, rounding=tree.params.rounding
    )
    if build_params != tree.params:
        raise ParameterError(
            "release parameters must match the tree's build parameters except consistency and rounding",
            "prefix_tree.release",
        )
    return generate_release(tree, node_estimates(tree, params.consistency), params.rounding, rng)
