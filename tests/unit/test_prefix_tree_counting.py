"""count_level: the true per-level prefix counts (Def. 3.4, Procedure 1 line 11) on CSR partitions.

partition bookkeeping, the paper's Table II toy example and additivity over partitions (Dask use).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from mechanisms.prefix_tree import check_csr, count_level
from trajpub.errors import InputError


def full_tree(offsets, locs, n_locations, height):
    """Every true prefix as a node, ids in level order; returns ({prefix: count}, transitions)."""
    counts: dict[tuple[int, ...], int] = {}
    prefix_of = {0: ()}
    transitions = []
    next_id = 1
    for level in range(height):
        keys, level_counts = count_level(offsets, locs, n_locations, level, transitions)
        ids = np.arange(next_id, next_id + len(keys))
        next_id += len(keys)
        for key, node_id, count in zip(keys.tolist(), ids.tolist(), level_counts.tolist(), strict=True):
            prefix = (*prefix_of[key // n_locations], key % n_locations)
            prefix_of[node_id] = prefix
            counts[prefix] = count
        transitions.append((keys, ids))
    return counts, transitions


def brute_force_prefix_counts(offsets, locs, height):
    counts: Counter = Counter()
    for j in range(len(offsets) - 1):
        trajectory = tuple(locs[offsets[j] : offsets[j + 1]].tolist())
        for d in range(1, min(len(trajectory), height) + 1):
            counts[trajectory[:d]] += 1
    return dict(counts)


def test_table_ii_true_prefix_and_terminating_counts(prefix_tree_toy):
    # Fig. 1 of the paper (L1..L4 = 0..3).
    offsets, locs = prefix_tree_toy
    counts, _ = full_tree(offsets, locs, 4, height=4)
    assert counts == {
        (0,): 5, (0, 1): 5, (0, 1, 2): 2, (0, 1, 3): 2, (0, 1, 3, 0): 1,
        (2,): 3, (2, 1): 2, (2, 1, 0): 1, (2, 0): 1,
    }  # fmt: skip
    children_sum = Counter()
    for prefix, count in counts.items():
        if len(prefix) > 1:
            children_sum[prefix[:-1]] += count
    terminating = {p: c - children_sum[p] for p, c in counts.items() if c - children_sum[p] > 0}
    assert terminating == {
        (0, 1): 1,
        (0, 1, 2): 2,
        (0, 1, 3): 1,
        (0, 1, 3, 0): 1,
        (2, 1): 1,
        (2, 1, 0): 1,
        (2, 0): 1,
    }
    assert sum(terminating.values()) == 8


def test_truncation_at_height(prefix_tree_toy):
    # G10: at h = 3 the 4-location record L1→L2→L4→L1 counts only up to its 3-prefix.
    offsets, locs = prefix_tree_toy
    counts, _ = full_tree(offsets, locs, 4, height=3)
    assert (0, 1, 3, 0) not in counts and counts[(0, 1, 3)] == 2 and max(map(len, counts)) == 3


def test_level_sums_and_child_bounds_on_random_walks(random_walk_csr):
    # The candidates of a level partition the trajectories long enough to reach it, and a child never
    # holds more trajectories than its parent.
    offsets, locs = random_walk_csr(3000, 25, 4.0, seed=11)
    lengths = np.diff(offsets)
    counts, transitions = full_tree(offsets, locs, 25, height=6)
    assert counts == brute_force_prefix_counts(offsets, locs, 6)
    for level in range(6):
        keys, level_counts = count_level(offsets, locs, 25, level, transitions[:level])
        assert np.all(np.diff(keys) > 0) and np.all(level_counts >= 1)
        assert level_counts.sum() == np.sum(lengths > level) <= len(lengths)
    for prefix, count in counts.items():
        if len(prefix) > 1:
            assert count <= counts[prefix[:-1]]


def test_trajectories_leave_the_tree_at_a_missing_node(prefix_tree_toy):
    # The same with a pruned tree: dropping node L3 at level 1 removes its 3 trajectories from level 2 on,
    # so the level sum is strictly below #{|D| ≥ 2}.
    offsets, locs = prefix_tree_toy
    _, transitions = full_tree(offsets, locs, 4, height=3)
    keys0, ids0 = transitions[0]
    keep = keys0 != 2  # root (0) * 4 + L3 (2)
    pruned = [(keys0[keep], ids0[keep])]
    keys, counts = count_level(offsets, locs, 4, 1, pruned)
    l1 = int(ids0[keys0 == 0][0])
    assert keys.tolist() == [l1 * 4 + 1] and counts.tolist() == [5]
    assert counts.sum() < np.sum(np.diff(offsets) >= 2)


@pytest.mark.parametrize("split", [0, 1, 1234, 2999, 3000])
def test_counts_add_up_over_partitions(random_walk_csr, split):
    offsets, locs = random_walk_csr(3000, 30, 5.0, seed=3)
    _, transitions = full_tree(offsets, locs, 30, height=5)
    rng = np.random.default_rng(split)
    pruned = [(k[m], i[m]) for k, i in transitions for m in [rng.random(len(k)) < 0.8]]
    first = (offsets[: split + 1], locs[: offsets[split]])
    second = (offsets[split:] - offsets[split], locs[offsets[split] :])
    for level in range(5):
        whole = dict(zip(*count_level(offsets, locs, 30, level, pruned[:level]), strict=True))
        summed: Counter = Counter()
        for part_offsets, part_locs in (first, second):
            keys, counts = count_level(part_offsets, part_locs, 30, level, pruned[:level])
            summed.update(dict(zip(keys.tolist(), counts.tolist(), strict=True)))
        assert dict(summed) == {int(k): int(v) for k, v in whole.items()}


def test_empty_partition_gives_empty_counts():
    keys, counts = count_level(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), 5, 0, [])
    assert len(keys) == 0 and len(counts) == 0


def test_locations_outside_the_public_universe_are_rejected(prefix_tree_toy):
    # G4: the universe is public; a location outside it is an input error, never silently dropped.
    offsets, locs = prefix_tree_toy
    with pytest.raises(InputError, match="outside the public universe"):
        count_level(offsets, locs, 3, 0, [])
    with pytest.raises(InputError, match="outside the public universe"):
        check_csr(offsets, locs, 3)
    with pytest.raises(InputError, match="offsets"):
        check_csr(offsets[:-1], locs, 4)
    with pytest.raises(InputError, match="transitions"):
        count_level(offsets, locs, 4, 2, [])
