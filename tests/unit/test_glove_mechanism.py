"""GLOVE's defining property on synthetic data and on real T-Drive data through the adapter: every published
group has >= k distinct objects, all its records are identical, and every published region (box × time span)
holds an original fix of each of the group's objects."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mechanisms.glove import (
    GloveParams,
    anonymize,
    build_fingerprints,
    greedy_merge,
    identical_within_sets,
    merge_cost,
    merge_samples,
    region_coverage,
)
from tasks import protect
from trajpub.candidate import Shape
from trajpub.mechanism import PublicInputs

T0 = pd.Timestamp("2008-02-03 08:00", tz="UTC")


def synthetic(n_objects: int, trips_per_object: int, seed: int, n_hubs: int = 3) -> pd.DataFrame:
    """Random walks from a few hubs, one trip per object and day, 10-40 fixes a minute apart."""
    rng = np.random.default_rng(seed)
    rows = []
    tid = 0
    for o in range(n_objects):
        hub = rng.integers(n_hubs)
        for d in range(trips_per_object):
            n = int(rng.integers(10, 41))
            x = hub * 8000 + np.cumsum(rng.normal(0, 150, n))
            y = np.cumsum(rng.normal(0, 150, n))
            t = T0 + pd.Timedelta(days=d) + pd.to_timedelta(rng.integers(0, 3600)
                                                               + 60 * np.arange(n), unit="s")
            rows.append(pd.DataFrame({"object_id": f"o{o}", "traj_id": tid, "t": t, "x": x, "y": y,
                                      "lon": 116 + x / 85_000, "lat": 40 + y / 111_000}))
            tid += 1
    return pd.concat(rows, ignore_index=True)


def covered_by_own_record(released: pd.DataFrame, sources: pd.DataFrame, points: pd.DataFrame) -> bool:
    """Every original fix of a published trajectory lies inside one of its record's regions."""
    for tid, src in sources.groupby("traj_id"):
        rec = released[released["traj_id"] == tid]
        fixes = points[points["traj_id"].isin(src["source_traj_id"])]
        inside = ((rec["lon_min"].to_numpy() <= fixes["lon"].to_numpy()[:, None])
                  & (fixes["lon"].to_numpy()[:, None] <= rec["lon_max"].to_numpy())
                  & (rec["lat_min"].to_numpy() <= fixes["lat"].to_numpy()[:, None])
                  & (fixes["lat"].to_numpy()[:, None] <= rec["lat_max"].to_numpy())
                  & (rec["t"].to_numpy() <= fixes["t"].to_numpy()[:, None])
                  & (fixes["t"].to_numpy()[:, None] <= rec["t_end"].to_numpy()))
        if not inside.any(axis=1).all():
            return False
    return True


@pytest.mark.parametrize(("k", "candidates", "unit"), [(3, 4, "trajectory"), (5, 12, "trajectory"),
                                                       (4, None, "trajectory"), (3, 4, "object")])
def test_every_region_covers_k_objects_of_its_group(k, candidates, unit):
    points = synthetic(23, 3, seed=k)
    params = GloveParams(k=k, candidates=candidates, unit=unit)
    released, sources, meta = anonymize(points, params, np.random.default_rng(1))
    assert meta["suppressed_fingerprints"] == 0
    per_set = released.groupby("set_id")["object_id"]
    assert (per_set.nunique() >= k).all()
    assert (per_set.nunique() == released.groupby("set_id")["traj_id"].nunique()).all()  # one record per object
    assert identical_within_sets(released)
    cov = region_coverage(released, points)
    assert (cov["covered"] == cov["set_objects"]).all() and (cov["covered"] >= k).all()
    assert covered_by_own_record(released, sources, points)
    n_fp = points["traj_id"].nunique() if unit == "trajectory" else points["object_id"].nunique()
    assert released["traj_id"].nunique() == n_fp  # every fingerprint is published (leftovers merged)
    assert sorted(released["traj_id"].unique()) == list(range(1, n_fp + 1))


def test_leftovers_join_a_group_or_are_suppressed():
    points = synthetic(7, 1, seed=5)
    merged, _, meta = anonymize(points, GloveParams(k=5), np.random.default_rng(0))
    assert merged["set_id"].nunique() == 1 and merged["object_id"].nunique() == 7
    assert meta["search"]["leftovers_merged"] == 1
    cut, _, meta = anonymize(points, GloveParams(k=5, on_leftover="suppress"), np.random.default_rng(0))
    assert cut["object_id"].nunique() == 5 and meta["suppressed_fingerprints"] == 2


def test_fewer_than_k_objects_publish_nothing():
    points = synthetic(4, 2, seed=2)
    released, _, meta = anonymize(points, GloveParams(k=5), np.random.default_rng(0))
    assert len(released) == 0 and meta["suppressed_fingerprints"] == 8 and meta["published_groups"] == 0


