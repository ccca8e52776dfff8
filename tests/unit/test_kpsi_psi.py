"""The threshold set Ψ and the candidate edges (docs/design.md, (k-Ψ)-anonymity, A1, A2)."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from mechanisms.kpsi_anonymity import (
    KPsiParams,
    constant_delta,
    feasible_discs,
    initial_thresholds,
    segment_thresholds,
)
from trajpub.errors import ParameterError
from trajpub.road_synthetic import generate_trajectories, synthetic_grid
from trajpub.roads import RoadNetwork

REGULAR = synthetic_grid(15, 15, 80.0, jitter=0.0, drop_fraction=0.0, arterials=0)


def on_road_points(net: RoadNetwork, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tr = generate_trajectories(net, n, 1, rng=np.random.default_rng(seed))
    x, y = tr["x"].to_numpy(), tr["y"].to_numpy()
    return x, y, net.nearest_edges(x, y)[0]


def interior(x: np.ndarray, y: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return (x > lo) & (x < hi) & (y > lo) & (y < hi)


def test_on_a_regular_grid_every_interior_delta_is_1_1_times_the_block():
    # On a regular grid of block s, r_8 = s at every on-road point away from the border (own edge and the 6
    # edges at its two end nodes are closer; the parallel edges one block away are at exactly s), so both
    # rules give (1 + mu) s = 88 m.
    x, y, e = on_road_points(REGULAR, 300, 1)
    inside = interior(x, y, 240, 880)
    assert inside.sum() > 50
    for mode in ("segment", "point"):
        delta = initial_thresholds(REGULAR, KPsiParams(psi_mode=mode), x[inside], y[inside], e[inside])
        np.testing.assert_allclose(delta, 88.0, rtol=1e-12)


def test_deltas_are_clipped_and_constant_mode_is_constant():
    net = synthetic_grid(20, 20, 80.0, rng=np.random.default_rng(2))
    x, y, e = on_road_points(net, 400, 3)
    for params in (KPsiParams(), KPsiParams(psi_mode="point"),
                   KPsiParams(delta_min_m=90.0, delta_max_m=95.0)):
        delta = initial_thresholds(net, params, x, y, e)
        assert delta.shape == x.shape
        assert np.all((delta >= params.delta_min_m) & (delta <= params.delta_max_m))
    seg = KPsiParams()
    assert np.all(initial_thresholds(net, seg, x, y, e) >= segment_thresholds(net, seg)[e] - 1e-12)
    varied = initial_thresholds(net, seg, x, y, e)
    assert varied.std() > 1.0  # the jittered, thinned grid makes Psi adapt
    const = initial_thresholds(net, KPsiParams(psi_mode="constant", delta_m=120.0), x, y, e)
    assert np.all(const == 120.0)
    auto = initial_thresholds(net, KPsiParams(psi_mode="constant"), x, y, e)
    assert np.all(auto == constant_delta(net, KPsiParams(psi_mode="constant")))
    assert auto[0] == segment_thresholds(net, KPsiParams(psi_mode="constant")).max()
    with pytest.raises(ParameterError, match="needs a road network"):
        initial_thresholds(None, KPsiParams(), x, y, e)


def test_dense_districts_get_smaller_deltas_than_sparse_ones():
    dense = synthetic_grid(21, 21, 50.0, jitter=0.0, drop_fraction=0.0, arterials=0)  # x in [0, 1000]
    sparse = synthetic_grid(6, 6, 200.0, jitter=0.0, drop_fraction=0.0, arterials=0, origin=(1000.0, 0.0))
    net = RoadNetwork.concat([dense, sparse])
    x, y = np.array([500.0, 1500.0]), np.array([525.0, 400.0])  # both on an edge, mid-district
    e = net.nearest_edges(x, y)[0]
    for mode in ("segment", "point"):
        delta = initial_thresholds(net, KPsiParams(psi_mode=mode), x, y, e)
        assert delta[0] < delta[1]
        assert delta[0] == pytest.approx(55.0) and delta[1] == pytest.approx(220.0)


def test_candidates_are_the_other_edges_with_enough_road_inside_the_disc():
    net = synthetic_grid(15, 15, 80.0, rng=np.random.default_rng(4))
    x, y, e = on_road_points(net, 200, 5)
    params = KPsiParams()
    delta0 = initial_thresholds(net, params, x, y, e)
    discs = feasible_discs(net, params, x, y, e, delta0)
    assert not np.isnan(discs.delta).any()
    circles = shapely.buffer(shapely.points(x, y), discs.delta, quad_segs=1024)
    for i in range(len(x)):
        cand = discs.cand_edge[discs.cand_start[i]:discs.cand_start[i + 1]]
        assert len(cand) >= params.k - 1 and e[i] not in cand and len(np.unique(cand)) == len(cand)
        inside = shapely.length(shapely.intersection(net.geometry, circles[i]))
        inside[e[i]] = 0.0
        # brute force with a 4096-gon; edges within 1 mm of the 1 m threshold are not decided by it
        clear = np.abs(inside - params.min_part_m) > 1e-3
        assert set(np.flatnonzero(clear & (inside >= params.min_part_m))) == set(cand[clear[cand]])
    np.testing.assert_allclose(discs.parts.pair_length[discs.cand_start[0]:discs.cand_start[1]],
                               shapely.length(shapely.intersection(net.geometry[discs.cand_edge[
                                   discs.cand_start[0]:discs.cand_start[1]]], circles[0])), atol=1e-3)


def test_an_infeasible_disc_grows_by_gamma_until_it_holds_k_minus_1_usable_edges():
    # At a node of the regular grid with mu = 0, delta = r_8 = 80 m: the 12 edges one block away only touch
    # the disc (0 m inside), so only the 3 other incident edges are usable; one growth to 100 m suffices.
    x, y = np.array([560.0]), np.array([560.0])
    e = REGULAR.nearest_edges(x, y)[0]
    params = KPsiParams(psi_mode="point", mu=0.0)
    delta0 = initial_thresholds(REGULAR, params, x, y, e)
    assert delta0[0] == pytest.approx(80.0)
    discs = feasible_discs(REGULAR, params, x, y, e, delta0)
    assert discs.delta[0] == pytest.approx(100.0) and discs.grown[0] == 1
    assert len(discs.cand_edge) >= 7
    stuck = feasible_discs(REGULAR, KPsiParams(psi_mode="point", mu=0.0, max_grow=0), x, y, e, delta0)
    assert np.isnan(stuck.delta[0]) and len(stuck.cand_edge) == 0


def test_a_network_with_too_few_edges_is_infeasible_at_the_cap():
    lines = [[(i * 50.0, 0.0), ((i + 1) * 50.0, 0.0)] for i in range(5)]
    net = RoadNetwork(np.arange(5), np.arange(5), np.arange(1, 6), np.array(["r"] * 5),
                      np.array(shapely.linestrings(lines), dtype=object))
    x, y = np.array([120.0]), np.array([0.0])
    e = net.nearest_edges(x, y)[0]
    params = KPsiParams()
    discs = feasible_discs(net, params, x, y, e, initial_thresholds(net, params, x, y, e))
    assert np.isnan(discs.delta[0])
