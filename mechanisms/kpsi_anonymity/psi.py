"""The adaptive threshold set Ψ = (δ_1, …, δ_n) and the road edges that can host dummies (A1, A2).

The paper says only that δ_i "is adaptively determined by the query context and the motion model … adapting to
road changes of different segments" (§3.2, §4.1) and gives no formula. The rule here is ours (docs/design.md,
(k-Ψ)-anonymity, A1): δ follows local road density through r_k, the distance at which a disc first touches k
distinct edges, so that every disc holds enough road for k−1 dummies on distinct edges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely

from mechanisms.kpsi_anonymity.params import KPsiParams
from trajpub.errors import ParameterError
from trajpub.road_queries import DiscParts
from trajpub.roads import RoadNetwork


def anchor_rk(network: RoadNetwork, k: int) -> np.ndarray:
    """(E, 3) r_k at each edge's source end, midpoint (by arc length) and target end; cached per k."""

    def compute() -> np.ndarray:
        pts = anchor_points(network).reshape(-1, 2)
        return network.kth_nearest_distance(pts[:, 0], pts[:, 1], k).reshape(network.n_edges, 3)

    return network.cached(("kpsi_anchor_rk", int(k)), compute)


def anchor_points(network: RoadNetwork) -> np.ndarray:
    """(E, 3, 2): the anchors of :func:`anchor_rk`."""

    def compute() -> np.ndarray:
        a = shapely.get_coordinates(shapely.get_point(network.geometry, 0))
        b = shapely.get_coordinates(shapely.get_point(network.geometry, -1))
        m = shapely.get_coordinates(shapely.line_interpolate_point(network.geometry, 0.5, normalized=True))
        return np.stack([a, m, b], axis=1)

    return network.cached(("kpsi_anchor_points",), compute)


def segment_thresholds(network: RoadNetwork, params: KPsiParams) -> np.ndarray:
    """δ_seg(e) = clip((1+μ)·max(r_k(a_e), r_k(m_e), r_k(b_e)), δ_min, δ_max) for every edge (A1)."""
    rk = anchor_rk(network, params.k)
    return np.clip((1 + params.mu) * rk.max(axis=1), params.delta_min_m, params.delta_max_m)


def constant_delta(network: RoadNetwork | None, params: KPsiParams) -> float:
    """δ of the "constant" mode: ``delta_m``, else the largest δ_seg of the network (A1)."""
    if params.delta_m is not None:
        return float(params.delta_m)
    if network is None:
        raise ParameterError("psi_mode 'constant' without a road network needs delta_m",
                             "kpsi_anonymity.delta_m")
    return float(segment_thresholds(network, params).max())


def delta_cap(network: RoadNetwork | None, params: KPsiParams) -> float:
    """The largest δ_i any point can get: δ in "constant" mode, else δ_max. It sets the data-independent
    noise scale 2·δ_cap/ε."""
    return constant_delta(network, params) if params.psi_mode == "constant" else float(params.delta_max_m)


@dataclass(frozen=True, eq=False)
class Discs:
    """The final disc of every real point and the edges it offers for dummies.

    delta: (P,) δ_i (NaN where no disc up to the cap holds k−1 usable edges).
    grown: (P,) how many times δ_i was widened by ``growth``.
    cand_start: (P+1,) CSR offsets of each point's candidate edges (empty for infeasible points).
    cand_edge: candidate edge indices, per point ordered by (distance, edge id); never the real edge.
    parts: in-disc parts of each candidate (pair i of ``parts`` is candidate i).
    """

    delta: np.ndarray
    grown: np.ndarray
    cand_start: np.ndarray
    cand_edge: np.ndarray
    parts: DiscParts


