"""W4M end to end: the defining (k,δ)-anonymity property, exact small cases of editing and translation, the
bounded trash, distinct objects, and the checker itself."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mechanisms.w4m import (
    INSERTED,
    KEPT,
    MOVED,
    W4MParams,
    anonymize,
    from_frame,
    is_k_delta_anonymous,
    set_diameters,
    time_pairs,
    translate_cluster,
)

T0 = pd.Timestamp("2008-02-02 08:00", tz="UTC")


def _frame(tracks: list[tuple[str, int, list[float], list[float], list[float]]]) -> pd.DataFrame:
    """``(object_id, traj_id, seconds, x, y)`` per trajectory → the prepared frame's columns."""
    rows = []
    for obj, tid, ts, xs, ys in tracks:
        for s, (t, x, y) in enumerate(zip(ts, xs, ys, strict=True)):
            rows.append((obj, tid, s, T0 + pd.Timedelta(seconds=t), x, y))
    return pd.DataFrame(rows, columns=["object_id", "traj_id", "seq", "t", "x", "y"])


def _parallel(offsets: list[float], n: int = 10) -> pd.DataFrame:
    times = [60.0 * i for i in range(n)]
    return _frame([(f"o{k}", k, times, [dx] * n, [50.0 * i for i in range(n)]) for k, dx in enumerate(offsets)])


def test_a_tight_group_is_published_unchanged():
    df = _parallel([0.0, 100.0, 200.0, 300.0, 400.0])
    rel = anonymize(df, W4MParams(), np.random.default_rng(1))
    out = rel.points
    assert out["set_id"].nunique() == 1 and out["traj_id"].nunique() == 5
    assert (out["origin"] == KEPT).all() and rel.summary["kept_fraction_of_input_points"] == 1.0
    merged = out.merge(df, left_on=["source_traj_id", "seq"], right_on=["traj_id", "seq"], suffixes=("", "_in"))
    assert len(merged) == len(df)
    np.testing.assert_array_equal(merged["x"], merged["x_in"])
    np.testing.assert_array_equal(merged["y"], merged["y_in"])
    assert (merged["t"] == merged["t_in"]).all()


def test_a_far_member_moves_exactly_onto_the_cylinder():
    # medoid under the translation cost: the trajectory at x = 200 (total 1200 m against 1300 m for 100 or 300)
    df = _parallel([0.0, 100.0, 200.0, 300.0, 1000.0])
    rel = anonymize(df, W4MParams(), np.random.default_rng(1))
    out = rel.points
    far = out[out["source_traj_id"] == 4]
    np.testing.assert_allclose(far["x"], 450.0)  # 200 + δ/2
    np.testing.assert_allclose(far["shift_m"], 550.0)
    assert (far["origin"] == MOVED).all()  # its own fixes, substituted at the same times, then translated
    assert (out.loc[out["source_traj_id"] != 4, "origin"] == KEPT).all()
    assert rel.summary["suppressed_points_deleted_by_editing"] == 0 and rel.summary["inserted_points"] == 0
    assert is_k_delta_anonymous(out, 5, 500.0)


def test_editing_inserts_interpolated_points_and_deletes_unaligned_ones():
    pivot = ("p", 0, [0.0, 60.0, 120.0, 180.0], [0.0, 0.0, 0.0, 0.0], [0.0, 100.0, 200.0, 300.0])
    # the member matches the first two fixes, then has one fix at 150 s, 1 km away, and one 2 h later
    member = ("m", 1, [0.0, 60.0, 150.0, 7200.0], [10.0, 10.0, 1000.0, 0.0], [0.0, 100.0, 150.0, 0.0])
    traj, _ = from_frame(_frame([pivot, member]))
    pts, deleted = translate_cluster(traj, np.array([0, 1]), W4MParams(k=2))
    m = pts[pts["member"] == 1].reset_index(drop=True)
    np.testing.assert_array_equal(m["t"], traj.points(0)[0])  # the pivot's timestamps
    # fixes 0 and 1 matched and kept; 120 s: substituted with the 150 s fix (within 300 s), moved; 180 s: no
    # fix left, so inserted on the member's track between 150 s and 7200 s, then moved onto the circle
    assert list(m["origin"]) == [KEPT, KEPT, MOVED, INSERTED]
    np.testing.assert_allclose(m.loc[:1, "x"], 10.0)
    d = np.hypot(m["x"] - 0.0, m["y"] - np.array([0.0, 100.0, 200.0, 300.0]))
    np.testing.assert_allclose(d[2:], 250.0)
    assert deleted == 1  # the fix at 7200 s
    assert (pts.loc[pts["member"] == 0, "origin"] == KEPT).all()


