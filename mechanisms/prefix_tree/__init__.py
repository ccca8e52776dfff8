"""Noisy prefix tree for ε-DP trajectory publication: Chen, Fung, Desai (arXiv:1112.2020).
Labels G1–G20 in this package are our choices in docs/design.md (Prefix tree).

Public surface: :class:`PrefixTreeParams`, :func:`count_level` (true counts, runs next to the data),
:func:`build_tree` (noisy tree from counts only), :func:`release` (post-processing), :func:`sanitize_counts`
(all of it from a level counter), :func:`sanitize`
(all of it on in-memory data) and :func:`guarantee`.
"""

from mechanisms.prefix_tree.counting import LevelCounter, Transition, check_csr, count_level
from mechanisms.prefix_tree.guarantee import guarantee
from mechanisms.prefix_tree.inference import (
    consistent_estimates,
    intermediate_estimates,
    isotonic_non_decreasing,
    node_estimates,
)
from mechanisms.prefix_tree.mechanism import PrefixTreeResult, sanitize, sanitize_counts
from mechanisms.prefix_tree.params import PrefixTreeParams
from mechanisms.prefix_tree.release import SanitizedRelease, generate_release, release, terminating_counts
from mechanisms.prefix_tree.tree import NoisyPrefixTree, build_tree

__all__ = [
    "LevelCounter",
    "NoisyPrefixTree",
    "PrefixTreeParams",
    "PrefixTreeResult",
    "SanitizedRelease",
    "Transition",
    "build_tree",
    "check_csr",
    "consistent_estimates",
    "count_level",
    "generate_release",
    "guarantee",
    "intermediate_estimates",
    "isotonic_non_decreasing",
    "node_estimates",
    "release",
    "sanitize",
    "sanitize_counts",
    "terminating_counts",
]
