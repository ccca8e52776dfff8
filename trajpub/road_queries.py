"""Distances from points to the edges of a road network, disc queries, and the parts of edges inside discs:
the queries of :class:`trajpub.roads.RoadNetwork` (it inherits :class:`EdgeQueries`).

**Distance semantics** (every query of this module, so that a PostGIS equivalent can be written exactly):
the distance from a point p to an edge is ``min`` over the edge's straight segments [a, b] of
``|p − (a + clip(((p−a)·(b−a)) / |b−a|², 0, 1) (b−a))|``, computed in float64 (the formula of GEOS and of
PostGIS's ``ST_Distance``; they can differ from it in the last bits). A disc query keeps the edges with
``distance <= radius`` (inclusive, like ``ST_DWithin``). Results are ordered by ``(distance, edge_id)``: equal
distances are broken by the smaller ``edge_id``. The STRtree only proposes candidates (with a small safety
margin); the decision is always the formula above. The nearest edge is the exception: GEOS's nearest edges
(all ties) decide, then the formula and the edge id order them (the two distances differ by ~1e-13 m at most).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import shapely

from trajpub.errors import InputError, ParameterError

_MARGIN_REL = 1e-9  # the STRtree proposes candidates within radius * (1 + margin) + margin_abs;
_MARGIN_ABS = 1e-6  # the exact formula then decides, so GEOS rounding never drops an edge.


@dataclass(frozen=True, eq=False)
class DiscParts:
    """Where edges run inside discs: for each queried (point, edge) pair, the parts of the edge's straight
    segments that lie inside the point's disc, as parameter intervals ``[t0, t1]`` on each segment.

    pair_start: CSR offsets (n_pairs + 1) into the segment arrays.
    segment: the network's segment index of each part; t0, t1: its interval (0 <= t0 <= t1 <= 1).
    length: length in metres of each part; pair_length: total in-disc length of each pair (n_pairs).
    """

    pair_start: np.ndarray
    segment: np.ndarray
    t0: np.ndarray
    t1: np.ndarray
    length: np.ndarray
    pair_length: np.ndarray

    @classmethod
    def empty(cls) -> DiscParts:
        z = np.empty(0)
        return cls(np.zeros(1, np.int64), np.empty(0, np.int64), z, z, z, z)

    def take(self, pairs: np.ndarray) -> DiscParts:
        """The listed pairs, in that order."""
        pairs = np.asarray(pairs, np.int64)
        start = self.pair_start[pairs]
        count = self.pair_start[pairs + 1] - start
        flat = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count - start, count)
        return DiscParts(np.r_[0, np.cumsum(count)].astype(np.int64), self.segment[flat], self.t0[flat],
                         self.t1[flat], self.length[flat], self.pair_length[pairs])

    @classmethod
    def concat(cls, items: Sequence[DiscParts]) -> DiscParts:
        """The pairs of several results one after the other."""
        offsets = np.cumsum([0] + [len(p.segment) for p in items])
        starts = [p.pair_start[:-1] + off for p, off in zip(items, offsets, strict=False)]
        return cls(np.r_[np.concatenate(starts), offsets[-1]].astype(np.int64),
                   np.concatenate([p.segment for p in items]), np.concatenate([p.t0 for p in items]),
                   np.concatenate([p.t1 for p in items]), np.concatenate([p.length for p in items]),
                   np.concatenate([p.pair_length for p in items]))


class EdgeQueries:
    """The distance and disc queries of a road network, over its straight segments: a base of
    :class:`trajpub.roads.RoadNetwork`, which holds the arrays read here (``seg_a``, ``seg_b``, ``seg_len``,
    ``seg_arc0``, ``edge_seg_start``, ``edge_id``, ``length_m``), ``n_edges``, ``bounds`` and the STRtree
    ``tree``."""

    def pair_distances(self, x: np.ndarray, y: np.ndarray, edges: np.ndarray) -> np.ndarray:
        """Distance from point ``(x[i], y[i])`` to edge index ``edges[i]`` (equal-length arrays)."""
        x, y, edges = np.asarray(x, float), np.asarray(y, float), np.asarray(edges, np.int64)
        seg, owner = self._pair_segments(edges)
        d = _point_segment_distance(x[owner], y[owner], self.seg_a[seg], self.seg_b[seg])
        return _reduce_min(d, np.bincount(owner, minlength=len(edges)))

    def _pair_segments(self, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The segments of each listed edge: (segment index, position in ``edges``), grouped by position."""
        start = self.edge_seg_start[edges]
        count = self.edge_seg_start[edges + 1] - start
        owner = np.repeat(np.arange(len(edges)), count)
        seg = np.arange(len(owner)) - np.repeat(np.cumsum(count) - count, count) + start[owner]
        return seg, owner

    def pairs_within(self, x: np.ndarray, y: np.ndarray, radius: float | np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All (point, edge) pairs with ``distance <= radius`` (radius scalar or per point), as arrays
        ``(point position, edge index, distance)`` sorted by point, then distance, then edge id."""
        x, y = np.atleast_1d(np.asarray(x, float)), np.atleast_1d(np.asarray(y, float))
        radius = np.broadcast_to(np.asarray(radius, float), x.shape)
        if len(x) == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(np.isfinite(radius))):
            raise InputError("query points and radii must be finite", "road network")
        probe = radius * (1 + _MARGIN_REL) + _MARGIN_ABS
        pidx, eidx = self.tree.query(shapely.points(x, y), predicate="dwithin", distance=probe)
        d = self.pair_distances(x[pidx], y[pidx], eidx)
        keep = d <= radius[pidx]
        pidx, eidx, d = pidx[keep], eidx[keep], d[keep]
        order = np.lexsort((eidx, d, pidx))
        return pidx[order], eidx[order], d[order]

    def edges_within(self, x: float, y: float, radius: float, return_distance: bool = False):
        """Edge ids at distance ``<= radius`` (inclusive) from (x, y), ordered by (distance, edge_id)."""
        if not (np.isfinite(radius) and radius >= 0):
            raise ParameterError(f"radius must be finite and >= 0, got {radius!r}",
                                 "road network.edges_within")
        _, eidx, d = self.pairs_within(np.array([x]), np.array([y]), radius)
        return (self.edge_id[eidx], d) if return_distance else self.edge_id[eidx]

    def nearest_edges(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(edge index, distance) of the nearest edge of each point: the edges GEOS finds nearest (all of them
        when several are equally near), then the smallest distance by this module's formula, then the smaller
        edge id."""
        x, y = np.atleast_1d(np.asarray(x, float)), np.atleast_1d(np.asarray(y, float))
        if len(x) == 0:
            return np.empty(0, np.int64), np.empty(0)
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
            raise InputError("query points must be finite", "road network")
        pidx, eidx = self.tree.query_nearest(shapely.points(x, y), all_matches=True)
        d = self.pair_distances(x[pidx], y[pidx], eidx)
        order = np.lexsort((eidx, d, pidx))
        pidx, eidx, d = pidx[order], eidx[order], d[order]
        first = np.r_[True, pidx[1:] != pidx[:-1]]
        return eidx[first], d[first]

    def nearest_edge(self, x: float, y: float) -> int:
        """Edge id of the edge nearest to (x, y); ties go to the smaller edge id."""
        eidx, _ = self.nearest_edges(np.array([x]), np.array([y]))
        return int(self.edge_id[eidx[0]])

    def distance_to_network(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Distance from each point to its nearest edge."""
        return self.nearest_edges(x, y)[1]

    def kth_nearest_distance(self, x: np.ndarray, y: np.ndarray, k: int,
                             start_radius: np.ndarray | float | None = None) -> np.ndarray:
        """r_k(p): the k-th smallest edge distance of each point (docs/design.md, A1), ``inf`` if the network has fewer
        than k edges. Found by disc queries whose radius doubles from ``start_radius`` (default: the mean edge
        length) until k edges are inside."""
        x, y = np.atleast_1d(np.asarray(x, float)), np.atleast_1d(np.asarray(y, float))
        out = np.full(len(x), np.inf)
        if k > self.n_edges or len(x) == 0:
            return out
        start = float(np.mean(self.length_m)) if start_radius is None else start_radius
        radius = np.broadcast_to(np.asarray(start, float), x.shape).copy()
        radius = np.maximum(radius, 1e-3)
        xmin, ymin, xmax, ymax = self.bounds
        pending = np.arange(len(x))
        while len(pending):
            pidx, _, d = self.pairs_within(x[pending], y[pending], radius[pending])
            count = np.bincount(pidx, minlength=len(pending))
            done = count >= k
            starts = np.cumsum(count) - count
            out[pending[done]] = d[starts[done] + k - 1]
            pending = pending[~done]
            # the farthest any edge can be: to the far corner of the bounding box
            far = np.hypot(np.maximum(np.abs(x[pending] - xmin), np.abs(x[pending] - xmax)),
                           np.maximum(np.abs(y[pending] - ymin), np.abs(y[pending] - ymax)))
            if np.any(radius[pending] > far):  # pragma: no cover - guarded by k <= n_edges above
                raise RuntimeError("k-th nearest edge not found inside the network's extent")
            radius[pending] *= 2
        return out

    def clip_to_discs(self, cx: np.ndarray, cy: np.ndarray, radius: np.ndarray,
                      edges: np.ndarray) -> DiscParts:
        """Edge ``edges[i]`` ∩ disc(``cx[i], cy[i]``, ``radius[i]``) for each pair i, segment by segment
        (analytic segment–circle intersection, for the paper's ``ConvertTol``, Alg. 1)."""
        cx, cy, radius = np.asarray(cx, float), np.asarray(cy, float), np.asarray(radius, float)
        edges = np.asarray(edges, np.int64)
        seg, owner = self._pair_segments(edges)
        a, b = self.seg_a[seg], self.seg_b[seg]
        dvec = b - a
        w = np.column_stack([cx[owner], cy[owner]]) - a
        aa = np.einsum("ij,ij->i", dvec, dvec)
        bb = np.einsum("ij,ij->i", w, dvec)
        cc = np.einsum("ij,ij->i", w, w) - radius[owner] ** 2
        disc = bb * bb - aa * cc
        root = np.sqrt(np.maximum(disc, 0.0))
        t0 = np.clip((bb - root) / aa, 0.0, 1.0)
        t1 = np.clip((bb + root) / aa, 0.0, 1.0)
        keep = (disc >= 0) & (t1 > t0)
        owner, seg, t0, t1 = owner[keep], seg[keep], t0[keep], t1[keep]
        length = (t1 - t0) * self.seg_len[seg]
        counts = np.bincount(owner, minlength=len(edges))
        pair_length = np.bincount(owner, weights=length, minlength=len(edges))
        return DiscParts(np.r_[0, np.cumsum(counts)].astype(np.int64), seg, t0, t1, length, pair_length)

    def sample_parts(self, parts: DiscParts, pairs: np.ndarray, u: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A point uniform by arc length on the in-disc parts of each listed pair, from uniforms ``u`` in [0,
        1): ``(x, y, offset)`` with ``offset`` the arc length from the edge's source node."""
        pairs = np.asarray(pairs, np.int64)
        u = np.asarray(u, float)
        first, stop = parts.pair_start[pairs], parts.pair_start[pairs + 1]
        if np.any(stop <= first):
            raise InputError("cannot sample on an edge with no part inside its disc",
                             "road network.sample_parts")
        count = stop - first
        target = u * parts.pair_length[pairs]
        k = stop - 1
        before = np.zeros(len(pairs))
        found = np.zeros(len(pairs), bool)
        # walk each pair's parts in order (sums per pair only, so a pair's point does not depend on the
        # others)
        for j in range(int(count.max()) if len(count) else 0):
            live = ~found & (j < count)
            idx = np.minimum(first + j, stop - 1)
            total = before + parts.length[idx]
            hit = live & (total > target)
            k = np.where(hit, idx, k)
            found |= hit
            before = np.where(live & ~hit, total, before)
        residual = np.where(found, np.clip(target - before, 0.0, parts.length[k]), parts.length[k])
        seg = parts.segment[k]
        t = np.clip(parts.t0[k] + residual / self.seg_len[seg], parts.t0[k], parts.t1[k])
        xy = self.seg_a[seg] + t[:, None] * (self.seg_b[seg] - self.seg_a[seg])
        return xy[:, 0], xy[:, 1], self.seg_arc0[seg] + t * self.seg_len[seg]

    def project_onto(self, x: np.ndarray, y: np.ndarray, edges: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The closest point of edge ``edges[i]`` to each point: ``(x, y, offset from the source node)``."""
        x, y, edges = np.asarray(x, float), np.asarray(y, float), np.asarray(edges, np.int64)
        seg, owner = self._pair_segments(edges)
        a, b = self.seg_a[seg], self.seg_b[seg]
        d, t = _point_segment_distance(x[owner], y[owner], a, b, return_t=True)
        counts = np.bincount(owner, minlength=len(edges))
        starts = np.cumsum(counts) - counts
        order = np.lexsort((np.arange(len(d)), d, owner))  # per pair: the first segment at the minimum
        best = order[starts]
        s, tb = seg[best], t[best]
        xy = self.seg_a[s] + tb[:, None] * (self.seg_b[s] - self.seg_a[s])
        return xy[:, 0], xy[:, 1], self.seg_arc0[s] + tb * self.seg_len[s]


def _point_segment_distance(px, py, a, b, return_t: bool = False):
    d = b - a
    wx, wy = px - a[:, 0], py - a[:, 1]
    den = d[:, 0] ** 2 + d[:, 1] ** 2
    t = np.clip(np.divide(wx * d[:, 0] + wy * d[:, 1], den, out=np.zeros_like(den), where=den > 0), 0.0, 1.0)
    dist = np.hypot(wx - t * d[:, 0], wy - t * d[:, 1])
    return (dist, t) if return_t else dist


def _reduce_min(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Minimum of consecutive groups of ``values`` with the given sizes (all sizes >= 1)."""
    if len(counts) == 0:
        return np.empty(0)
    return np.minimum.reduceat(values, np.cumsum(counts) - counts)
