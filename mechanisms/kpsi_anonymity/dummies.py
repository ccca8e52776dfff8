"""Phase 1: k−1 dummy trajectories per real one, inside the discs of Ψ (Chen, Li, Zhang 2020, §4.2, Alg. 1).

Alg. 1 made implementable (A2, A4), linking over time (A5), the road-ignoring dummies of the paper's Fig. 6
(also the fallback without a network). See docs/design.md ((k-Ψ)-anonymity). The work is vectorised over a batch
of trajectories and loops over
time steps only; every trajectory draws its randomness from its own generator, in a fixed order (one block per
trajectory, then the re-draws of its failed steps in time order), so a trajectory's dummies do not depend on
the other trajectories of the batch.

Road-aware, at each real location p_i (disc radius δ_i from :mod:`mechanisms.kpsi_anonymity.psi`):
the candidates are the edges other than the real one with at least ``min_part_m`` inside the disc; the k−1
dummy slots are served in a random order, each taking a uniformly random candidate not yet taken at this step
(and, with "reachable" linking, within network distance B_i of the slot's previous dummy; if there is none,
the unused candidate nearest by network distance, recorded as a motion violation); each dummy is placed
uniformly by arc length on its edge's in-disc part. A step whose k locations are not all ``min_separation_m``
apart is drawn again (edges and positions), at most ``max_tries`` times in all; after half of them the travel
budget is ignored for that step (the budget can force two dummies onto two short parts that touch). A motion
violation is a dummy move longer, along the roads, than the budget.
Road-ignoring: each dummy is uniform in the disc (with "reachable" linking: uniform in the part of the disc
within Euclidean distance B_i of its previous position).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.kpsi_anonymity.params import KPsiParams
from mechanisms.kpsi_anonymity.psi import Discs, delta_cap, feasible_discs, initial_thresholds
from trajpub.errors import InputError
from trajpub.roads import RoadNetwork

BUDGET_ROUND_M = 250.0  # node-distance tables are built for budgets rounded up to this step (cache reuse)


@dataclass(frozen=True, eq=False)
class PhaseOne:
    """Phase 1 of a batch of trajectories; points are in trajectory order (``offsets`` is the CSR).

    real: (P, 2) the real locations used (snapped onto their edge if ``snap_real``).
    dummies: (P, k−1, 2) dummy locations in slot order (NaN for trajectories that are not ``ok``).
    psi: (P,) δ_i in metres (NaN where infeasible).
    real_edge: (P,) edge index of the real location (−1 without a network).
    real_offroad: (P,) distance of the (original, unsnapped) real location to the network (NaN without one).
    dummy_edge: (P, k−1) edge index of each dummy (−1 when road-ignoring or not ok).
    ok: (R,) whether the trajectory got its k−1 dummies; reason: why not (None when ok);
    bad_point: (R,) the point (position in the trajectory) where it failed, −1 when ok.
    grown, motion_violations, redraws: (R,) counts of points whose disc was widened, of dummy moves beyond
        the travel budget ("reachable" linking) and of re-drawn steps.
    """

    offsets: np.ndarray
    real: np.ndarray
    dummies: np.ndarray
    psi: np.ndarray
    real_edge: np.ndarray
    real_offroad: np.ndarray
    dummy_edge: np.ndarray
    ok: np.ndarray
    reason: list
    bad_point: np.ndarray
    grown: np.ndarray
    motion_violations: np.ndarray
    redraws: np.ndarray

    def locations(self, r: int) -> np.ndarray:
        """(k, n, 2) the k trajectories of set r in slot order: slots 0..k−2 dummies, slot k−1 the real
        one."""
        s = slice(self.offsets[r], self.offsets[r + 1])
        return np.concatenate([np.moveaxis(self.dummies[s], 1, 0), self.real[s][None]], axis=0)


def travel_budgets(real: np.ndarray, t_s: np.ndarray, offsets: np.ndarray, params: KPsiParams) -> np.ndarray:
    """B_i = min(κ·max(v_i, v_floor)·Δt_i, max_link_budget_m), v_i = |l_i − l_{i−1}|/Δt_i (A5); NaN at
    each trajectory's first point."""
    step = np.hypot(*np.diff(real, axis=0).T)
    dt = np.diff(t_s)
    speed = np.divide(step, dt, out=np.zeros_like(step), where=dt > 0)
    budget = np.r_[np.nan, params.kappa * np.maximum(speed, params.v_floor_mps) * dt]
    budget = np.minimum(budget, params.max_link_budget_m)
    budget[offsets[:-1][np.diff(offsets) > 0]] = np.nan
    return budget


