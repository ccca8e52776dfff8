"""UTMP mix-zone placement on a road network (Liu, Kang, Wang, Zhang, INFOCOM 2012; survey §"models").

The placement reads the road network only, never a trajectory: the same network always gives the same zones.

1. The node graph: road vertices, one undirected link per pair of vertices joined by an edge (self-loops and
   parallel edges collapse).
2. Articulation points (cut vertices) by an iterative depth-first search (Tarjan/Hopcroft), roots and
   neighbours visited in node-index order.
3. The graph minus the articulation points splits into components; in each, a maximal independent set (MIS)
   is built greedily, vertices taken in the order (degree in the split graph, node index). Articulation
   points never enter the MIS.
4. Every vertex outside the MIS (articulation points included) starts as a mix zone. The non-zone vertices
   are then pairwise independent, so no two vertices are *associated* (reachable from each other without
   crossing a zone): the set is a vertex cover, the most protective start.
5. While more than K zones remain, the zone whose removal adds the fewest pairwise associations is turned back
   into an ordinary vertex (ties: the smaller node index). Removing zone z joins z and its distinct adjacent
   non-zone components of sizes s_1..s_m; the added associations are C(1+S, 2) − Σ C(s_i, 2) with S = Σ s_i.

Step 5 is exact greedy, not the paper's O(|V|(|V|+|E|)) recomputation: components are kept in a union-find,
costs in a lazy heap. A cost only grows when a component grows and shrinks only when two of the zone's
adjacent components merge; those zones are found by scanning the members of all but the largest of the joined
components (small into large) and re-queued, so the heap always holds a lower bound of each zone's cost and the
popped zone whose stored cost equals its current cost is the true minimum. The DFS, the MIS and step 5 are
compiled with numba (sequential graph loops; in pure Python they took 2.5 s on a 40,000-node grid, 0.2 s now).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numba
import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from trajpub.roads import RoadNetwork


@dataclass(frozen=True, eq=False)
class Placement:
    """Mix zones on a road network.

    zones: node indices of the network (sorted) that are mix zones; zone_xy: their coordinates (metres, the
    network's CRS), one row per zone; node_id: the network's node ids of the zones.
    n_articulation: articulation points found; n_candidates: zones before the reduction to K (vertices outside
    the MIS); associations: pairwise-associated vertex pairs left by the final zones (the UTMP objective).
    """

    zones: np.ndarray
    zone_xy: np.ndarray
    node_id: np.ndarray
    n_articulation: int
    n_candidates: int
    associations: int

    @property
    def digest(self) -> str:
        """A short fingerprint of the zone set (SHA-256 of the sorted zone node ids): equal digests, same zones."""
        return hashlib.sha256(np.sort(self.node_id).astype("<i8").tobytes()).hexdigest()[:16]

    def summary(self) -> dict:
        return {"zones_placed": len(self.zones), "articulation_points": self.n_articulation,
                "candidate_zones": self.n_candidates, "pairwise_associations": self.associations,
                "zone_digest": self.digest}


def node_graph(network: RoadNetwork) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(indptr, indices)`` of the simple undirected node graph, neighbours sorted."""
    n = network.n_nodes
    s, t = network.source_index, network.target_index
    keep = s != t
    a, b = np.r_[s[keep], t[keep]], np.r_[t[keep], s[keep]]
    m = coo_matrix((np.ones(len(a), np.int8), (a, b)), shape=(n, n)).tocsr()
    m.sum_duplicates()
    m.sort_indices()
    return m.indptr.astype(np.int64), m.indices.astype(np.int64)


@numba.njit(cache=True)
def _articulation(ptr: np.ndarray, nbr: np.ndarray) -> np.ndarray:
    n = len(ptr) - 1
    disc = np.full(n, -1, np.int64)
    low = np.zeros(n, np.int64)
    parent = np.full(n, -1, np.int64)
    ap = np.zeros(n, np.bool_)
    stack_v = np.empty(n, np.int64)  # the DFS path: vertex and its next neighbour position
    stack_i = np.empty(n, np.int64)
    timer = 0
    for root in range(n):
        if disc[root] >= 0:
            continue
        disc[root] = timer
        low[root] = timer
        timer += 1
        children = 0
        top = 0
        stack_v[0], stack_i[0] = root, ptr[root]
        while top >= 0:
            v, i = stack_v[top], stack_i[top]
            if i < ptr[v + 1]:
                stack_i[top] = i + 1
                w = nbr[i]
                if disc[w] < 0:
                    parent[w] = v
                    disc[w] = timer
                    low[w] = timer
                    timer += 1
                    if v == root:
                        children += 1
                    top += 1
                    stack_v[top], stack_i[top] = w, ptr[w]
                elif w != parent[v] and disc[w] < low[v]:
                    low[v] = disc[w]
            else:
                top -= 1
                if top >= 0:
                    u = stack_v[top]
                    low[u] = min(low[u], low[v])
                    if u != root and low[v] >= disc[u]:
                        ap[u] = True
        if children > 1:
            ap[root] = True
    return ap


def articulation_points(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Boolean mask of the cut vertices of an undirected simple graph (iterative DFS, low-link values)."""
    return _articulation(np.asarray(indptr, np.int64), np.asarray(indices, np.int64))


@numba.njit(cache=True)
def _greedy_mis(ptr: np.ndarray, nbr: np.ndarray, allowed: np.ndarray, order: np.ndarray) -> np.ndarray:
    n = len(ptr) - 1
    taken = np.zeros(n, np.bool_)
    blocked = np.zeros(n, np.bool_)
    for v in order:
        if not allowed[v] or blocked[v]:
            continue
        taken[v] = True
        for w in nbr[ptr[v]:ptr[v + 1]]:
            blocked[w] = True
    return taken


def maximal_independent_set(indptr: np.ndarray, indices: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Greedy maximal independent set of the subgraph induced by ``allowed`` (mask): vertices in the order
    (degree within the subgraph, index); each is taken unless a neighbour was taken."""
    n = len(indptr) - 1
    row = np.repeat(np.arange(n), np.diff(indptr))
    inside = allowed[row] & allowed[indices]
    degree = np.bincount(row[inside], minlength=n)
    order = np.lexsort((np.arange(n), degree))
    return _greedy_mis(np.asarray(indptr, np.int64), np.asarray(indices, np.int64), np.asarray(allowed, np.bool_),
                       order.astype(np.int64))


def split_components(indptr: np.ndarray, indices: np.ndarray, removed: np.ndarray) -> np.ndarray:
    """Component label of each vertex of the graph minus ``removed`` (-1 for removed vertices)."""
    n = len(indptr) - 1
    row = np.repeat(np.arange(n), np.diff(indptr))
    keep = ~removed[row] & ~removed[indices]
    m = coo_matrix((np.ones(int(keep.sum()), np.int8), (row[keep], indices[keep])), shape=(n, n))
    labels = connected_components(m, directed=False)[1]
    return np.where(removed, -1, labels)


@numba.njit(cache=True)
def _find(parent: np.ndarray, v: int) -> int:
    root = v
    while parent[root] != root:
        root = parent[root]
    while parent[v] != root:
        parent[v], v = root, parent[v]
    return root


@numba.njit(cache=True)
def _roots(ptr, nbr, is_zone, parent, z, out) -> int:
    """The distinct components (roots) adjacent to zone ``z``, written to ``out``; returns how many."""
    m = 0
    for w in nbr[ptr[z]:ptr[z + 1]]:
        if not is_zone[w]:
            r = _find(parent, w)
            seen = False
            for q in range(m):
                seen = seen or out[q] == r
            if not seen:
                out[m] = r
                m += 1
    return m


@numba.njit(cache=True)
def _cost(ptr, nbr, is_zone, parent, size, z, buf) -> int:
    """Associations added by turning zone ``z`` back into an ordinary vertex: C(1+S, 2) - sum C(s_i, 2)."""
    m = _roots(ptr, nbr, is_zone, parent, z, buf)
    total, squares = 0, 0
    for q in range(m):
        total += size[buf[q]]
        squares += size[buf[q]] * size[buf[q]]
    return total + (total * total - squares) // 2


@numba.njit(cache=True)
def _before(c1: int, v1: int, c2: int, v2: int) -> bool:
    """The order of the heap's entries (cost, node): by cost, ties to the smaller node index."""
    return c1 < c2 or (c1 == c2 and v1 < v2)


@numba.njit(cache=True)
def _sift_down(cost: np.ndarray, node: np.ndarray, size: int, i: int) -> None:
    """Restore the order of the binary min-heap ``(cost, node)`` (its first ``size`` entries) below position
    ``i``."""
    c, v = cost[i], node[i]
    child = 2 * i + 1
    while child < size:
        if child + 1 < size and _before(cost[child + 1], node[child + 1], cost[child], node[child]):
            child += 1
        if not _before(cost[child], node[child], c, v):
            break
        cost[i], node[i] = cost[child], node[child]
        i, child = child, 2 * child + 1
    cost[i], node[i] = c, v


@numba.njit(cache=True)
def _sift_up(cost: np.ndarray, node: np.ndarray, i: int) -> None:
    """Restore the heap order above position ``i`` (a new entry)."""
    c, v = cost[i], node[i]
    while i > 0 and _before(c, v, cost[(i - 1) // 2], node[(i - 1) // 2]):
        cost[i], node[i] = cost[(i - 1) // 2], node[(i - 1) // 2]
        i = (i - 1) // 2
    cost[i], node[i] = c, v


@numba.njit(cache=True)
def _heapify(cost: np.ndarray, node: np.ndarray, size: int) -> None:
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(cost, node, size, i)


@numba.njit(cache=True)
def _reduce_zones(ptr: np.ndarray, nbr: np.ndarray, start: np.ndarray, n_zones: int) -> np.ndarray:
    """Step 5 (module docstring): the greedy removal of zones, from the zones ``start`` down to ``n_zones``.

    Components are a union-find (``parent``, ``size``) with member lists (``nxt``, ``tail``; a list starts at
    its root), so that when zone z joins components, the zones adjacent to two of them (the only ones whose cost
    falls) are found by scanning the members of all but the largest joined component (small into large)."""
    n = len(ptr) - 1
    is_zone = start.copy()
    parent = np.arange(n)
    size = np.ones(n, np.int64)
    nxt = np.full(n, -1, np.int64)
    tail = np.arange(n)
    max_degree = 1
    for v in range(n):
        max_degree = max(max_degree, ptr[v + 1] - ptr[v])
    buf = np.empty(max_degree, np.int64)
    roots = np.empty(max_degree, np.int64)
    mark = np.full(n, -1, np.int64)  # the step at which a zone was last examined
    first = np.flatnonzero(is_zone)
    n_heap = len(first)  # the lazy heap of (cost, zone): its entries are lower bounds of the zones' costs
    heap_cost = np.empty(2 * n_heap + 1, np.int64)
    heap_node = np.empty(2 * n_heap + 1, np.int64)
    for q in range(n_heap):
        heap_node[q] = first[q]
        heap_cost[q] = _cost(ptr, nbr, is_zone, parent, size, first[q], buf)
    _heapify(heap_cost, heap_node, n_heap)
    remaining = n_heap
    step = 0
    falling = np.empty(n, np.int64)
    while remaining > n_zones and n_heap > 0:
        z = heap_node[0]
        if not is_zone[z]:
            n_heap -= 1
            heap_cost[0], heap_node[0] = heap_cost[n_heap], heap_node[n_heap]
            _sift_down(heap_cost, heap_node, n_heap, 0)
            continue
        current = _cost(ptr, nbr, is_zone, parent, size, z, buf)
        if current != heap_cost[0]:  # a stale lower bound: re-queue the zone with its current cost
            heap_cost[0] = current
            _sift_down(heap_cost, heap_node, n_heap, 0)
            continue
        n_heap -= 1
        heap_cost[0], heap_node[0] = heap_cost[n_heap], heap_node[n_heap]
        _sift_down(heap_cost, heap_node, n_heap, 0)
        m = _roots(ptr, nbr, is_zone, parent, z, roots)
        is_zone[z] = False
        remaining -= 1
        step += 1
        big = 0
        for q in range(1, m):
            if size[roots[q]] > size[roots[big]]:
                big = q
        n_falling = 0
        for q in range(m):
            v = roots[q] if q != big else -1
            while v >= 0:
                for w in nbr[ptr[v]:ptr[v + 1]]:
                    if is_zone[w] and mark[w] != step:
                        mark[w] = step
                        k = _roots(ptr, nbr, is_zone, parent, w, buf)
                        joined = 0
                        for a in range(k):
                            for p in range(m):
                                joined += buf[a] == roots[p]
                        if joined >= 2:
                            falling[n_falling] = w
                            n_falling += 1
                v = nxt[v]
        last = z
        for q in range(m):
            r = roots[q]
            parent[r] = z
            size[z] += size[r]
            nxt[last] = r
            last = tail[r]
        tail[z] = last
        if n_heap + n_falling > len(heap_cost):
            heap_cost = np.concatenate((heap_cost, np.empty(len(heap_cost) + n_falling, np.int64)))
            heap_node = np.concatenate((heap_node, np.empty(len(heap_node) + n_falling, np.int64)))
        for f in range(n_falling):
            heap_cost[n_heap] = _cost(ptr, nbr, is_zone, parent, size, falling[f], buf)
            heap_node[n_heap] = falling[f]
            _sift_up(heap_cost, heap_node, n_heap)
            n_heap += 1
    return is_zone


def place_mix_zones(network: RoadNetwork, n_zones: int) -> Placement:
    """UTMP placement of at most ``n_zones`` mix zones on the road vertices of ``network`` (module docstring)."""
    indptr, indices = node_graph(network)
    ap = articulation_points(indptr, indices)
    mis = maximal_independent_set(indptr, indices, ~ap)
    is_zone = _reduce_zones(indptr, indices, ~mis, n_zones)
    zones = np.flatnonzero(is_zone)
    labels = split_components(indptr, indices, is_zone)
    counts = np.bincount(labels[labels >= 0]).astype(np.int64)
    associations = int((counts * (counts - 1) // 2).sum())
    return Placement(zones=zones, zone_xy=network.node_xy[zones].copy(), node_id=network.node_id[zones].copy(),
                     n_articulation=int(ap.sum()), n_candidates=int((~mis).sum()), associations=associations)
