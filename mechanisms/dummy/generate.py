"""Dummy generation for one trajectory and for a batch (DTPP, Liu et al. 2019; survey [S-code] ``Dummy.java``,
with the changes listed in the package docstring)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numba
import numpy as np
import pandas as pd

from mechanisms.dummy.candidates import Candidates, cell_keys
from mechanisms.dummy.params import DummyParams

_M_PER_DEG = 111_320.0


@dataclass(frozen=True, eq=False)
class DummySet:
    """The result for one trajectory of n points.

    kept: (n,) which timestamps are published (the same for all k members); exposed: (n,) the exposed
    locations; x, y, lon, lat: (k−1, n) the dummies' locations (NaN where not kept); v_max: the speed limit
    (m/s, the real trajectory's largest speed between consecutive points); reason: why the whole trajectory
    is suppressed, or None; suppressed_locations: unexposed timestamps removed.
    """

    kept: np.ndarray
    exposed: np.ndarray
    x: np.ndarray
    y: np.ndarray
    lon: np.ndarray
    lat: np.ndarray
    v_max: float
    reason: str | None
    suppressed_locations: int


def exposed_mask(n: int, params: DummyParams, rng: np.random.Generator) -> np.ndarray:
    """round(n·ratio) exposed locations (at least 1): a random subset, or evenly spaced first to last."""
    m = min(n, max(1, round(n * params.exposure_ratio)))
    mask = np.zeros(n, bool)
    if params.exposure == "random":
        mask[rng.choice(n, size=m, replace=False)] = True
    else:
        mask[np.round(np.linspace(0, n - 1, m)).astype(np.int64)] = True
    return mask


def max_speed(x: np.ndarray, y: np.ndarray, ts: np.ndarray) -> float:
    """The largest speed (m/s) between consecutive points; times in seconds, strictly increasing."""
    if len(x) < 2:
        return 0.0
    return float(np.max(np.hypot(np.diff(x), np.diff(y)) / np.diff(ts)))


def _suppressed(n: int, d: int, exposed: np.ndarray, v: float, reason: str, removed: int = 0) -> DummySet:
    nan = np.full((d, n), np.nan)
    return DummySet(np.zeros(n, bool), exposed, nan, nan.copy(), nan.copy(), nan.copy(), v, reason, removed)


@numba.njit(cache=True)
def _grow(x, y, ts, exposed, nxt, starts, ends, cx, cy, comp, d, need, v, min_sep, scale, u):
    """The timestamp loop of :func:`dummy_trajectory`, compiled (a sequential walk numpy cannot vectorise).

    ``starts[i]:ends[i]`` are the candidates (``cx, cy, comp``) of point i; ``u`` holds uniform draws, one
    consumed per pick. Returns the picked candidate of each dummy at each timestamp (``(d, n)``, -1 where
    none), which timestamps are kept, and how many draws were used."""
    n = len(x)
    sel = np.full((d, n), -1, np.int64)
    kept = np.ones(n, np.bool_)
    last_x, last_y = np.empty(d), np.empty(d)
    last_comp = np.full(d, -1, np.int64)
    last_i = -1
    slack = 1e-9
    used = 0
    picks = np.empty(d, np.int64)
    for i in range(n):
        if exposed[i]:
            last_x[:] = x[i]
            last_y[:] = y[i]
            last_comp[:] = -1
            last_i = i
            continue
        a, b = starts[i], ends[i]
        m = b - a
        if m < need:
            kept[i] = False
            continue
        to_real, w = np.empty(m), np.empty(m)
        common, feasible = np.empty(m, np.bool_), np.empty(m, np.bool_)
        e = nxt[i]
        n_common = 0
        for c in range(m):
            to_real[c] = np.hypot(cx[a + c] - x[i], cy[a + c] - y[i])
            common[c] = to_real[c] >= min_sep
            if e >= 0:
                common[c] = common[c] and (np.hypot(cx[a + c] - x[e], cy[a + c] - y[e])
                                           <= v * (ts[e] - ts[i]) * (1 + slack) + 1e-6)
            n_common += common[c]
        if n_common < need:
            kept[i] = False
            continue
        real_step = np.hypot(x[i] - x[last_i], y[i] - y[last_i]) if last_i >= 0 else 0.0
        reach = v * (ts[i] - ts[last_i]) * (1 + slack) + 1e-6 if last_i >= 0 else 0.0
        nearest = to_real.copy()
        n_picks = 0
        for j in range(d):
            total, n_feasible = 0.0, 0
            for c in range(m):
                feasible[c], w[c] = False, 0.0
                sim = 1.0
                if not common[c]:
                    continue
                if last_i >= 0:
                    step = np.hypot(cx[a + c] - last_x[j], cy[a + c] - last_y[j])
                    if step > reach or (last_comp[j] >= 0 and comp[a + c] != last_comp[j]):
                        continue
                    sim = 1.0 / (1.0 + np.abs(step - real_step) / scale)
                feasible[c] = True
                n_feasible += 1
                w[c] = sim * nearest[c] / scale
                total += w[c]
            if n_feasible == 0:
                break
            if not total > 0:  # every feasible candidate already taken: uniformly
                for c in range(m):
                    w[c] = 1.0 if feasible[c] else 0.0
                total = float(n_feasible)
            target = u[used] * total
            used += 1
            p, acc = m - 1, 0.0
            for c in range(m):
                acc += w[c]
                if acc > target:
                    p = c
                    break
            while not feasible[p]:  # round-off landing on a zero-weight slot
                p -= 1
            picks[n_picks] = p
            n_picks += 1
            for c in range(m):
                nearest[c] = min(nearest[c], np.hypot(cx[a + c] - cx[a + p], cy[a + c] - cy[a + p]))
        distinct = 0
        for j in range(n_picks):
            distinct += not (picks[:j] == picks[j]).any()
        if n_picks < d or distinct < need:
            kept[i] = False
            continue
        for j in range(d):
            sel[j, i] = a + picks[j]
            last_x[j], last_y[j], last_comp[j] = cx[a + picks[j]], cy[a + picks[j]], comp[a + picks[j]]
        last_i = i
    return sel, kept, used


def dummy_trajectory(x: np.ndarray, y: np.ndarray, ts: np.ndarray, lon: np.ndarray, lat: np.ndarray,
                     candidates: Candidates, params: DummyParams, rng: np.random.Generator) -> DummySet:
    """k−1 dummies of one trajectory (metric x, y; ts in seconds, strictly increasing).

    Exposed locations are copied into every dummy. At an unexposed timestamp i each dummy j, in turn, takes a
    candidate of the real location's cell that is at least ``min_separation_m`` from it and feasible: reachable
    from the dummy's previous published location at the speed limit, able to reach the next exposed location
    in time, and (road candidates) on the same connected road component as its previous road location. Among
    feasible candidates it draws one with probability proportional to similarity × difference: similarity
    1/(1 + |step − real step|/c) compares the dummy's step with the real one (c = the cell height in metres),
    difference is the distance to the nearest location already taken at i (the real one, earlier dummies)
    over c; if all weights are 0 (every feasible candidate taken), uniformly. The timestamp is suppressed
    (removed from all members) when a dummy has no feasible candidate or fewer than l−1 distinct
    alternatives result.
    """
    n, d, need = len(x), params.k - 1, params.l - 1
    v = max_speed(x, y, ts)
    if n * params.exposure_ratio < 1:
        return _suppressed(n, d, np.zeros(n, bool), v, "too_short_for_exposure")
    exposed = exposed_mask(n, params, rng)
    nxt = np.full(n, -1, np.int64)
    e_idx = np.flatnonzero(exposed)
    pos = np.searchsorted(e_idx, np.arange(n), side="right")
    has = pos < len(e_idx)
    nxt[has] = e_idx[pos[has]]
    starts, ends = candidates.slices(cell_keys(lon, lat, params.cell_deg))
    state = rng.bit_generator.state
    u = rng.random(n * d)
    rng.bit_generator.state = state  # draw only as many as used: the generator continues as if drawn one by one
    sel, kept, used = _grow(np.asarray(x, float), np.asarray(y, float), np.asarray(ts, float), exposed, nxt,
                            starts, ends, candidates.x, candidates.y, candidates.component, d, need, v,
                            float(params.min_separation_m), _M_PER_DEG * params.cell_deg, u)
    rng.random(used)
    picked = kept & ~exposed
    out = []
    for real, cand in ((x, candidates.x), (y, candidates.y), (lon, candidates.lon), (lat, candidates.lat)):
        a = np.full((d, n), np.nan)
        a[:, picked] = cand[sel[:, picked]]
        a[:, exposed] = np.asarray(real, float)[exposed]
        out.append(a)
    out_x, out_y, out_lon, out_lat = out
    removed = int((~kept).sum())
    if not (kept & ~exposed).any():
        return _suppressed(n, d, exposed, v, "no_unexposed_location_kept", removed)
    if kept.sum() < 2:
        return _suppressed(n, d, exposed, v, "fewer_than_2_points_kept", removed)
    return DummySet(kept, exposed, out_x, out_y, out_lon, out_lat, v, None, removed)


@dataclass(frozen=True, eq=False)
class DummyRelease:
    """A batch's result. published: one row per released point (``set_id, member, seq, t, x, y, lon, lat,
    exposed``; ``exposed`` is for checks, not for publication); owners: the real member of each set
    (``set_id, member, object_id, source_traj_id``; private); status: one row per input trajectory."""

    published: pd.DataFrame
    owners: pd.DataFrame
    status: pd.DataFrame

    def summary(self) -> dict:
        s = self.status
        reasons = s.loc[s["reason"].notna(), "reason"].value_counts().to_dict()
        return {"input_trajectories": len(s), "published_sets": int(s["reason"].isna().sum()),
                "suppressed_trajectories": int(s["reason"].notna().sum()),
                "suppressed_by_reason": {str(k): int(v) for k, v in reasons.items()},
                "input_points": int(s["n_points"].sum()),
                "exposed_locations": int(s.loc[s["reason"].isna(), "n_exposed"].sum()),
                "suppressed_locations": int(s.loc[s["reason"].isna(), "suppressed_locations"].sum()),
                "real_points_released": int(s.loc[s["reason"].isna(), "n_kept"].sum())}


def trajectory_keys(points: pd.DataFrame) -> np.ndarray:
    """The batch's trajectory ids in the order :func:`generate_batch` uses (sorted)."""
    return np.sort(points["traj_id"].unique())


