"""(k-Ψ)-anonymity end to end: Phase 1 dummies, Phase 2 Laplace noise, shuffled anonymity sets, and a private
mapping kept apart from the published rows (Chen, Li, Zhang 2020, §6; docs/design.md, (k-Ψ)-anonymity, A13).

Three entry points over the same engine:

* :func:`anonymize_trajectory` (one trajectory, its own generator) → (published, private, status);
* :func:`anonymize_batch` (many trajectories, one generator and one set id each, in the order of
  :func:`trajectory_keys`), what a pipeline maps over its partitions;
* :func:`anonymize` (a whole frame and one generator: set ids are a random permutation, generators are
  spawned per trajectory) for in-memory use.

A trajectory's output depends only on its points, the network, the parameters, its generator and its set id:
batches and chunking do not change it (a unit test checks it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyproj import CRS, Transformer

from mechanisms.kpsi_anonymity.dummies import PhaseOne, generate_dummies
from mechanisms.kpsi_anonymity.params import KPsiParams
from mechanisms.kpsi_anonymity.perturb import noise_scales, perturb
from mechanisms.kpsi_anonymity.psi import delta_cap
from trajpub.errors import InputError
from trajpub.frame import require_columns
from trajpub.roads import RoadNetwork

PUBLISHED_COLUMNS = ("set_id", "member", "seq", "t", "x", "y")
PRIVATE_COLUMNS = ("set_id", "member", "object_id", "traj_id", "is_real")


class InfeasibleError(InputError):
    """The road network cannot host k−1 dummies for a trajectory (``on_infeasible="raise"``, A4)."""


@dataclass(frozen=True, eq=False)
class KPsiRelease:
    """The output of a run.

    published: one row per released point, ``set_id, member, seq, t, x, y`` (+ ``lon, lat`` when the CRS is
        known), sorted by set, member, seq. Members 0..k−1 of a set share the real trajectory's timestamps;
        ``seq`` counts 0..n−1. No object id, no real flag.
    private: NOT for publication: ``set_id, member, object_id, traj_id, is_real``, k rows per published set.
    status: NOT for publication: one row per input trajectory (``object_id, traj_id, set_id, status`` "ok" or
        "suppressed", ``reason``, ``bad_seq``, ``n_points``, ``grown_points``, ``motion_violations``,
        ``redraws``, ``delta_min_m``, ``delta_mean_m``, ``delta_max_m``, ``real_offroad_median_m``).
    audit: NOT for publication: per published set and seq, ``delta_m`` (δ_i), ``scale_x``, ``scale_y`` (the
        Laplace scales) and ``real_edge_id`` (−1 without a network).
    """

    published: pd.DataFrame
    private: pd.DataFrame
    status: pd.DataFrame
    audit: pd.DataFrame

    def summary(self) -> dict:
        """Aggregate, JSON-safe facts for lineage (no id, no location)."""
        st = self.status
        ok = st["status"] == "ok"
        return {
            "input_trajectories": len(st),
            "published_sets": int(ok.sum()),
            "suppressed_trajectories": int((~ok).sum()),
            "published_trajectories": int(self.private.shape[0]),
            "published_points": int(self.published.shape[0]),
            "grown_points": int(st["grown_points"].sum()),
            "motion_violations": int(st["motion_violations"].sum()),
            "redraws": int(st["redraws"].sum()),
            "delta_m_mean": float(self.audit["delta_m"].mean()) if len(self.audit) else None,
        }


def trajectory_keys(points: pd.DataFrame) -> pd.DataFrame:
    """The input's trajectories ``(object_id, traj_id)`` in the canonical order of :func:`anonymize_batch`."""
    require_columns(points, ("object_id", "traj_id"), "kpsi_anonymity")
    keys = points[["object_id", "traj_id"]].drop_duplicates()
    return keys.sort_values(["object_id", "traj_id"], kind="stable").reset_index(drop=True)


