"""DPT discretisation (reference systems) and true counts: exact small cases and the L1 sensitivity bound."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.dpt import DptParams, Hierarchy, count_discretised, discretise, merge_counts
from mechanisms.dpt.counting import node_keys
from mechanisms.dpt.params import DIRECTIONS

EAST, NE, NORTH, SOUTH = 0, 1, 2, 6
H8 = Hierarchy(n_cols=8, n_rows=8, n_levels=2)


def _points(trajs: list[list[tuple[int, int]]], n_cols: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Trajectories of (col, row) base cells to (traj_ids, base cells)."""
    ids = np.concatenate([np.full(len(t), i) for i, t in enumerate(trajs)])
    cells = np.array([r * n_cols + c for t in trajs for c, r in t], dtype=np.int64)
    return ids, cells


def _cells(disc, j: int) -> list[int]:
    return disc.cells[disc.offsets[j]:disc.offsets[j + 1]].tolist()


def test_directions_are_the_eight_neighbours_by_angle() -> None:
    assert len(set(DIRECTIONS)) == 8 and all(max(abs(a), abs(b)) == 1 for a, b in DIRECTIONS)
    assert DIRECTIONS[EAST] == (1, 0) and DIRECTIONS[NORTH] == (0, 1) and DIRECTIONS[4] == (-1, 0)


def test_discretise_exact_small_case() -> None:
    trajs = [
        [(0, 0), (1, 0), (1, 0), (2, 1)],            # neighbour moves at level 0, one stay
        [(0, 0), (2, 0), (4, 0), (6, 0)],            # every move jumps at level 0, neighbours at level 1
        [(0, 0), (7, 0)],                            # jumps even at level 1 (coarsest): interpolated
    ]
    disc = discretise(*_points(trajs), H8, max_transitions=10, jump_tolerance=0.0)
    assert disc.level.tolist() == [0, 1, 1]
    assert _cells(disc, 0) == [0, 1, 8 + 2]          # stay collapsed; level-0 ids row*8+col
    assert disc.directions[disc.offsets[0]:disc.offsets[1]].tolist() == [EAST, NE, -1]
    assert _cells(disc, 1) == [0, 1, 2, 3]           # level-1 grid is 4x4: ids row*4+col
    assert _cells(disc, 2) == [0, 1, 2, 3]           # col 0 -> 3 filled with 1, 2
    assert disc.directions[disc.offsets[2]:disc.offsets[3]].tolist() == [EAST, EAST, EAST, -1]


def test_jump_tolerance_and_truncation() -> None:
    trajs = [[(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0), (7, 0), (7, 2)]]  # 1 jump in 8 moves
    strict = discretise(*_points(trajs), H8, max_transitions=20, jump_tolerance=0.0)
    loose = discretise(*_points(trajs), H8, max_transitions=20, jump_tolerance=0.125)
    assert strict.level.tolist() == [1] and loose.level.tolist() == [0]
    assert _cells(loose, 0) == [0, 1, 2, 3, 4, 5, 6, 7, 15, 23]  # the jump (7,0)->(7,2) filled with (7,1)
    short = discretise(*_points(trajs), H8, max_transitions=3, jump_tolerance=0.125)
    assert _cells(short, 0) == [0, 1, 2, 3] and short.lengths.tolist() == [4]


def test_node_keys_are_prefix_coded() -> None:
    disc = discretise(*_points([[(0, 0), (1, 0), (2, 1), (2, 2)]]), H8, 10, 0.0)
    k2, _ = node_keys(disc, 2)
    k3, _ = node_keys(disc, 3)
    assert k2.tolist() == [0 * 8 + EAST, 1 * 8 + NE, 10 * 8 + NORTH]
    assert k3.tolist() == [(0 * 8 + EAST) * 8 + NE, (1 * 8 + NE) * 8 + NORTH]
    assert (k3 // 8).tolist() == k2[:2].tolist()  # the parent of a node is its prefix


def _counts(trajs, params: DptParams, hier: Hierarchy = H8):
    disc = discretise(*_points(trajs, hier.n_cols), hier, params.max_transitions, params.jump_tolerance)
    return count_discretised(disc, hier.n_levels, [hier.n_cells(k) for k in range(hier.n_levels)],
                             params.max_height)


def _l1(a, b, name) -> int:
    ka, ca = a.get(*name)
    kb, cb = b.get(*name)
    keys = np.union1d(ka, kb)
    va, vb = np.zeros(len(keys), np.int64), np.zeros(len(keys), np.int64)
    va[np.searchsorted(keys, ka)] = ca
    vb[np.searchsorted(keys, kb)] = cb
    return int(np.abs(va - vb).sum())


def test_add_remove_one_record_moves_counts_by_at_most_the_sensitivity() -> None:
    params = DptParams(max_transitions=5, max_order=3, jump_tolerance=0.0)
    base = [[(0, 0), (1, 0), (2, 0)], [(3, 3), (3, 4), (4, 5), (4, 6)], [(0, 0), (2, 2), (4, 4)]]
    # a long level-0 record: a 4x4 loop repeated, truncated to m = 5 moves (6 cells, 5 windows at depth 2)
    loop = [(1, 1), (2, 1), (3, 1), (3, 2), (3, 3), (2, 3), (1, 3), (1, 2)] * 3
    a, b = _counts(base, params), _counts(base + [loop], params)
    assert _l1(a, b, ("length", 0, 0)) == 1 and _l1(a, b, ("start", 0, 0)) == 1
    for d in range(2, params.max_height + 1):
        assert _l1(a, b, ("node", 0, d)) == params.depth_sensitivity(d)  # the bound m+2−D is attained
        assert _l1(a, b, ("node", 1, d)) == 0  # the record lies in one system only
        distinct = abs(len(b.get("node", 0, d)[0]) - len(a.get("node", 0, d)[0]))
        assert distinct <= params.depth_sensitivity(d)
    # any record whatever its shape stays within the bounds
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(1, 30))
        walk = np.clip(np.cumsum(rng.integers(-2, 3, (n, 2)), axis=0) + 3, 0, 7)
        c = _counts(base + [[tuple(p) for p in walk]], params)
        total_node = sum(_l1(a, c, ("node", k, d)) for k in range(2) for d in range(2, params.max_height + 1))
        assert sum(_l1(a, c, ("length", k, 0)) for k in range(2)) == 1
        assert sum(_l1(a, c, ("start", k, 0)) for k in range(2)) == 1
        assert total_node <= params.select_sensitivity()


def test_merge_sums_partitions() -> None:
    params = DptParams(max_transitions=5, max_order=2)
    t1 = [[(0, 0), (1, 0), (2, 0)]]
    t2 = [[(0, 0), (1, 0)], [(5, 5), (5, 6)]]
    merged = merge_counts([_counts(t1, params), _counts(t2, params)])
    whole = _counts(t1 + t2, params)
    assert merged.n_trajectories == 3
    assert set(merged.tables) == set(whole.tables)
    for name in whole.tables:
        np.testing.assert_array_equal(merged.tables[name][0], whole.tables[name][0])
        np.testing.assert_array_equal(merged.tables[name][1], whole.tables[name][1])
    assert merged.get("node", 0, 2)[1].tolist() == [2, 1, 1]  # (0,0)->E twice, (1,0)->E, (5,5)->N


def test_outside_cells_are_refused() -> None:
    with pytest.raises(ValueError):
        discretise(np.array([0, 0]), np.array([0, -1]), H8, 5, 0.0)