def initial_thresholds(network: RoadNetwork | None, params: KPsiParams, x: np.ndarray, y: np.ndarray,
                       real_edge: np.ndarray, return_pairs: bool = False):
    """δ_i before any widening, by ``params.psi_mode`` (A1). With ``return_pairs`` (needs a network),
    also the (point, edge index, distance) pairs of a disc query whose radius is at least δ_i, which
    :func:`feasible_discs` can reuse instead of querying again."""
    if params.psi_mode == "constant":
        delta = np.full(len(x), constant_delta(network, params))
        if not return_pairs:
            return delta
        return delta, network.pairs_within(x, y, delta)
    if network is None:
        raise ParameterError(f"psi_mode '{params.psi_mode}' needs a road network; without one use 'constant' "
                             "with delta_m", "kpsi_anonymity.psi_mode")
    radius = _query_radius(network, params, x, y, real_edge)
    pidx, eidx, d = network.pairs_within(x, y, radius)
    count = np.bincount(pidx, minlength=len(x))
    starts = np.cumsum(count) - count
    rk = np.full(len(x), np.inf)
    enough = count >= params.k
    rk[enough] = d[starts[enough] + params.k - 1]
    short = ~enough & (radius < params.delta_max_m)  # only by rounding: find r_k the slow way
    if short.any():
        rk[short] = network.kth_nearest_distance(x[short], y[short], params.k, radius[short])
    delta = (1 + params.mu) * rk
    if params.psi_mode == "segment":
        delta = np.maximum(delta, segment_thresholds(network, params)[real_edge])
    delta = np.clip(delta, params.delta_min_m, params.delta_max_m)
    if not return_pairs:
        return delta
    if np.any(delta > radius):  # pragma: no cover - the radius bounds delta by construction
        return delta, network.pairs_within(x, y, delta)
    return delta, (pidx, eidx, d)


def _query_radius(network: RoadNetwork, params: KPsiParams, x: np.ndarray, y: np.ndarray,
                  real_edge: np.ndarray) -> np.ndarray:
    """An upper bound of δ_i that still contains r_k: r_k is 1-Lipschitz, so r_k(p) <= r_k(q) + |p − q| for
    each anchor q of the real edge."""
    anchors = anchor_points(network)[real_edge]
    gap = np.hypot(anchors[..., 0] - x[:, None], anchors[..., 1] - y[:, None])
    upper = (anchor_rk(network, params.k)[real_edge] + gap).min(axis=1)
    radius = (1 + params.mu) * upper
    if params.psi_mode == "segment":
        radius = np.maximum(radius, segment_thresholds(network, params)[real_edge])
    return np.clip(radius, params.delta_min_m, params.delta_max_m)


def feasible_discs(network: RoadNetwork, params: KPsiParams, x: np.ndarray, y: np.ndarray,
                   real_edge: np.ndarray, delta0: np.ndarray, pairs: tuple | None = None) -> Discs:
    """Widen each disc until it holds at least k−1 candidate edges: edges other than the real one whose part
    inside the disc is at least ``min_part_m`` long (A1 feasibility rule, A2 ``TreeGenerate``).
    δ grows by ``growth`` at most ``max_grow`` times and never beyond the cap (δ_max; "constant": no growth).
    Points still infeasible get δ = NaN and no candidates. ``pairs``: a disc query at radii >= ``delta0``
    (from :func:`initial_thresholds`), reused for the first level."""
    n = len(x)
    cap = delta_cap(network, params)
    levels = 0 if params.psi_mode == "constant" else params.max_grow
    delta = np.full(n, np.nan)
    grown = np.zeros(n, np.int64)
    found: list[tuple[np.ndarray, np.ndarray, DiscParts]] = []  # (point, edge, parts) per level
    pending = np.arange(n)
    for level in range(levels + 1):
        if not len(pending):
            break
        radius = np.minimum(delta0[pending] * params.growth ** level, cap)
        if level == 0 and pairs is not None:  # pending is every point: filter the earlier, wider query
            pidx, eidx, d = pairs
            keep = d <= radius[pidx]
            pidx, eidx = pidx[keep], eidx[keep]
        else:
            pidx, eidx, _ = network.pairs_within(x[pending], y[pending], radius)
        other = eidx != real_edge[pending][pidx]
        pidx, eidx = pidx[other], eidx[other]
        parts = network.clip_to_discs(x[pending][pidx], y[pending][pidx], radius[pidx], eidx)
        usable = parts.pair_length >= params.min_part_m
        count = np.bincount(pidx[usable], minlength=len(pending))
        ok = count >= params.k - 1
        delta[pending[ok]] = radius[ok]
        grown[pending[ok]] = level
        keep = usable & ok[pidx]
        idx = np.flatnonzero(keep)
        found.append((pending[pidx[idx]], eidx[idx], parts.take(idx)))
        pending = pending[~ok & (radius < cap)]
    point = np.concatenate([f[0] for f in found]) if found else np.empty(0, np.int64)
    edge = np.concatenate([f[1] for f in found]) if found else np.empty(0, np.int64)
    parts = DiscParts.concat([f[2] for f in found]) if found else DiscParts.empty()
    order = np.argsort(point, kind="stable")  # within a point: the (distance, edge id) order of the query
    counts = np.bincount(point, minlength=n)
    return Discs(delta, grown, np.r_[0, np.cumsum(counts)].astype(np.int64), edge[order], parts.take(order))