def anonymize(frame: pd.DataFrame, network: RoadNetwork | None, params: KPsiParams, rng: np.random.Generator,
              *, crs: CRS | str | None = None, chunk_size: int = 1000) -> KPsiRelease:
    """All trajectories of ``frame``: set ids are a random permutation of 0..N−1 (so they reveal nothing about
    the input order), then one generator per trajectory is spawned from ``rng``."""
    keys = trajectory_keys(frame)
    set_ids = rng.permutation(len(keys)).astype(np.int64)
    return anonymize_batch(frame, network, params, rng.spawn(len(keys)), set_ids, crs=crs,
                           chunk_size=chunk_size)


def anonymize_trajectory(traj_points: pd.DataFrame, network: RoadNetwork | None, params: KPsiParams,
                         rng: np.random.Generator, *, set_id: int = 0, crs: CRS | str | None = None
                         ) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """One trajectory (all rows share ``object_id`` and ``traj_id``) → (published rows, private rows,
    status)."""
    if len(trajectory_keys(traj_points)) != 1:
        raise InputError("anonymize_trajectory takes exactly one trajectory", "kpsi_anonymity")
    out = anonymize_batch(traj_points, network, params, [rng], np.array([set_id]), crs=crs)
    status = {k: _plain(v) for k, v in out.status.iloc[0].to_dict().items()}
    return out.published, out.private, status


def anonymize_batch(points: pd.DataFrame, network: RoadNetwork | None, params: KPsiParams,
                    rngs: Sequence[np.random.Generator], set_ids: np.ndarray, *, crs: CRS | str | None = None,
                    chunk_size: int = 1000) -> KPsiRelease:
    """Many trajectories, with ``rngs[i]`` and ``set_ids[i]`` for the i-th trajectory of
    :func:`trajectory_keys` (set ids must be unique across the whole release; the caller assigns them).

    ``points``: ``object_id, traj_id, seq, t`` and ``x, y`` in metres in the network's CRS (or ``lon, lat``
    when a CRS is known, which are then projected). Timestamps must be strictly increasing within a
    trajectory. The input is not modified. Work is done ``chunk_size`` trajectories at a time (memory), with
    the same result as all at once."""
    crs = _resolve_crs(network, crs)
    frame, xy, t_ns, offsets, keys, unit = _prepare(points, crs)
    set_ids = np.asarray(set_ids, dtype=np.int64)
    if len(rngs) != len(keys) or set_ids.shape != (len(keys),):
        raise InputError(f"need one generator and one set id per trajectory ({len(keys)}), got {len(rngs)} "
                         f"and {set_ids.shape[0] if set_ids.ndim else 0}", "kpsi_anonymity")
    if len(np.unique(set_ids)) != len(set_ids):
        raise InputError("set ids must be unique", "kpsi_anonymity.set_ids")
    cap = delta_cap(network, params) if (network is not None or params.psi_mode == "constant") else None
    parts = []
    for a in range(0, len(keys), chunk_size):
        b = min(len(keys), a + chunk_size)
        lo, hi = offsets[a], offsets[b]
        parts.append(_run_chunk(frame.iloc[lo:hi], xy[lo:hi], t_ns[lo:hi], offsets[a:b + 1] - lo,
                                keys.iloc[a:b], network, params, list(rngs[a:b]), set_ids[a:b], cap, crs,
                                unit))
    if not parts:
        parts.append(_run_chunk(frame, xy, t_ns, offsets, keys, network, params, [], set_ids, cap, crs, unit))
    published, private, status, audit = (pd.concat([p[i] for p in parts], ignore_index=True)
                                         for i in range(4))
    if len(parts) > 1:  # each chunk is sorted by set id; so is the whole
        published = published.sort_values(["set_id", "member", "seq"], kind="stable", ignore_index=True)
        private = private.sort_values(["set_id", "member"], kind="stable", ignore_index=True)
        audit = audit.sort_values(["set_id", "seq"], kind="stable", ignore_index=True)
    return KPsiRelease(published, private, status, audit)


def _resolve_crs(network: RoadNetwork | None, crs: CRS | str | None) -> CRS | None:
    given = CRS.from_user_input(crs) if crs is not None else None
    own = network.crs if network is not None else None
    if given is not None and own is not None and given != own:
        raise InputError("crs differs from the road network's CRS; project the points to the network's CRS",
                         "kpsi_anonymity.crs")
    if given is not None and not given.is_projected:
        raise InputError("crs must be the projected (metric) CRS of x and y", "kpsi_anonymity.crs")
    return given if given is not None else own


