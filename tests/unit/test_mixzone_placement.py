"""UTMP mix-zone placement (Liu et al. 2012; Jin et al., TKDE 2023): zones are road vertices, at most K, start from a
vertex cover (the complement of a maximal independent set), the greedy removal is the exact greedy, and the
placement depends on the road network only."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import shapely

from mechanisms.mixzone import (
    articulation_points,
    maximal_independent_set,
    node_graph,
    place_mix_zones,
    split_components,
)
from mechanisms.mixzone.placement import _heapify, _sift_down, _sift_up
from trajpub.road_synthetic import synthetic_grid
from trajpub.roads import RoadNetwork


def network_from(coords: dict[int, tuple[float, float]], links: list[tuple[int, int]]) -> RoadNetwork:
    src = np.array([a for a, _ in links])
    dst = np.array([b for _, b in links])
    geom = [shapely.LineString([coords[a], coords[b]]) for a, b in links]
    return RoadNetwork(np.arange(len(links)), src, dst, np.array(["street"] * len(links), dtype=object),
                       np.array(geom, dtype=object))


def bowtie() -> RoadNetwork:
    """Two triangles {0,1,2} and {2,3,4} sharing vertex 2, plus a pendant 5 hanging off 4."""
    xy = {0: (0, 0), 1: (0, 100), 2: (100, 50), 3: (200, 0), 4: (200, 100), 5: (300, 100)}
    return network_from(xy, [(0, 1), (1, 2), (0, 2), (2, 3), (3, 4), (2, 4), (4, 5)])


def associations(indptr, indices, zone_mask) -> int:
    labels = split_components(indptr, indices, zone_mask)
    counts = np.bincount(labels[labels >= 0])
    return int((counts * (counts - 1) // 2).sum())


def naive_greedy(network: RoadNetwork, k: int) -> np.ndarray:
    """Reference: the paper's recomputation from scratch at every step (tiny graphs only)."""
    indptr, indices = node_graph(network)
    ap = articulation_points(indptr, indices)
    zone = ~maximal_independent_set(indptr, indices, ~ap)
    while zone.sum() > k:
        base = associations(indptr, indices, zone)
        best = None
        for z in np.flatnonzero(zone):
            trial = zone.copy()
            trial[z] = False
            c = associations(indptr, indices, trial) - base
            if best is None or c < best[0]:
                best = (c, z)
        zone[best[1]] = False
    return np.flatnonzero(zone)


def test_articulation_points_of_a_hand_made_graph():
    indptr, indices = node_graph(bowtie())
    assert np.flatnonzero(articulation_points(indptr, indices)).tolist() == [2, 4]


def test_articulation_points_match_brute_force_on_a_thinned_grid():
    net = synthetic_grid(7, 6, 100.0, drop_fraction=0.35, rng=np.random.default_rng(3))
    indptr, indices = node_graph(net)
    ap = articulation_points(indptr, indices)
    base = split_components(indptr, indices, np.zeros(net.n_nodes, bool)).max() + 1
    for v in range(net.n_nodes):
        removed = np.zeros(net.n_nodes, bool)
        removed[v] = True
        n_comp = len(np.unique(split_components(indptr, indices, removed)[~removed]))
        assert ap[v] == (n_comp > base), v


def test_mis_is_independent_and_maximal_within_the_split_graph():
    net = synthetic_grid(9, 8, 100.0, drop_fraction=0.2, rng=np.random.default_rng(5))
    indptr, indices = node_graph(net)
    ap = articulation_points(indptr, indices)
    mis = maximal_independent_set(indptr, indices, ~ap)
    assert not np.any(mis & ap)
    for v in range(net.n_nodes):
        nbrs = indices[indptr[v]:indptr[v + 1]]
        if mis[v]:
            assert not mis[nbrs].any()
        elif not ap[v]:
            assert mis[nbrs].any()  # maximal: every excluded allowed vertex has a neighbour in the set