def generate_dummies(real: np.ndarray, t_s: np.ndarray, offsets: np.ndarray, network: RoadNetwork | None,
                     params: KPsiParams, rngs: list[np.random.Generator], psi: np.ndarray | None = None
                     ) -> PhaseOne:
    """Phase 1 for a batch: ``real`` (P, 2) metres in the network's CRS, ``t_s`` (P,) seconds strictly
    increasing within each trajectory, ``offsets`` (R+1,), one generator per trajectory.

    ``psi`` overrides the threshold rule with given δ_i (our protocol for the paper's Fig. 6 runs the road-ignoring
    baseline on the road-aware run's Ψ); with a network and road-aware dummies, discs that cannot host k−1
    dummies are still widened. Infeasible trajectories come back with ``ok`` False and a reason; raising or
    suppressing is the caller's decision (``params.on_infeasible``)."""
    real = np.array(real, dtype=float, copy=True)
    t_s = np.asarray(t_s, dtype=float)
    offsets = np.asarray(offsets, dtype=np.int64)
    n_traj, n_pts, k1 = len(offsets) - 1, len(real), params.k - 1
    if len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != n_pts or np.any(np.diff(offsets) < 1):
        raise InputError("offsets must run from 0 to the number of points with every trajectory non-empty",
                         "kpsi_anonymity")
    if real.shape != (n_pts, 2) or t_s.shape != (n_pts,):
        raise InputError("real must be (P, 2) and t_s (P,)", "kpsi_anonymity")
    if len(rngs) != n_traj:
        raise InputError(f"need one generator per trajectory ({n_traj}), got {len(rngs)}", "kpsi_anonymity")
    if params.road_aware and network is None:
        raise InputError("road-aware dummies need a road network; use road_aware false (dummies may be "
                         "off-road) when none exists", "kpsi_anonymity.road_aware")
    real_edge = np.full(n_pts, -1, np.int64)
    real_offroad = np.full(n_pts, np.nan)
    if network is not None and n_pts:
        real_edge, real_offroad = network.nearest_edges(real[:, 0], real[:, 1])
        if params.snap_real:
            sx, sy, _ = network.project_onto(real[:, 0], real[:, 1], real_edge)
            real = np.column_stack([sx, sy])
    pairs = None
    if psi is None and params.road_aware:
        delta0, pairs = initial_thresholds(network, params, real[:, 0], real[:, 1], real_edge,
                                           return_pairs=True)
    elif psi is None:
        delta0 = initial_thresholds(network, params, real[:, 0], real[:, 1], real_edge)
    else:
        delta0 = np.asarray(psi, dtype=float)
        if delta0.shape != (n_pts,) or not np.all(np.isfinite(delta0) & (delta0 > 0)):
            raise InputError("psi must hold one positive finite delta per point", "kpsi_anonymity.psi")
    state = _State(n_traj, n_pts, k1)
    traj_of = np.repeat(np.arange(n_traj), np.diff(offsets))
    budget = travel_budgets(real, t_s, offsets, params)
    if params.road_aware:
        discs = feasible_discs(network, params, real[:, 0], real[:, 1], real_edge, delta0, pairs)
        psi_out = discs.delta
        state.grown = np.bincount(traj_of, weights=discs.grown > 0, minlength=n_traj).astype(np.int64)
        cap = delta_cap(network, params)
        for r in np.unique(traj_of[np.isnan(psi_out)]):
            bad = int(np.flatnonzero(np.isnan(psi_out[offsets[r]:offsets[r + 1]]))[0])
            state.fail(r, bad, f"fewer than k-1 = {k1} road edges with at least {params.min_part_m:g} m "
                               f"inside the disc around the point, even with delta widened to {cap:.4g} m")
        _link_on_roads(network, params, real, budget, offsets, discs, rngs, state)
    else:
        psi_out = delta0
        _place_in_discs(params, real, budget, offsets, psi_out, rngs, state)
    not_ok = np.repeat(~state.ok, np.diff(offsets))
    state.dummies[not_ok] = np.nan
    state.dummy_edge[not_ok] = -1
    return PhaseOne(offsets, real, state.dummies, psi_out, real_edge, real_offroad, state.dummy_edge,
                    state.ok, state.reason, state.bad_point, state.grown, state.violations, state.redraws)


