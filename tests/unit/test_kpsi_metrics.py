"""Definitions 4-6 and the discernibility metric (Chen, Li, Zhang 2020, §4.1, §7.1 Eq. 20)."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.kpsi_anonymity import KPsiParams, discernibility, generate_dummies, is_k_psi_anonymous
from trajpub.road_synthetic import generate_trajectories, synthetic_grid

# k = 3 trajectories, n = 2 timestamps
TOY = np.array([[[0.0, 0.0], [0.0, 0.0]],
                [[3.0, 4.0], [1.0, 0.0]],
                [[0.0, 2.0], [0.0, 6.0]]])
TOY_PSI = np.array([5.0, 4.0])


def test_discernibility_equals_the_hand_computation_with_and_without_the_off_road_penalty():
    # D_01 = max(5, 1) = 5; D_02 = max(2, 6) = 6; D_12 = max(sqrt(13), sqrt(37)) = sqrt(37)
    plain = 2 * (1 / 5 + 1 / 6 + 1 / np.sqrt(37))
    assert discernibility(TOY, TOY_PSI) == pytest.approx(plain / 6)
    assert discernibility(TOY, TOY_PSI, normalized=False) == pytest.approx(plain)
    # trajectory 1 off-road at t_2: 2 delta_2 = 8
    off = np.array([[False, False], [False, True], [False, False]])
    penal = 2 * (1 / max(5, 8) + 1 / 6 + 1 / max(np.sqrt(13), 8))
    assert discernibility(TOY, TOY_PSI, off) == pytest.approx(penal / 6)
    assert discernibility(TOY[[2, 0, 1]], TOY_PSI) == pytest.approx(discernibility(TOY, TOY_PSI))


def test_the_k_psi_checker_accepts_sets_within_2_delta_and_rejects_a_point_moved_beyond():
    ok = np.array([[[0.0, 0.0]], [[5.0, 0.0]], [[-5.0, 0.0]]])
    assert is_k_psi_anonymous(ok, np.array([5.0]), 3)
    assert not is_k_psi_anonymous(ok, np.array([5.0]), 4)  # too few trajectories
    moved = ok.copy()
    moved[1, 0, 0] = -5.0 + 2 * 5.0 + 1  # 2 delta + 1 from trajectory 2
    assert not is_k_psi_anonymous(moved, np.array([5.0]), 3)


def test_road_aware_dummies_are_harder_to_tell_apart_than_road_ignoring_ones():
    net = synthetic_grid(15, 15, 80.0, rng=np.random.default_rng(41))
    tr = generate_trajectories(net, 30, 13, rng=np.random.default_rng(42))
    xy = tr[["x", "y"]].to_numpy()
    t_s = tr["t"].dt.as_unit("ns").astype("int64").to_numpy() / 1e9
    offsets = np.arange(31) * 13
    aware = generate_dummies(xy, t_s, offsets, net, KPsiParams(), np.random.default_rng(43).spawn(30))
    blind = generate_dummies(xy, t_s, offsets, net, KPsiParams(road_aware=False),
                             np.random.default_rng(44).spawn(30), psi=aware.psi)
    dm_aware, dm_blind = [], []
    for r in range(30):
        s = slice(offsets[r], offsets[r + 1])
        psi = aware.psi[s]
        for one, out in ((aware, dm_aware), (blind, dm_blind)):
            locs = one.locations(r)
            # tau_v = 1e-6 m: on-network synthetic data (docs/design.md, A10)
            off = net.distance_to_network(locs[..., 0].ravel(), locs[..., 1].ravel()).reshape(8, 13) > 1e-6
            out.append(discernibility(locs, psi, off))
        assert dm_aware[-1] >= 1 / (2 * psi.max()) - 1e-12
    assert np.mean(dm_aware) > np.mean(dm_blind)