def generate_batch(points: pd.DataFrame, candidates: Candidates, params: DummyParams, rngs: list,
                   set_ids: np.ndarray) -> DummyRelease:
    """Every trajectory of ``points`` (``object_id, traj_id, t, x, y, lon, lat``; times strictly increasing
    within a trajectory) with its own generator ``rngs[i]`` and set id ``set_ids[i]`` (in
    :func:`trajectory_keys` order). The k members of a set are numbered in a uniformly random order."""
    df = points.sort_values(["traj_id", "t"], kind="stable")
    keys = trajectory_keys(df)
    if len(keys) != len(rngs) or len(keys) != len(set_ids):
        raise ValueError("one generator and one set id per trajectory are needed")
    traj = df["traj_id"].to_numpy()
    bounds = np.r_[0, np.flatnonzero(traj[1:] != traj[:-1]) + 1, len(df)]
    x, y = df["x"].to_numpy(float), df["y"].to_numpy(float)
    lon, lat = df["lon"].to_numpy(float), df["lat"].to_numpy(float)
    t_ns = (df["t"] - pd.Timestamp("1970-01-01", tz="UTC")).to_numpy().astype("timedelta64[ns]").astype(np.int64)
    ts = t_ns / 1e9
    obj = df["object_id"].astype(str).to_numpy()
    k = params.k
    published, owners, status = [], [], []
    for idx, (a, b) in enumerate(itertools.pairwise(bounds)):
        rng = rngs[idx]
        res = dummy_trajectory(x[a:b], y[a:b], ts[a:b], lon[a:b], lat[a:b], candidates, params, rng)
        status.append((int(traj[a]), obj[a], int(set_ids[idx]), b - a, int(res.exposed.sum()),
                       int(res.kept.sum()), res.suppressed_locations, res.v_max, res.reason))
        if res.reason is not None:
            continue
        order = rng.permutation(k)  # order[m] = which trajectory is member m; k−1 = the real one
        keep = res.kept
        n_kept = int(keep.sum())
        tr = t_ns[a:b][keep]
        stack_x = np.vstack([res.x[:, keep], x[a:b][keep]])
        stack_y = np.vstack([res.y[:, keep], y[a:b][keep]])
        stack_lon = np.vstack([res.lon[:, keep], lon[a:b][keep]])
        stack_lat = np.vstack([res.lat[:, keep], lat[a:b][keep]])
        published.append(pd.DataFrame({
            "set_id": np.int64(set_ids[idx]), "member": np.repeat(np.arange(k), n_kept),
            "seq": np.tile(np.arange(n_kept), k), "t": np.tile(tr, k),
            "x": stack_x[order].ravel(), "y": stack_y[order].ravel(),
            "lon": stack_lon[order].ravel(), "lat": stack_lat[order].ravel(),
            "exposed": np.tile(res.exposed[keep], k)}))
        owners.append((int(set_ids[idx]), int(np.flatnonzero(order == k - 1)[0]), obj[a], int(traj[a])))
    cols = ["set_id", "member", "seq", "t", "x", "y", "lon", "lat", "exposed"]
    pub = (pd.concat(published, ignore_index=True) if published
           else pd.DataFrame({c: np.empty(0, np.int64 if c == "t" else float) for c in cols}))
    pub["t"] = pd.to_datetime(pub["t"].to_numpy(np.int64), utc=True)
    own = pd.DataFrame(owners, columns=["set_id", "member", "object_id", "source_traj_id"])
    st = pd.DataFrame(status, columns=["traj_id", "object_id", "set_id", "n_points", "n_exposed", "n_kept",
                                       "suppressed_locations", "v_max_mps", "reason"])
    return DummyRelease(pub, own, st)
