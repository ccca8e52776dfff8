"""DTPP dummies (Liu et al. 2019; Jin et al., TKDE 2023): the defining properties checked on the output: exactly k
members sharing the exposed locations, >= l−1 distinct alternatives in the real location's cell at every other
published timestamp, dummies within the real trajectory's speed limit, suppression counted."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mechanisms.dummy import (
    Candidates,
    DummyParams,
    cell_keys,
    dummy_trajectory,
    exposed_mask,
    generate_batch,
    road_candidates,
    subcell_candidates,
)
from trajpub.grid import GridSpec
from trajpub.road_synthetic import generate_trajectories, synthetic_grid

GRID = GridSpec((115.4, 39.4, 117.6, 41.1), 2000.0)


def random_walks(n_traj: int, n: int, seed: int, step_deg: float = 0.0004) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frames = []
    for tr in range(n_traj):
        lon = 116.3 + np.cumsum(rng.normal(0, step_deg, n))
        lat = 39.9 + np.cumsum(rng.normal(0, step_deg, n))
        t = pd.Timestamp("2008-02-02", tz="UTC") + pd.to_timedelta(np.arange(n) * 60 + tr, unit="s")
        x, y = GRID.project(lon, lat)
        frames.append(pd.DataFrame({"object_id": f"o{tr % 4}", "traj_id": tr, "t": t, "lon": lon, "lat": lat,
                                    "x": x, "y": y}))
    return pd.concat(frames, ignore_index=True)


def run(points: pd.DataFrame, params: DummyParams, candidates: Candidates | None = None, seed: int = 0):
    if candidates is None:
        candidates = subcell_candidates(cell_keys(points["lon"], points["lat"], params.cell_deg),
                                        params.cell_deg, params.subcells, GRID.project)
    n = points["traj_id"].nunique()
    rng = np.random.default_rng(seed)
    return generate_batch(points, candidates, params, rng.spawn(n), rng.permutation(n))


def check_defining_properties(release, points: pd.DataFrame, params: DummyParams) -> None:
    pub, owners, status = release.published, release.owners, release.status
    k, need = params.k, params.l - 1
    ok = status[status["reason"].isna()]
    assert sorted(pub["set_id"].unique().tolist()) == sorted(ok["set_id"].tolist())
    assert (pub.groupby("set_id")["member"].nunique() == k).all()
    real = owners.set_index("set_id")["member"]
    src = points.set_index(["traj_id", "t"])
    vmax = ok.set_index("set_id")["v_max_mps"]
    for set_id, g in pub.groupby("set_id"):
        wide = {c: g.pivot(index="seq", columns="member", values=c) for c in ("x", "y", "lon", "lat")}
        times = g.pivot(index="seq", columns="member", values="t")
        assert (times.nunique(axis=1) == 1).all()  # one timestamp per seq, shared by all members
        m = real[set_id]
        traj = owners.set_index("set_id").loc[set_id, "source_traj_id"]
        truth = src.loc[traj].loc[times[m].to_numpy()]
        np.testing.assert_array_equal(wide["x"][m].to_numpy(), truth["x"].to_numpy())  # real member untouched
        exposed = g[g["member"] == m].set_index("seq")["exposed"].to_numpy(bool)
        spread = np.hypot(wide["x"].sub(wide["x"][m], axis=0), wide["y"].sub(wide["y"][m], axis=0)).to_numpy()
        assert np.all(spread[exposed] == 0.0)  # all members pass through the exposed locations
        others = [c for c in range(k) if c != m]
        key_real = cell_keys(wide["lon"][m], wide["lat"][m], params.cell_deg)
        for s in np.flatnonzero(~exposed):
            alt = {(wide["x"].iloc[s, c], wide["y"].iloc[s, c]) for c in others}
            alt.discard((wide["x"].iloc[s, m], wide["y"].iloc[s, m]))
            assert len(alt) >= need
            assert spread[s, others].min() >= params.min_separation_m
            keys = cell_keys(wide["lon"].iloc[s, others].to_numpy(), wide["lat"].iloc[s, others].to_numpy(),
                             params.cell_deg)
            assert np.all(keys == key_real[s])
        dt = np.diff((times[m] - times[m].iloc[0]).dt.total_seconds().to_numpy())
        for c in others:
            step = np.hypot(np.diff(wide["x"][c].to_numpy()), np.diff(wide["y"][c].to_numpy()))
            assert np.all(step <= vmax[set_id] * dt * (1 + 1e-6) + 1e-6)


def test_defining_properties_on_random_walks_without_a_network():
    pts = random_walks(12, 80, seed=1)
    params = DummyParams()
    rel = run(pts, params)
    check_defining_properties(rel, pts, params)
    s = rel.summary()
    assert s["published_sets"] == 12 and s["suppressed_trajectories"] == 0
    assert s["exposed_locations"] == 12 * 16  # round(0.2 * 80) per trajectory
    st = rel.status
    assert (st["n_points"] - st["n_kept"] == st["suppressed_locations"]).all()
    assert s["real_points_released"] == len(rel.published) // params.k


def test_defining_properties_with_a_road_network_and_a_public_exposure_rule():
    x0, y0 = GRID.project(116.3, 39.9)
    net = synthetic_grid(20, 20, 60.0, rng=np.random.default_rng(2), origin=(float(x0), float(y0)), crs=GRID.crs)
    pts = generate_trajectories(net, 6, 60, rng=np.random.default_rng(3), dt_s=20.0, speed_mps=8.0)
    params = DummyParams(k=4, l=3, exposure="spaced")
    cands = road_candidates(net, GRID.unproject, params.cell_deg, params.candidate_spacing_m)
    assert np.all(net.distance_to_network(cands.x, cands.y) < 1e-6)  # candidates lie on roads
    rel = run(pts, params, cands, seed=4)
    assert rel.summary()["published_sets"] >= 1
    check_defining_properties(rel, pts, params)
    dummies = rel.published.merge(rel.owners, on="set_id", suffixes=("", "_real"))
    dummies = dummies[(dummies["member"] != dummies["member_real"]) & ~dummies["exposed"]]
    assert np.all(net.distance_to_network(dummies["x"].to_numpy(), dummies["y"].to_numpy()) < 1e-6)


def test_a_cell_with_too_few_alternatives_is_suppressed_and_counted():
    pts = random_walks(1, 10, seed=5, step_deg=0.0)  # a parked car: every point in one cell
    lon, lat = pts["lon"].iloc[0], pts["lat"].iloc[0]
    key = cell_keys(np.array([lon]), np.array([lat]), 0.001)
    x, y = pts["x"].iloc[0], pts["y"].iloc[0]
    one = Candidates.build(key, [x + 5.0], [y], [lon], [lat], [-1], "subcells")  # a single alternative
    res = dummy_trajectory(pts["x"].to_numpy(), pts["y"].to_numpy(), np.arange(10) * 60.0,
                           pts["lon"].to_numpy(), pts["lat"].to_numpy(), one, DummyParams(), np.random.default_rng(0))
    assert res.reason == "no_unexposed_location_kept" and res.suppressed_locations == 8
    assert not res.kept.any()


def test_the_speed_limit_is_the_real_trajectorys_and_binds():
    # a car that never moves has speed limit 0: its dummies cannot leave the exposed locations, so every
    # unexposed location between two exposed ones is suppressed
    pts = random_walks(1, 20, seed=6, step_deg=0.0)
    params = DummyParams(exposure="spaced")
    rel = run(pts, params)
    assert rel.status["v_max_mps"].iloc[0] == 0.0
    assert rel.status["reason"].iloc[0] == "no_unexposed_location_kept"


def test_short_trajectories_are_suppressed_with_their_reason():
    rel = run(random_walks(3, 4, seed=7), DummyParams())  # 4 × 0.2 < 1
    assert rel.summary()["suppressed_by_reason"] == {"too_short_for_exposure": 3}
    assert len(rel.published) == 0 and len(rel.owners) == 0


@pytest.mark.parametrize(("n", "expected"), [(5, 1), (80, 16), (12, 2)])
def test_exposed_count_and_the_spaced_rule(n, expected):
    rng = np.random.default_rng(0)
    assert exposed_mask(n, DummyParams(), rng).sum() == expected
    spaced = exposed_mask(n, DummyParams(exposure="spaced"), rng)
    assert spaced.sum() == expected and spaced[0]
    if expected > 1:
        assert spaced[-1]


def test_the_real_member_position_is_uniform():
    pts = random_walks(200, 10, seed=8)
    rel = run(pts, DummyParams(), seed=9)
    counts = np.bincount(rel.owners["member"], minlength=5)
    n = counts.sum()
    # each position has probability 1/5: binomial sd sqrt(n·0.2·0.8); allow 4.5 sd
    assert n > 150 and np.all(np.abs(counts - n / 5) <= 4.5 * np.sqrt(n * 0.16))


def one_timestamp_at_a_time(x, y, ts, lon, lat, candidates: Candidates, params: DummyParams, rng):
    """The rule of :func:`dummy_trajectory` written plainly with numpy, one timestamp and one dummy at a time
    (weights summed in order, one ``rng.random()`` per pick): the brute force the compiled loop must equal."""
    n, d, need = len(x), params.k - 1, params.l - 1
    v = np.max(np.hypot(np.diff(x), np.diff(y)) / np.diff(ts))
    exposed = exposed_mask(n, params, rng)
    starts, ends = candidates.slices(cell_keys(lon, lat, params.cell_deg))
    scale = 111_320.0 * params.cell_deg
    out_x, kept = np.full((d, n), np.nan), np.ones(n, bool)
    last, last_comp, last_i = None, np.full(d, -1), -1
    for i in range(n):
        if exposed[i]:
            out_x[:, i], last, last_comp[:], last_i = x[i], np.tile([x[i], y[i]], (d, 1)), -1, i
            continue
        cx, cy, comp = (a[starts[i]:ends[i]] for a in (candidates.x, candidates.y, candidates.component))
        to_real = np.hypot(cx - x[i], cy - y[i])
        ok = to_real >= params.min_separation_m
        later = np.flatnonzero(exposed[i:])
        if len(later):
            e = i + later[0]
            ok &= np.hypot(cx - x[e], cy - y[e]) <= v * (ts[e] - ts[i]) * (1 + 1e-9) + 1e-6
        if len(cx) < need or ok.sum() < need:
            kept[i] = False
            continue
        nearest, picks = to_real.copy(), []
        for j in range(d):
            f, sim = ok.copy(), np.ones(len(cx))
            if last is not None:
                step = np.hypot(cx - last[j, 0], cy - last[j, 1])
                f &= step <= v * (ts[i] - ts[last_i]) * (1 + 1e-9) + 1e-6
                f &= (last_comp[j] < 0) | (comp == last_comp[j])
                sim = 1.0 / (1.0 + np.abs(step - np.hypot(x[i] - x[last_i], y[i] - y[last_i])) / scale)
            if not f.any():
                break
            w = np.where(f, sim * nearest / scale, 0.0)
            if not np.cumsum(w)[-1] > 0:
                w = f.astype(float)
            cum = np.cumsum(w)
            p = min(int(np.searchsorted(cum, rng.random() * cum[-1], side="right")), len(cx) - 1)
            while not f[p]:
                p -= 1
            picks.append(p)
            nearest = np.minimum(nearest, np.hypot(cx - cx[p], cy - cy[p]))
        if len(picks) < d or len(set(picks)) < need:
            kept[i] = False
            continue
        out_x[:, i] = cx[picks]
        last, last_comp, last_i = np.column_stack([cx[picks], cy[picks]]), comp[picks], i
    return kept, out_x


@pytest.mark.parametrize("network", [False, True])
def test_the_compiled_walk_equals_the_plain_one(network):
    params = DummyParams(k=4, l=3)
    if network:
        x0, y0 = GRID.project(116.3, 39.9)
        net = synthetic_grid(20, 20, 60.0, rng=np.random.default_rng(2), origin=(float(x0), float(y0)), crs=GRID.crs)
        pts = generate_trajectories(net, 6, 60, rng=np.random.default_rng(3), dt_s=20.0, speed_mps=8.0)
        cands = road_candidates(net, GRID.unproject, params.cell_deg, params.candidate_spacing_m)
    else:
        pts = random_walks(6, 60, seed=11)
        cands = subcell_candidates(cell_keys(pts["lon"], pts["lat"], params.cell_deg), params.cell_deg,
                                   params.subcells, GRID.project)
    compared = 0
    for traj, g in pts.groupby("traj_id"):
        args = (g["x"].to_numpy(), g["y"].to_numpy(), (g["t"] - g["t"].iloc[0]).dt.total_seconds().to_numpy(),
                g["lon"].to_numpy(), g["lat"].to_numpy(), cands, params)
        rng_a, rng_b = np.random.default_rng(traj), np.random.default_rng(traj)
        res = dummy_trajectory(*args, rng_a)
        kept, out_x = one_timestamp_at_a_time(*args, rng_b)
        if res.reason is None:
            np.testing.assert_array_equal(res.kept, kept)
            np.testing.assert_array_equal(res.x, out_x)
            compared += 1
        assert rng_a.random() == rng_b.random()  # the same number of draws
    assert compared >= 3