def test_exhaustive_greedy_merges_the_globally_cheapest_pair():
    # two objects almost on top of each other, the others far apart: with k = 2 they form one group
    t = T0 + pd.to_timedelta(60 * np.arange(5), unit="s")
    rows = []
    for o, (x0, y0) in enumerate([(0, 0), (5, 0), (9000, 0), (0, 9000), (9000, 9000), (20000, 0)]):
        x = x0 + 10.0 * np.arange(5)
        rows.append(pd.DataFrame({"object_id": f"o{o}", "traj_id": o, "t": t, "x": x, "y": float(y0),
                                  "lon": 116 + x / 85_000, "lat": 40 + y0 / 111_000}))
    points = pd.concat(rows, ignore_index=True)
    params = GloveParams(k=2, candidates=None)
    result = greedy_merge(build_fingerprints(points, params), params)
    assert sorted(result.groups[0].objects) == ["o0", "o1"]


def naive_greedy(fps, params):
    """Reference: exhaustive greedy GLOVE written the obvious way (all pairs recomputed at every step)."""
    groups = {i: (fps.samples[i], [i], frozenset([fps.object_ids[i]])) for i in range(len(fps))}
    active, finished, next_id = set(groups), [], len(fps)
    while True:
        best = None
        for a in sorted(active):
            for b in sorted(active):
                if a < b and not (groups[a][2] & groups[b][2]):
                    c = merge_cost(groups[a][0], groups[b][0], len(groups[a][1]), len(groups[b][1]), params)
                    if best is None or (c, a, b) < best:
                        best = (c, a, b)
        if best is None:
            break
        _, a, b = best
        (sa, ma, oa), (sb, mb, ob) = groups.pop(a), groups.pop(b)
        active -= {a, b}
        groups[next_id] = (merge_samples(sa, sb, len(ma), len(mb), params), ma + mb, oa | ob)
        if len(oa | ob) >= params.k:
            finished.append(next_id)
        else:
            active.add(next_id)
        next_id += 1
    for g in sorted(active):
        s, m, o = groups[g]
        costs = [(merge_cost(s, groups[f][0], len(m), len(groups[f][1]), params), f) for f in sorted(finished)
                 if not (groups[f][2] & o)]
        _, f = min(costs)
        sf, mf, of = groups[f]
        groups[f] = (merge_samples(sf, s, len(mf), len(m), params), mf + m, of | o)
    return {frozenset(groups[f][1]): groups[f][0] for f in finished}


@pytest.mark.parametrize("seed", [0, 1])
def test_exhaustive_search_equals_the_naive_greedy_algorithm(seed):
    points = synthetic(9, 2, seed=seed)
    params = GloveParams(k=3, candidates=None)
    fps = build_fingerprints(points, params)
    expected = naive_greedy(fps, params)
    got = {frozenset(g.members): g.samples for g in greedy_merge(fps, params).groups}
    assert set(got) == set(expected)
    for members, samples in got.items():
        np.testing.assert_array_equal(samples, expected[members])


def test_trajectories_of_one_object_never_share_a_group():
    points = synthetic(12, 4, seed=9, n_hubs=1)
    released, _, _ = anonymize(points, GloveParams(k=3, candidates=4), np.random.default_rng(2))
    counts = released.drop_duplicates("traj_id").groupby(["set_id", "object_id"]).size()
    assert (counts == 1).all()


def test_adapter_on_tdrive(dask_client, tdrive_prepared):
    from mechanisms.glove.adapter import Glove

    futures, grid, frame = tdrive_prepared(12, max_points=80)
    adapter = Glove()
    params = adapter.parse_params({"k": 5})
    out = protect.run(adapter, dask_client, futures, PublicInputs(grid), params, np.random.default_rng(7))
    pts = out.points
    for col in ("traj_id", "seq", "cell", "t", "lon", "lat", "object_id", "set_id", "lon_min", "lat_min",
                "lon_max", "lat_max", "t_end"):
        assert col in pts.columns
    assert str(pts["t"].dt.tz) == "UTC" and str(pts["t_end"].dt.tz) == "UTC"
    assert (pts["t"] <= pts["t_end"]).all() and (pts["lon_min"] <= pts["lon_max"]).all()
    assert (pts["cell"] == grid.cell_of(pts["x"].to_numpy(), pts["y"].to_numpy())).all()
    assert (pts.groupby("set_id")["object_id"].nunique() >= 5).all()
    cov = region_coverage(pts, frame)
    assert (cov["covered"] >= 5).all()
    meta = out.metadata
    assert meta["mechanism"] == "glove" and meta["input_trajectories"] == frame["traj_id"].nunique()
    assert meta["released_points"] == len(pts) and meta["released_records"] == pts["traj_id"].nunique()
    assert "seed" not in str(meta)
    assert json.loads(json.dumps(meta)) == meta  # JSON-safe
    assert adapter.shape is Shape.GENERALISED and adapter.guarantee(params).proven is False