class _State:
    def __init__(self, n_traj: int, n_pts: int, k1: int):
        self.ok = np.ones(n_traj, bool)
        self.reason: list = [None] * n_traj
        self.bad_point = np.full(n_traj, -1, np.int64)
        self.grown = np.zeros(n_traj, np.int64)
        self.violations = np.zeros(n_traj, np.int64)
        self.redraws = np.zeros(n_traj, np.int64)
        self.dummies = np.full((n_pts, k1, 2), np.nan)
        self.dummy_edge = np.full((n_pts, k1), -1, np.int64)

    def fail(self, r: int, point: int, reason: str) -> None:
        if self.ok[r]:
            self.ok[r] = False
            self.reason[r] = reason
            self.bad_point[r] = point


def _min_separation(real: np.ndarray, dummies: np.ndarray) -> np.ndarray:
    """(rows,) the least distance between any two of the k locations of each row."""
    pts = np.concatenate([real[:, None, :], dummies], axis=1)
    diff = pts[:, :, None, :] - pts[:, None, :, :]
    d = np.hypot(diff[..., 0], diff[..., 1])
    iu = np.triu_indices(pts.shape[1], 1)
    return d[:, iu[0], iu[1]].min(axis=1)


def _segment_argmax(score: np.ndarray, start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Index of the first maximum of each consecutive group."""
    best = np.maximum.reduceat(score, start)
    is_best = score == np.repeat(best, count)
    return np.minimum.reduceat(np.where(is_best, np.arange(len(score)), len(score)), start)


# ---- road-aware --------------------------------------------------------------------------------------------


def _link_on_roads(network: RoadNetwork, params: KPsiParams, real: np.ndarray, budget: np.ndarray,
                   offsets: np.ndarray, discs: Discs, rngs: list, state: _State) -> None:
    k1 = params.k - 1
    n_traj = len(offsets) - 1
    lengths = np.diff(offsets)
    n_cand = np.diff(discs.cand_start)
    traj_cands = np.add.reduceat(n_cand, offsets[:-1]) if len(n_cand) else np.zeros(n_traj, np.int64)
    traj_cands = np.where(lengths > 0, traj_cands, 0)
    # one block per live trajectory: candidate keys (C_t × k1), slot-order uniforms (n_t × k1), positions (n_t
    # × k1)
    sizes = np.where(state.ok, (traj_cands + 2 * lengths) * k1, 0)
    block_start = np.cumsum(sizes) - sizes
    big = np.concatenate([rngs[r].random(sizes[r]) for r in range(n_traj)] + [np.empty(0)])
    traj_of = np.repeat(np.arange(n_traj), lengths)
    point_in_traj = np.arange(len(real)) - offsets[traj_of]
    cand_traj = np.repeat(traj_of, n_cand)
    cand_in_traj = np.arange(len(discs.cand_edge)) - discs.cand_start[offsets[cand_traj]]
    key_base = block_start[cand_traj] + cand_in_traj * k1
    order_base = block_start[traj_of] + traj_cands[traj_of] * k1 + point_in_traj * k1
    pos_base = order_base + lengths[traj_of] * k1
    slots = np.arange(k1)

    reachable = params.linking == "reachable"
    table = None
    # Each trajectory sees network distances up to its own horizon (its largest budget rounded up), whatever
    # the batch: the fallback's "nearest by network distance" must not depend on the other trajectories.
    finite = np.where(np.isfinite(budget), budget, 0.0)
    horizon = np.zeros(n_traj)
    if len(finite):
        horizon = np.maximum.reduceat(finite, offsets[:-1]) if n_traj else horizon
        horizon = np.minimum(params.max_link_budget_m, BUDGET_ROUND_M * np.ceil(horizon / BUDGET_ROUND_M))
    if reachable and state.ok.any() and lengths.max() > 1:
        table = network.node_distances(float(horizon[state.ok].max()))
    prev_edge = np.zeros((n_traj, k1), np.int64)
    prev_off = np.zeros((n_traj, k1))
    prev_xy = np.zeros((n_traj, k1, 2))

    for i in range(int(lengths.max()) if n_traj else 0):
        act = np.flatnonzero(state.ok & (lengths > i))
        if not len(act):
            break
        pts = offsets[act] + i
        gcount = n_cand[pts]
        gstart = np.cumsum(gcount) - gcount
        crow = np.repeat(np.arange(len(act)), gcount)
        cidx = np.arange(len(crow)) - gstart[crow] + discs.cand_start[pts][crow]
        ce = discs.cand_edge[cidx]
        if reachable and i > 0:
            nd = network.network_distance_to_edges(table, prev_edge[act][crow], prev_off[act][crow],
                                                   ce[:, None])
            nd = np.where(nd <= horizon[act][crow][:, None], nd, np.inf)
            reach = nd <= budget[pts][crow][:, None]
        else:
            nd = np.zeros((len(crow), k1))
            reach = np.ones((len(crow), k1), bool)
        keys = big[key_base[cidx][:, None] + slots]
        order_u = big[order_base[pts][:, None] + slots]
        pos_u = big[pos_base[pts][:, None] + slots]

        def fallback_euclid(c: np.ndarray, j: np.ndarray, act=act, crow=crow, ce=ce) -> np.ndarray:
            p = prev_xy[act[crow[c]], j]
            return network.pair_distances(p[:, 0], p[:, 1], ce[c])

        linked = reachable and i > 0
        chosen = _assign(keys, reach, nd, crow, gstart, gcount, order_u, ce, fallback_euclid,
                         first_step=not linked)
        x, y, off = network.sample_parts(discs.parts, cidx[chosen].ravel(), pos_u.ravel())
        xy = np.column_stack([x, y]).reshape(len(act), k1, 2)
        off = off.reshape(len(act), k1)
        bad = np.flatnonzero(_min_separation(real[pts], xy) < params.min_separation_m)
        relax_after = (params.max_tries - 1) // 2
        for r_local in bad:  # re-draw the whole step of this trajectory from its own generator
            r = act[r_local]
            sel = slice(gstart[r_local], gstart[r_local] + gcount[r_local])
            for attempt in range(params.max_tries - 1):
                state.redraws[r] += 1
                fresh = rngs[r].random((gcount[r_local] + 2) * k1)
                f_keys = fresh[:gcount[r_local] * k1].reshape(gcount[r_local], k1)
                f_order = fresh[gcount[r_local] * k1:(gcount[r_local] + 1) * k1][None]
                f_pos = fresh[(gcount[r_local] + 1) * k1:]
                # the travel budget can force two dummies onto two short, touching parts: after half of the
                # draws, the budget is ignored for this step (moves beyond it still count as violations)
                relaxed = linked and attempt >= relax_after
                c = _assign(f_keys, np.ones_like(reach[sel]) if relaxed else reach[sel], nd[sel],
                            np.zeros(gcount[r_local], np.int64), np.zeros(1, np.int64), gcount[[r_local]],
                            f_order, ce[sel], lambda c, j, s=sel.start: fallback_euclid(c + s, j),
                            first_step=relaxed or not linked)
                fx, fy, foff = network.sample_parts(discs.parts, cidx[sel][c.ravel()], f_pos)
                fxy = np.column_stack([fx, fy])[None]
                if _min_separation(real[pts[[r_local]]], fxy)[0] >= params.min_separation_m:
                    chosen[r_local] = c[0] + sel.start
                    xy[r_local] = fxy[0]
                    off[r_local] = foff
                    break
            else:
                state.fail(r, i, f"no {params.k} locations at least {params.min_separation_m:g} m apart in "
                                 f"{params.max_tries} draws")
        if linked:  # motion violations: dummy moves longer (along the roads) than the travel budget
            viol = (nd[chosen, slots] > budget[pts][:, None]).sum(axis=1)
        else:
            viol = np.zeros(len(act), np.int64)
        keep = state.ok[act]
        act, pts = act[keep], pts[keep]
        state.dummies[pts] = xy[keep]
        state.dummy_edge[pts] = ce[chosen[keep]]
        state.violations[act] += viol[keep]
        prev_edge[act] = ce[chosen[keep]]
        prev_off[act] = off[keep]
        prev_xy[act] = xy[keep]


def _assign(keys: np.ndarray, reach: np.ndarray, nd: np.ndarray, crow: np.ndarray, gstart: np.ndarray,
            gcount: np.ndarray, order_u: np.ndarray, ce: np.ndarray, fallback_euclid,
            first_step: bool) -> np.ndarray:
    """Serve the k−1 slots of each row in the random order ``argsort(order_u)``: each slot takes the unused
    reachable candidate with the largest key (a uniform choice), else the unused candidate nearest by network
    distance, then Euclidean distance, then edge id (a motion violation). Returns the chosen flat candidate
    index per (row, slot)."""
    n_c, k1 = keys.shape
    n_rows = len(gstart)
    order = np.argsort(order_u, axis=1)
    used = np.zeros(n_c, bool)
    chosen = np.empty((n_rows, k1), np.int64)
    flat = np.arange(n_c)
    for s in range(k1):
        slot_of_row = order[:, s]
        j = slot_of_row[crow]
        score = np.where(reach[flat, j] & ~used, keys[flat, j], -1.0)
        best = _segment_argmax(score, gstart, gcount)
        stuck = np.flatnonzero(score[best] < 0)
        if len(stuck):
            if first_step:  # pragma: no cover - every row has >= k-1 candidates and all are reachable
                raise RuntimeError("no free candidate on a first step")
            cand = np.flatnonzero(np.isin(crow, stuck) & ~used)
            jc = j[cand]
            euclid = fallback_euclid(cand, jc)
            o = np.lexsort((ce[cand], euclid, nd[cand, jc], crow[cand]))
            cand = cand[o]
            first = np.r_[True, crow[cand][1:] != crow[cand][:-1]]
            best[crow[cand][first]] = cand[first]
        chosen[np.arange(n_rows), slot_of_row] = best
        used[best] = True
    return chosen


# ---- road-ignoring -----------------------------------------------------------------------------------------


def _place_in_discs(params: KPsiParams, real: np.ndarray, budget: np.ndarray, offsets: np.ndarray,
                    psi: np.ndarray, rngs: list, state: _State) -> None:
    k1 = params.k - 1
    n_traj = len(offsets) - 1
    lengths = np.diff(offsets)
    sizes = lengths * k1 * 2
    block_start = np.cumsum(sizes) - sizes
    big = np.concatenate([rngs[r].random(sizes[r]) for r in range(n_traj)] + [np.empty(0)])
    traj_of = np.repeat(np.arange(n_traj), lengths)
    base = block_start[traj_of] + (np.arange(len(real)) - offsets[traj_of]) * k1 * 2
    reachable = params.linking == "reachable"
    prev_xy = np.zeros((n_traj, k1, 2))
    for i in range(int(lengths.max()) if n_traj else 0):
        act = np.flatnonzero(state.ok & (lengths > i))
        if not len(act):
            break
        pts = offsets[act] + i
        u = big[base[pts][:, None] + np.arange(2 * k1)].reshape(len(act), k1, 2)
        link = reachable and i > 0
        xy, viol = _disc_points(real[pts], psi[pts], u, prev_xy[act] if link else None,
                                budget[pts] if link else None, [rngs[r] for r in act], params)
        bad = np.flatnonzero(_min_separation(real[pts], xy) < params.min_separation_m)
        for r_local in bad:
            r = act[r_local]
            for _attempt in range(params.max_tries - 1):
                state.redraws[r] += 1
                sub = [r_local]
                fxy, fv = _disc_points(real[pts[sub]], psi[pts[sub]], rngs[r].random((1, k1, 2)),
                                       prev_xy[act[sub]] if link else None,
                                       budget[pts[sub]] if link else None, [rngs[r]], params)
                if _min_separation(real[pts[sub]], fxy)[0] >= params.min_separation_m:
                    xy[r_local], viol[r_local] = fxy[0], fv[0]
                    break
            else:
                state.fail(r, i, f"no {params.k} locations at least {params.min_separation_m:g} m apart in "
                                 f"{params.max_tries} draws")
        keep = state.ok[act]
        state.dummies[pts[keep]] = xy[keep]
        state.violations[act[keep]] += viol[keep]
        prev_xy[act[keep]] = xy[keep]


def _uniform_in_disc(centre: np.ndarray, radius: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Uniform points in discs from two uniforms each (radius √u₀·r, angle 2πu₁); ``radius`` has the shape of
    ``u`` without its last axis."""
    rad = radius * np.sqrt(u[..., 0])
    ang = 2 * np.pi * u[..., 1]
    return centre + np.stack([rad * np.cos(ang), rad * np.sin(ang)], axis=-1)


def _disc_points(real: np.ndarray, delta: np.ndarray, u: np.ndarray, prev: np.ndarray | None,
                 budget: np.ndarray | None, rngs: list, params: KPsiParams) -> tuple[np.ndarray, np.ndarray]:
    """(rows, k−1, 2) dummy locations uniform in B(real, δ), or, with ``prev``, uniform in
    B(real, δ) ∩ B(prev, budget) by rejection from the smaller disc (first try from ``u``, then at most
    max_tries − 1 fresh tries, then the point of B(real, δ) nearest to prev). When the intersection is empty
    the budget becomes |prev − real| − δ/2, so the dummy lands in the half of the disc's depth facing prev, at
    random; that step is a motion violation."""
    rows, k1 = u.shape[:2]
    centre = np.broadcast_to(real[:, None, :], (rows, k1, 2))
    radius = np.broadcast_to(delta[:, None], (rows, k1))
    viol = np.zeros(rows, np.int64)
    if prev is None:
        return _uniform_in_disc(centre, radius, u), viol
    b = np.broadcast_to(budget[:, None], (rows, k1))
    gap = np.hypot(*(prev - centre).transpose(2, 0, 1))
    empty = gap > radius + b
    # no position within budget: the budget is stretched to reach half-way into the disc (a motion violation)
    b = np.where(empty, gap - radius / 2, b)
    own_smaller = radius <= b
    s_centre = np.where(own_smaller[..., None], centre, prev)
    s_radius = np.where(own_smaller, radius, b)
    o_centre = np.where(own_smaller[..., None], prev, centre)
    o_radius = np.where(own_smaller, b, radius)
    xy = _uniform_in_disc(s_centre, s_radius, u)
    accept = np.hypot(*(xy - o_centre).transpose(2, 0, 1)) <= o_radius
    for _ in range(params.max_tries - 1):  # fresh tries, per row from its own generator, slots in order
        pending = np.flatnonzero((~accept).any(axis=1))
        if not len(pending):
            break
        for r in pending:
            js = np.flatnonzero(~accept[r])
            cand = _uniform_in_disc(s_centre[r, js], s_radius[r, js], rngs[r].random((len(js), 2)))
            ok = np.hypot(*(cand - o_centre[r, js]).T) <= o_radius[r, js]
            xy[r, js[ok]] = cand[ok]
            accept[r, js[ok]] = True
    fallback = ~accept
    if fallback.any():  # rejection failed max_tries times: the point of the disc nearest to prev, just inside
        direction = prev[fallback] - centre[fallback]
        dist = np.hypot(direction[:, 0], direction[:, 1])
        scale = np.minimum(1.0, radius[fallback] * (1 - 1e-12) / np.maximum(dist, 1e-300))
        xy[fallback] = centre[fallback] + direction * scale[:, None]
    viol += empty.sum(axis=1)
    return xy, viol