def _prepare(points: pd.DataFrame, crs: CRS | None):
    require_columns(points, ("object_id", "traj_id", "seq", "t"), "kpsi_anonymity")
    frame = points.sort_values(["object_id", "traj_id", "seq"], kind="stable").reset_index(drop=True)
    if {"x", "y"} <= set(frame.columns):
        xy = frame[["x", "y"]].to_numpy(dtype=float)
    elif {"lon", "lat"} <= set(frame.columns) and crs is not None:
        fx, fy = Transformer.from_crs("EPSG:4326", crs, always_xy=True).transform(
            frame["lon"].to_numpy(dtype=float), frame["lat"].to_numpy(dtype=float))
        xy = np.column_stack([fx, fy])
    else:
        raise InputError("points need x, y in metres (or lon, lat and a known projected CRS)",
                         "kpsi_anonymity")
    if not np.all(np.isfinite(xy)):
        raise InputError("points contain non-finite coordinates", "kpsi_anonymity")
    t = pd.to_datetime(frame["t"], utc=True)
    if t.isna().any():
        raise InputError("points contain missing timestamps", "kpsi_anonymity.t")
    t_ns = t.dt.as_unit("ns").astype("int64").to_numpy()
    obj, traj = frame["object_id"].to_numpy(), frame["traj_id"].to_numpy()
    new = np.r_[True, (obj[1:] != obj[:-1]) | (traj[1:] != traj[:-1])] if len(frame) else np.zeros(0, bool)
    starts = np.flatnonzero(new)
    offsets = np.r_[starts, len(frame)].astype(np.int64)
    same = ~new[1:]
    if np.any(np.diff(t_ns)[same] <= 0):
        where = int(np.flatnonzero(same & (np.diff(t_ns) <= 0))[0]) + 1
        raise InputError("timestamps must be strictly increasing within a trajectory (object "
                         f"{_plain(obj[where])!r}, trajectory {_plain(traj[where])!r}, seq "
                         f"{_plain(frame['seq'].iloc[where])!r})", "kpsi_anonymity.t")
    keys = frame.loc[starts, ["object_id", "traj_id"]].reset_index(drop=True)
    return frame, xy, t_ns, offsets, keys, t.dt.unit


