"""Phase 1: dummy trajectories (Chen, Li, Zhang 2020, Alg. 1, Defs 4–6; A2, A4, A5 of docs/design.md)."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.kpsi_anonymity import (
    KPsiParams,
    generate_dummies,
    is_k_psi_anonymous,
    travel_budgets,
    within_discs,
)
from trajpub.errors import InputError, ParameterError
from trajpub.road_synthetic import generate_trajectories, synthetic_grid
from trajpub.roads import RoadNetwork

NET = synthetic_grid(15, 15, 80.0, rng=np.random.default_rng(21))
N_TRAJ = 40


def batch(net: RoadNetwork = NET, n: int = N_TRAJ, n_points: int = 13, seed: int = 22):
    tr = generate_trajectories(net, n, n_points, rng=np.random.default_rng(seed))
    xy = tr[["x", "y"]].to_numpy()
    t_s = tr["t"].dt.as_unit("ns").astype("int64").to_numpy() / 1e9
    return xy, t_s - t_s.min(), np.arange(n + 1) * n_points


def rngs(seed: int, n: int = N_TRAJ) -> list[np.random.Generator]:
    return np.random.default_rng(seed).spawn(n)


XY, T_S, OFFSETS = batch()


def measured_violations(one, params: KPsiParams, net: RoadNetwork) -> int:
    """Dummy moves whose network distance (from the dummy's previous point to its new edge) exceeds B_i."""
    budget = travel_budgets(one.real, T_S, OFFSETS, params)
    table = net.node_distances(params.max_link_budget_m)
    count = 0
    for r in range(len(OFFSETS) - 1):
        for i in range(OFFSETS[r] + 1, OFFSETS[r + 1]):
            prev_e, prev = one.dummy_edge[i - 1], one.dummies[i - 1]
            _, _, offset = net.project_onto(prev[:, 0], prev[:, 1], prev_e)
            d = net.network_distance_to_edges(table, prev_e, offset, one.dummy_edge[i])
            count += int((d > budget[i] + 1e-9).sum())
    return count


def test_road_aware_sets_satisfy_the_definitions_and_stay_on_distinct_edges():
    params = KPsiParams()
    one = generate_dummies(XY, T_S, OFFSETS, NET, params, rngs(1))
    assert one.ok.all() and one.dummies.shape == (len(XY), 7, 2)
    for r in range(N_TRAJ):
        s = slice(OFFSETS[r], OFFSETS[r + 1])
        locs, psi = one.locations(r), one.psi[s]
        assert locs.shape == (8, 13, 2) and np.array_equal(locs[-1], XY[s])
        assert within_discs(locs, XY[s], psi)  # Alg. 1 line 11
        assert is_k_psi_anonymous(locs, psi, params.k)  # Defs 4-6
        assert np.all((psi >= params.delta_min_m) & (psi <= params.delta_max_m))
        pts = locs.reshape(-1, 2)
        diff = pts[:, None] - pts[None]
        # separation at each timestamp
        d = np.hypot(*(locs[:, None] - locs[None]).transpose(3, 0, 1, 2))
        assert np.all(d[~np.eye(8, dtype=bool)] >= params.min_separation_m)
        del diff
    dummies = one.dummies.reshape(-1, 2)
    assert NET.distance_to_network(dummies[:, 0], dummies[:, 1]).max() <= 1e-6  # on the road
    assert np.all(NET.pair_distances(dummies[:, 0], dummies[:, 1], one.dummy_edge.ravel()) <= 1e-6)
    for i in range(len(XY)):
        edges = one.dummy_edge[i]
        assert len(set(edges)) == 7 and one.real_edge[i] not in edges


def test_reachable_linking_records_exactly_the_moves_beyond_the_budget():
    params = KPsiParams()
    one = generate_dummies(XY, T_S, OFFSETS, NET, params, rngs(2))
    recorded = int(one.motion_violations.sum())
    assert recorded == measured_violations(one, params, NET)
    moves = N_TRAJ * 12 * 7
    assert recorded < 0.3 * moves  # most dummy moves are reachable within budget
    index = KPsiParams(linking="index")
    free = generate_dummies(XY, T_S, OFFSETS, NET, index, rngs(2))
    assert free.motion_violations.sum() == 0
    assert measured_violations(free, index, NET) > recorded  # the paper's linking jumps more often


def test_a_trajectory_gets_the_same_dummies_alone_or_in_a_batch_and_seeds_matter():
    params = KPsiParams()
    xy0, t0 = XY.copy(), T_S.copy()
    full = generate_dummies(XY, T_S, OFFSETS, NET, params, rngs(3))
    again = generate_dummies(XY, T_S, OFFSETS, NET, params, rngs(3))
    assert np.array_equal(full.dummies, again.dummies, equal_nan=True)
    r = 7
    s = slice(OFFSETS[r], OFFSETS[r + 1])
    alone = generate_dummies(XY[s], T_S[s], np.array([0, 13]), NET, params, [rngs(3)[r]])
    assert np.array_equal(alone.dummies, full.dummies[s])
    other = generate_dummies(XY, T_S, OFFSETS, NET, params, rngs(4))
    assert not np.allclose(other.dummies, full.dummies)
    assert np.array_equal(XY, xy0) and np.array_equal(T_S, t0)  # inputs untouched


def test_road_ignoring_dummies_fill_the_disc_and_leave_the_road():
    params = KPsiParams(road_aware=False)
    aware = generate_dummies(XY, T_S, OFFSETS, NET, KPsiParams(), rngs(5))
    one = generate_dummies(XY, T_S, OFFSETS, NET, params, rngs(5), psi=aware.psi)
    assert np.array_equal(one.psi, aware.psi) and np.all(one.dummy_edge == -1)
    for r in range(N_TRAJ):
        s = slice(OFFSETS[r], OFFSETS[r + 1])
        assert within_discs(one.locations(r), XY[s], one.psi[s])
    d = one.dummies.reshape(-1, 2)
    off = NET.distance_to_network(d[:, 0], d[:, 1])
    assert (off > 1.0).mean() > 0.5  # most of a disc is not road
    # Euclidean reachability: a dummy moves at most B_i unless the move is recorded as a violation
    budget = travel_budgets(one.real, T_S, OFFSETS, params)
    step = np.hypot(*(one.dummies[1:] - one.dummies[:-1]).transpose(2, 0, 1))
    same = np.repeat(np.arange(N_TRAJ), 13)
    follows = same[1:] == same[:-1]
    over = (step[follows] > budget[1:][follows, None] + 1e-9).sum()
    assert over == one.motion_violations.sum()


def test_without_a_network_only_constant_road_ignoring_discs_are_possible():
    params = KPsiParams(road_aware=False, psi_mode="constant", delta_m=150.0)
    one = generate_dummies(XY, T_S, OFFSETS, None, params, rngs(6))
    assert one.ok.all() and np.all(one.psi == 150.0) and np.all(one.real_edge == -1)
    r0 = np.hypot(*(one.dummies - XY[:, None]).transpose(2, 0, 1))
    assert r0.max() <= 150.0 and r0.max() > 140.0
    with pytest.raises(ParameterError, match="needs a road network"):
        generate_dummies(XY, T_S, OFFSETS, None, KPsiParams(road_aware=False), rngs(6))
    with pytest.raises(InputError, match="road network"):
        generate_dummies(XY, T_S, OFFSETS, None, KPsiParams(), rngs(6))


def test_crowded_steps_are_redrawn_and_impossible_ones_stop_after_max_tries():
    crowded = KPsiParams(min_separation_m=5.0)
    one = generate_dummies(XY, T_S, OFFSETS, NET, crowded, rngs(7))
    assert one.redraws.sum() > 0 and one.ok.all()
    # redrawn steps (some of them past the half-way point, where the budget is ignored) still report exactly
    # the moves beyond the budget
    assert one.motion_violations.sum() == measured_violations(one, crowded, NET)
    for r in np.flatnonzero(one.ok):
        locs = one.locations(r)
        d = np.hypot(*(locs[:, None] - locs[None]).transpose(3, 0, 1, 2))
        assert d[~np.eye(8, dtype=bool)].min() >= 5.0
    impossible = KPsiParams(min_separation_m=10_000.0, max_tries=3)
    stuck = generate_dummies(XY, T_S, OFFSETS, NET, impossible, rngs(7))
    assert not stuck.ok.any() and np.all(stuck.bad_point == 0)
    assert np.all(stuck.redraws == impossible.max_tries - 1) and "3 draws" in stuck.reason[0]
    assert np.isnan(stuck.dummies).all()


def test_snapping_moves_off_road_real_points_onto_their_edge():
    rng = np.random.default_rng(8)
    noisy = XY + rng.normal(0, 8, XY.shape)
    snapped = generate_dummies(noisy, T_S, OFFSETS, NET, KPsiParams(snap_real=True), rngs(9))
    assert NET.distance_to_network(snapped.real[:, 0], snapped.real[:, 1]).max() <= 1e-9
    assert snapped.real_offroad.max() > 5.0  # the status keeps the original offsets
    plain = generate_dummies(noisy, T_S, OFFSETS, NET, KPsiParams(), rngs(9))
    assert np.array_equal(plain.real, noisy)
