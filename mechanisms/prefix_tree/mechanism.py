"""Algorithm 1, Sanitize(D, ε, h) (Chen, Fung, Desai, Sec. IV), once: :func:`sanitize_counts` from a level
counter, which answers next to the data (:func:`~mechanisms.prefix_tree.counting.count_level` on each partition,
summed by key, in the release flow); :func:`sanitize` on in-memory CSR trajectories.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mechanisms.prefix_tree.counting import Transition, check_csr, count_level
from mechanisms.prefix_tree.inference import node_estimates
from mechanisms.prefix_tree.params import PrefixTreeParams
from mechanisms.prefix_tree.release import SanitizedRelease, generate_release
from mechanisms.prefix_tree.tree import NoisyPrefixTree, build_tree


@dataclass(frozen=True, eq=False)
class PrefixTreeResult:
    """The noisy tree, the per-node values the release read (c for Basic, c̄ for Full), and D̃."""

    params: PrefixTreeParams
    tree: NoisyPrefixTree
    estimates: np.ndarray
    release: SanitizedRelease

    def metadata(self) -> dict:
        """Lineage facts: the tree's metadata plus the release's size. No seed, no true count."""
        return {
            **self.tree.metadata(),
            "consistency": self.params.consistency,
            "rounding": self.params.rounding,
            "n_released_records": self.release.n_records,
            "n_distinct_released_trajectories": len(self.release.multiplicity),
        }


def sanitize(
    offsets: np.ndarray,
    locs: np.ndarray,
    n_locations: int,
    params: PrefixTreeParams,
    rng: np.random.Generator,
) -> PrefixTreeResult:
    """Sanitize D (CSR over the public universe 0..n_locations−1): build the noisy tree, infer, release."""
    offsets, locs = np.asarray(offsets, dtype=np.int64), np.asarray(locs)
    check_csr(offsets, locs, n_locations)

    def counter(level: int, transitions: list[Transition]) -> tuple[np.ndarray, np.ndarray]:
        return count_level(offsets, locs, n_locations, level, transitions)

    return sanitize_counts(counter, n_locations, params, rng)


def sanitize_counts(
    counter: Callable[[int, list[Transition]], tuple[np.ndarray, np.ndarray]],
    n_locations: int,
    params: PrefixTreeParams,
    rng: np.random.Generator,
) -> PrefixTreeResult:
    """Sanitize the data ``counter`` answers for (the true prefix counts of a level, :func:`build_tree`): build
    the noisy tree from the counts, infer, release."""
    tree = build_tree(counter, n_locations, params, rng)
    estimates = node_estimates(tree, params.consistency)
    return PrefixTreeResult(
        params=params,
        tree=tree,
        estimates=estimates,
        release=generate_release(tree, estimates, params.rounding, rng),
    )