def _run_chunk(frame: pd.DataFrame, xy: np.ndarray, t_ns: np.ndarray, offsets: np.ndarray, keys: pd.DataFrame,
               network: RoadNetwork | None, params: KPsiParams, rngs: list, set_ids: np.ndarray,
               cap: float | None, crs: CRS | None, unit: str) -> tuple[pd.DataFrame, ...]:
    k = params.k
    t_s = (t_ns - (t_ns.min() if len(t_ns) else 0)) / 1e9
    one = generate_dummies(xy, t_s, offsets, network, params, rngs)
    lengths = np.diff(offsets)
    if params.on_infeasible == "raise" and not one.ok.all():
        r = int(np.flatnonzero(~one.ok)[0])
        seq = _plain(frame["seq"].iloc[offsets[r] + one.bad_point[r]])
        raise InfeasibleError(one.reason[r], f"object {_plain(keys['object_id'].iloc[r])!r}, trajectory "
                                             f"{_plain(keys['traj_id'].iloc[r])!r}, seq {seq!r}")
    status = _status(one, keys, set_ids, frame, network, params)
    ok = np.flatnonzero(one.ok)
    n_ok = lengths[ok]
    point_ok = np.repeat(one.ok, lengths)
    locs = np.concatenate([one.dummies, one.real[:, None, :]], axis=1)[point_ok]  # (P_ok, k, 2), real last
    psi = one.psi[point_ok]
    if cap is None:
        cap = float(np.nanmax(psi)) if len(psi) else 1.0  # not reached: no network means 'constant'
    eps_axis = np.repeat(params.epsilon_per_axis(n_ok.astype(float)), n_ok)
    scales = noise_scales(locs, psi, eps_axis, params, cap)
    # Phase 2 randomness after Phase 1, per trajectory: noise uniforms (n, k, 2), then the member permutation
    u = [rngs[r].random((lengths[r], k, 2)) for r in ok]
    perms = np.array([rngs[r].permutation(k) for r in ok]).reshape(len(ok), k)
    noisy = perturb(locs, scales, np.concatenate(u) if u else np.empty((0, k, 2)))
    # published rows: sets by set id, then member, then seq; member perms[r, slot], the real slot is k−1
    slot_of_member = np.argsort(perms, axis=1)
    by_set = np.argsort(set_ids[ok], kind="stable")
    rows_per = k * n_ok[by_set]
    row_set = np.repeat(by_set, rows_per)  # position in ``ok``
    local = np.arange(int(rows_per.sum())) - np.repeat(np.cumsum(rows_per) - rows_per, rows_per)
    n_row = n_ok[row_set]
    member, step = local // n_row, local % n_row
    ok_start = np.cumsum(n_ok) - n_ok
    point = ok_start[row_set] + step  # index into the P_ok arrays
    slot = slot_of_member[row_set, member]
    t_values = t_ns[point_ok]
    published = pd.DataFrame({
        "set_id": set_ids[ok][row_set], "member": member.astype(np.int64), "seq": step.astype(np.int64),
        "t": pd.DatetimeIndex(pd.to_datetime(t_values[point], utc=True)).as_unit(unit),
        "x": noisy[point, slot, 0], "y": noisy[point, slot, 1],
    })
    if crs is not None:
        lon, lat = Transformer.from_crs(crs, "EPSG:4326", always_xy=True).transform(
            published["x"].to_numpy(), published["y"].to_numpy())
        published["lon"], published["lat"] = lon, lat
    real_member = perms[:, k - 1]
    private = pd.DataFrame({
        "set_id": np.repeat(set_ids[ok][by_set], k),
        "member": np.tile(np.arange(k, dtype=np.int64), len(ok)),
        "object_id": np.repeat(keys["object_id"].to_numpy()[ok][by_set], k),
        "traj_id": np.repeat(keys["traj_id"].to_numpy()[ok][by_set], k),
        "is_real": (np.tile(np.arange(k), len(ok)) == np.repeat(real_member[by_set], k)),
    })
    point_set = np.repeat(set_ids[ok], n_ok)
    point_seq = np.arange(len(psi)) - np.repeat(ok_start, n_ok)
    real_edge = one.real_edge[point_ok]
    audit = pd.DataFrame({
        "set_id": point_set, "seq": point_seq.astype(np.int64), "delta_m": psi,
        "scale_x": scales[:, 0], "scale_y": scales[:, 1],
        "real_edge_id": (network.edge_id[real_edge] if network is not None
                         else np.full(len(psi), -1, np.int64)),
    }).sort_values(["set_id", "seq"], kind="stable").reset_index(drop=True)
    return published, private, status, audit


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def _status(one: PhaseOne, keys: pd.DataFrame, set_ids: np.ndarray, frame: pd.DataFrame,
            network: RoadNetwork | None, params: KPsiParams) -> pd.DataFrame:
    lengths = np.diff(one.offsets)
    starts = one.offsets[:-1]
    traj = np.repeat(np.arange(len(lengths)), lengths)
    psi = pd.Series(one.psi).groupby(traj).agg(["min", "mean", "max"]).reindex(range(len(lengths)))
    # distance of the real GPS points to the network before any snapping: large values make them stand out
    offroad = pd.Series(one.real_offroad).groupby(traj).median().reindex(range(len(lengths))).to_numpy()
    seq = frame["seq"].to_numpy()
    bad_seq = [seq[a + p].item() if p >= 0 else None for a, p in zip(starts, one.bad_point, strict=True)]
    return pd.DataFrame({
        "object_id": keys["object_id"].to_numpy(), "traj_id": keys["traj_id"].to_numpy(), "set_id": set_ids,
        "status": np.where(one.ok, "ok", "suppressed"), "reason": one.reason, "bad_seq": bad_seq,
        "n_points": lengths, "grown_points": one.grown, "motion_violations": one.motion_violations,
        "redraws": one.redraws, "delta_min_m": psi["min"].to_numpy(), "delta_mean_m": psi["mean"].to_numpy(),
        "delta_max_m": psi["max"].to_numpy(), "real_offroad_median_m": offroad,
    })