def test_without_reduction_the_zones_form_a_vertex_cover():
    net = synthetic_grid(10, 10, 100.0, rng=np.random.default_rng(2))
    p = place_mix_zones(net, 10_000)
    indptr, indices = node_graph(net)
    zone = np.zeros(net.n_nodes, bool)
    zone[p.zones] = True
    row = np.repeat(np.arange(net.n_nodes), np.diff(indptr))
    assert np.all(zone[row] | zone[indices])  # no road links two non-zone vertices
    assert p.associations == 0 and len(p.zones) == p.n_candidates


@pytest.mark.parametrize("k", [1, 3, 8, 15])
def test_greedy_equals_the_naive_recomputation(k):
    net = synthetic_grid(6, 5, 100.0, drop_fraction=0.15, rng=np.random.default_rng(11))
    p = place_mix_zones(net, k)
    assert p.zones.tolist() == naive_greedy(net, k).tolist()
    indptr, indices = node_graph(net)
    zone = np.zeros(net.n_nodes, bool)
    zone[p.zones] = True
    assert p.associations == associations(indptr, indices, zone)


def test_zones_are_road_vertices_and_at_most_k():
    net = synthetic_grid(30, 30, 200.0, rng=np.random.default_rng(4))
    p = place_mix_zones(net, 100)
    assert len(p.zones) == 100 < p.n_candidates
    np.testing.assert_array_equal(p.zone_xy, net.node_xy[p.zones])
    assert set(p.node_id.tolist()) <= set(net.node_id.tolist())
    assert len(np.unique(p.zones)) == len(p.zones)


def test_placement_depends_on_the_network_only():
    net = synthetic_grid(12, 12, 150.0, rng=np.random.default_rng(8))
    a = place_mix_zones(net, 20)
    # the same network given with its edges in another row order (same ids) gives the same zones
    perm = np.random.default_rng(0).permutation(net.n_edges)
    shuffled = RoadNetwork(net.edge_id[perm], net.node_id[net.source_index[perm]],
                           net.node_id[net.target_index[perm]], net.road_class[perm], net.geometry[perm])
    b = place_mix_zones(shuffled, 20)
    np.testing.assert_array_equal(a.node_id, b.node_id)
    np.testing.assert_array_equal(a.zone_xy, b.zone_xy)
    assert a.digest == b.digest != place_mix_zones(net, 19).digest


def test_all_pairs_bruteforce_associations_on_bowtie():
    net = bowtie()
    p = place_mix_zones(net, 1)
    indptr, indices = node_graph(net)
    zone = np.zeros(net.n_nodes, bool)
    zone[p.zones] = True
    # brute force: pairs of non-zone vertices connected in the graph minus the zones
    labels = split_components(indptr, indices, zone)
    pairs = sum(1 for a, b in itertools.combinations(np.flatnonzero(~zone), 2) if labels[a] == labels[b])
    assert p.associations == pairs
    # with one zone, the cut vertex 2 splits {0,1} from {3,4,5}: 1 + 3 = 4 pairs, the fewest possible
    assert p.zones.tolist() == [2] and pairs == 4


def test_the_array_heap_pops_in_sorted_order():
    """The greedy's binary heap of (cost, node) pairs, including replacing the top, against a sort."""
    rng = np.random.default_rng(9)
    n = 500
    cost, node = rng.integers(0, 20, 2 * n), np.r_[rng.permutation(n), np.zeros(n, np.int64)]
    _heapify(cost, node, n)
    for _ in range(100):  # raise the top's cost, as the greedy does with a stale lower bound
        cost[0] += rng.integers(0, 5)
        _sift_down(cost, node, n, 0)
    for i in range(n, n + 50):  # push
        cost[i], node[i] = rng.integers(0, 30), n + i
        _sift_up(cost, node, i)
    size, popped = n + 50, []
    while size:
        popped.append((int(cost[0]), int(node[0])))
        size -= 1
        cost[0], node[0] = cost[size], node[size]
        _sift_down(cost, node, size, 0)
    assert popped == sorted(popped)
    assert len({nd for _, nd in popped}) == n + 50
