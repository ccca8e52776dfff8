"""Synthetic road networks (a jittered, thinned street grid with arterials) and Brinkhoff-like trajectories
driven on any network (docs/design.md, (k-Ψ)-anonymity and A16)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import shapely
from pyproj import CRS
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import dijkstra, minimum_spanning_tree

from trajpub.errors import InputError, ParameterError
from trajpub.roads import RoadNetwork


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
