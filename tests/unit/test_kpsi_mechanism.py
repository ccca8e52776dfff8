"""The published and private frames of a (k-Psi) release (Chen, Li, Zhang 2020, §6; docs/design.md, A13)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import shapely
from scipy import stats

from mechanisms.kpsi_anonymity import (
    InfeasibleError,
    KPsiParams,
    anonymize,
    anonymize_batch,
    anonymize_trajectory,
    trajectory_keys,
)
from trajpub.errors import InputError
from trajpub.road_synthetic import generate_trajectories, synthetic_grid
from trajpub.roads import RoadNetwork

NET = synthetic_grid(15, 15, 80.0, rng=np.random.default_rng(51), crs="EPSG:3067")
TRAJ = generate_trajectories(NET, 25, 13, rng=np.random.default_rng(52))


def test_every_set_has_k_members_with_the_real_timestamps_and_nothing_identifying():
    params = KPsiParams()
    before = TRAJ.copy()
    out = anonymize(TRAJ, NET, params, np.random.default_rng(53))
    pd.testing.assert_frame_equal(TRAJ, before)  # input untouched
    pub, priv = out.published, out.private
    assert list(pub.columns) == ["set_id", "member", "seq", "t", "x", "y", "lon", "lat"]
    assert sorted(pub["set_id"].unique()) == list(range(25))
    assert len(pub) == 25 * 8 * 13 and pub.groupby("set_id")["member"].nunique().eq(8).all()
    real_t = TRAJ.groupby("traj_id")["t"].apply(list)
    for (set_id, member), rows in pub.groupby(["set_id", "member"]):
        tid = priv.loc[priv["set_id"] == set_id, "traj_id"].iloc[0]
        assert list(rows["t"]) == real_t[tid] and list(rows["seq"]) == list(range(13))
    assert priv.groupby("set_id")["is_real"].sum().eq(1).all() and len(priv) == 25 * 8
    assert not {"object_id", "traj_id", "is_real"} & set(pub.columns)
    lon, lat = NET.to_lonlat(pub["x"].to_numpy(), pub["y"].to_numpy())
    np.testing.assert_allclose(pub["lon"], lon) and np.testing.assert_allclose(pub["lat"], lat)
    assert out.summary()["published_points"] == len(pub) and out.summary()["suppressed_trajectories"] == 0


def test_with_negligible_noise_the_real_member_is_the_input_and_all_members_stay_in_their_discs():
    out = anonymize(TRAJ, NET, KPsiParams(epsilon=1e9), np.random.default_rng(54))
    merged = out.published.merge(out.private, on=["set_id", "member"])
    real = merged[merged["is_real"]].sort_values(["object_id", "traj_id", "seq"])
    np.testing.assert_allclose(real[["x", "y"]].to_numpy(), TRAJ[["x", "y"]].to_numpy(), atol=1e-3)
    centre = real.set_index(["set_id", "seq"])[["x", "y"]]
    audit = out.audit.set_index(["set_id", "seq"])
    joined = merged.join(centre, on=["set_id", "seq"], rsuffix="_real").join(audit, on=["set_id", "seq"])
    gap = np.hypot(joined["x"] - joined["x_real"], joined["y"] - joined["y_real"])
    assert np.all(gap <= joined["delta_m"] + 1e-3)
    dummies = joined[~joined["is_real"]]
    assert NET.distance_to_network(dummies["x"].to_numpy(), dummies["y"].to_numpy()).max() <= 1e-3


def test_the_real_member_is_uniformly_placed_in_its_set():
    net = synthetic_grid(8, 8, 80.0, rng=np.random.default_rng(55))
    tr = generate_trajectories(net, 1600, 2, rng=np.random.default_rng(56))
    out = anonymize(tr, net, KPsiParams(), np.random.default_rng(57))
    counts = np.bincount(out.private.loc[out.private["is_real"], "member"], minlength=8)
    # chi-square goodness of fit to uniform over 8 members, 1600 sets (200 expected each), alpha = 0.001
    assert stats.chisquare(counts).pvalue > 1e-3


def test_a_trajectory_s_output_does_not_depend_on_the_others_or_on_chunking():
    keys = trajectory_keys(TRAJ)
    params = KPsiParams()
    gens = lambda: np.random.default_rng(58).spawn(len(keys))
    ids = np.arange(len(keys))[::-1].copy()
    whole = anonymize_batch(TRAJ, NET, params, gens(), ids)
    chunked = anonymize_batch(TRAJ, NET, params, gens(), ids, chunk_size=3)
    pd.testing.assert_frame_equal(whole.published, chunked.published)
    pd.testing.assert_frame_equal(whole.private, chunked.private)
    # move trajectory 0 somewhere else: trajectory 1's set is unchanged
    changed = TRAJ.copy()
    first = changed["traj_id"] == keys["traj_id"][0]
    other = generate_trajectories(NET, 1, 13, rng=np.random.default_rng(59))
    changed.loc[first, ["x", "y"]] = other[["x", "y"]].to_numpy()
    moved = anonymize_batch(changed, NET, params, gens(), ids)
    set1 = ids[1]
    pd.testing.assert_frame_equal(whole.published[whole.published["set_id"] == set1].reset_index(drop=True),
                                  moved.published[moved.published["set_id"] == set1].reset_index(drop=True))
    assert not whole.published[whole.published["set_id"] == ids[0]]["x"].equals(
        moved.published[moved.published["set_id"] == ids[0]]["x"])
    again = anonymize(TRAJ, NET, params, np.random.default_rng(60))
    same = anonymize(TRAJ, NET, params, np.random.default_rng(60))
    other = anonymize(TRAJ, NET, params, np.random.default_rng(61))
    pd.testing.assert_frame_equal(again.published, same.published)
    assert not np.allclose(again.published["x"], other.published["x"])


def test_one_trajectory_entry_point_returns_its_rows_and_status():
    one = TRAJ[TRAJ["traj_id"] == 3]
    pub, priv, status = anonymize_trajectory(one, NET, KPsiParams(k=4), np.random.default_rng(62), set_id=77)
    assert pub["set_id"].eq(77).all() and len(pub) == 4 * 13 and len(priv) == 4
    assert status["status"] == "ok" and status["n_points"] == 13 and status["set_id"] == 77
    assert 50 <= status["delta_min_m"] <= status["delta_max_m"] <= 500
    with pytest.raises(InputError, match="exactly one"):
        anonymize_trajectory(TRAJ, NET, KPsiParams(), np.random.default_rng(62))


def test_a_network_too_sparse_for_k_raises_or_suppresses_and_never_hangs():
    lonely = RoadNetwork(np.arange(3), np.arange(3), np.arange(1, 4), np.array(["r"] * 3),
                         np.array(shapely.linestrings([[(5000 + 40 * i, 5000), (5040 + 40 * i, 5000)]
                                                       for i in range(3)]), dtype=object))
    net = RoadNetwork.concat([NET, lonely])
    stray = pd.DataFrame({"object_id": "stray", "traj_id": 999, "seq": [0, 1],
                          "t": pd.to_datetime(["2020-01-01 00:00:00", "2020-01-01 00:00:10"], utc=True),
                          "x": [5010.0, 5050.0], "y": [5000.0, 5000.0]})
    data = pd.concat([TRAJ, stray], ignore_index=True)
    with pytest.raises(InfeasibleError, match="fewer than k-1") as err:
        anonymize(data, net, KPsiParams(), np.random.default_rng(63))
    assert "stray" in err.value.where and "seq 0" in err.value.where
    out = anonymize(data, net, KPsiParams(on_infeasible="suppress_trajectory"), np.random.default_rng(63))
    status = out.status.set_index("object_id")
    assert status.loc["stray", "status"] == "suppressed" and status.loc["stray", "bad_seq"] == 0
    assert out.published["set_id"].nunique() == 25 and "stray" not in set(out.private["object_id"])
    assert out.summary()["suppressed_trajectories"] == 1


def test_points_must_be_metric_and_strictly_increasing_in_time():
    with pytest.raises(InputError, match="strictly increasing"):
        bad = TRAJ.copy()
        bad.loc[1, "t"] = bad.loc[0, "t"]
        anonymize(bad, NET, KPsiParams(), np.random.default_rng(64))
    lonlat = TRAJ.drop(columns=["x", "y"])
    out = anonymize(lonlat, NET, KPsiParams(epsilon=1e9), np.random.default_rng(65))  # projected with NET.crs
    merged = out.published.merge(out.private, on=["set_id", "member"])
    real = merged[merged["is_real"]].sort_values(["object_id", "traj_id", "seq"])
    np.testing.assert_allclose(real[["x", "y"]].to_numpy(), TRAJ[["x", "y"]].to_numpy(), atol=1e-3)
    plain = synthetic_grid(5, 5, 80.0, rng=np.random.default_rng(66))
    with pytest.raises(InputError, match="x, y"):
        anonymize(lonlat, plain, KPsiParams(), np.random.default_rng(67))


def test_without_a_network_the_road_ignoring_fallback_runs_on_projected_points():
    params = KPsiParams(road_aware=False, psi_mode="constant", delta_m=200.0, noise_scale="data_independent",
                        epsilon_semantics="per_trajectory")
    out = anonymize(TRAJ, None, params, np.random.default_rng(68))
    assert len(out.published) == 25 * 8 * 13 and "lon" not in out.published.columns
    # b = 2 delta / (eps / 2n) per axis, every timestamp
    np.testing.assert_allclose(out.audit[["scale_x", "scale_y"]], 2 * 200.0 * 2 * 13 / 1.0)
    assert out.audit["real_edge_id"].eq(-1).all()


def test_an_empty_input_gives_empty_frames_with_the_published_columns():
    empty = TRAJ.iloc[:0]
    out = anonymize(empty, NET, KPsiParams(), np.random.default_rng(69))
    assert list(out.published.columns) == ["set_id", "member", "seq", "t", "x", "y", "lon", "lat"]
    assert len(out.published) == len(out.private) == len(out.status) == 0
    assert out.summary()["input_trajectories"] == 0