def _random_walks(seed: int, n_objects: int, per_object: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    tracks, tid = [], 0
    for o in range(n_objects):
        for _ in range(per_object):
            n = int(rng.integers(5, 40))
            t = rng.uniform(0, 4 * 3600) + np.cumsum(rng.integers(30, 400, n)).astype(float)
            start = rng.normal(0, 3000, 2)
            steps = rng.normal(0, 300, (n, 2)).cumsum(axis=0)
            tracks.append((f"obj{o}", tid, list(t), list(start[0] + steps[:, 0]), list(start[1] + steps[:, 1])))
            tid += 1
    return _frame(tracks)


@pytest.mark.parametrize(("k", "delta", "centre"), [(5, 500.0, "pivot"), (3, 200.0, "mean"), (4, 800.0, "pivot")])
def test_every_published_set_is_k_delta_anonymous(k, delta, centre):
    df = _random_walks(7, 30, 3)
    params = W4MParams(k=k, delta_m=delta, match_m=delta / 2, centre=centre)
    rel = anonymize(df, params, np.random.default_rng(3))
    out = rel.points
    assert is_k_delta_anonymous(out, k, delta)
    assert (out.groupby("set_id")["object_id"].nunique() >= k).all()  # k distinct objects, not trajectories
    assert (out.groupby("traj_id")["object_id"].nunique() == 1).all()  # each record is one object's own
    diam = set_diameters(out)
    assert diam["diameter_m"].max() <= delta + 1e-6
    # trash bound, and the released records account for every input trajectory
    n = df["traj_id"].nunique()
    s = rel.summary
    assert s["suppressed_trajectories"] <= int(np.floor(params.trash_max * n))
    assert s["released_records"] + s["suppressed_trajectories"] == n == s["input_trajectories"]
    assert s["kept_points"] + s["moved_points"] + s["inserted_points"] == s["released_points"] == len(out)


def test_same_seed_same_release_and_ids_are_permutations():
    df = _random_walks(8, 20, 2)
    a = anonymize(df, W4MParams(k=4), np.random.default_rng(5)).points
    b = anonymize(df, W4MParams(k=4), np.random.default_rng(5)).points
    pd.testing.assert_frame_equal(a, b)
    sets = np.sort(a["set_id"].unique())
    np.testing.assert_array_equal(sets, np.arange(len(sets)))
    np.testing.assert_array_equal(np.sort(a["traj_id"].unique()), np.arange(a["traj_id"].nunique()))


def test_fewer_objects_than_k_publishes_nothing():
    df = _random_walks(9, 4, 3)  # 12 trajectories of 4 objects
    rel = anonymize(df, W4MParams(k=5), np.random.default_rng(1))
    assert rel.points.empty and rel.summary["infeasible"]
    assert rel.summary["suppressed_trajectories"] == 12
    # without the distinct-object rule, 12 trajectories fill sets of 5
    loose = anonymize(df, W4MParams(k=5, distinct_objects=False), np.random.default_rng(1))
    assert not loose.points.empty and is_k_delta_anonymous(loose.points, 5, 500.0, owners=None)


def test_the_checker_catches_violations():
    base = pd.DataFrame({"set_id": [0] * 4, "traj_id": [0, 1, 0, 1], "object_id": ["a", "b", "a", "b"],
                         "t": [0, 0, 1, 1], "x": [0.0, 500.0, 0.0, 10.0], "y": [0.0] * 4})
    assert is_k_delta_anonymous(base, 2, 500.0)
    assert not is_k_delta_anonymous(base.assign(x=[0.0, 500.1, 0.0, 10.0]), 2, 500.0)  # too far apart
    assert not is_k_delta_anonymous(base, 3, 500.0)  # too few members
    assert not is_k_delta_anonymous(base.assign(object_id="a"), 2, 500.0)  # one object twice
    assert not is_k_delta_anonymous(base.assign(t=[0, 0, 1, 2]), 2, 500.0)  # members at different times


def test_time_pairs_fill_gaps_by_time_within_the_tolerance():
    tp = np.array([0.0, 100.0, 200.0, 300.0])
    tm = np.array([5.0, 190.0, 210.0, 1000.0])
    none = np.zeros(0, np.int64)
    i, j = time_pairs(tp, tm, none, none, 50.0)
    assert (i.tolist(), j.tolist()) == ([0, 2], [0, 1])  # 100 s and 300 s have no fix within 50 s
    # a match (pivot 2 ↔ member 2) is kept, and the gap before it may only use member fixes 0 and 1
    i, j = time_pairs(tp, tm, np.array([2]), np.array([2]), 50.0)
    assert (i.tolist(), j.tolist()) == ([0, 2], [0, 2])
    i, j = time_pairs(tp, tm, none, none, 1000.0)
    assert (i.tolist(), j.tolist()) == ([0, 1, 2, 3], [0, 1, 2, 3])
