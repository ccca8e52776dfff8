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
adjacent components merge; those zones are found through per-component sets of adjacent zones (merged
small-into-large) and re-queued, so the heap always holds a lower bound of each zone's cost and the popped
zone whose stored cost equals its current cost is the true minimum.
"""

from __future__ import annotations

import hashlib
import heapq
from dataclasses import dataclass

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


def articulation_points(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Boolean mask of the cut vertices of an undirected simple graph (iterative DFS, low-link values)."""
    n = len(indptr) - 1
    ptr, nbr = indptr.tolist(), indices.tolist()
    disc = [-1] * n
    low = [0] * n
    parent = [-1] * n
    ap = [False] * n
    timer = 0
    for root in range(n):
        if disc[root] >= 0:
            continue
        disc[root] = low[root] = timer
        timer += 1
        children = 0
        stack = [[root, ptr[root]]]
        while stack:
            top = stack[-1]
            v, i = top
            if i < ptr[v + 1]:
                top[1] = i + 1
                w = nbr[i]
                if disc[w] < 0:
                    parent[w] = v
                    disc[w] = low[w] = timer
                    timer += 1
                    if v == root:
                        children += 1
                    stack.append([w, ptr[w]])
                elif w != parent[v] and disc[w] < low[v]:
                    low[v] = disc[w]
            else:
                stack.pop()
                if stack:
                    u = stack[-1][0]
                    low[u] = min(low[u], low[v])
                    if u != root and low[v] >= disc[u]:
                        ap[u] = True
        if children > 1:
            ap[root] = True
    return np.array(ap, dtype=bool)


def maximal_independent_set(indptr: np.ndarray, indices: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Greedy maximal independent set of the subgraph induced by ``allowed`` (mask): vertices in the order
    (degree within the subgraph, index); each is taken unless a neighbour was taken."""
    n = len(indptr) - 1
    row = np.repeat(np.arange(n), np.diff(indptr))
    inside = allowed[row] & allowed[indices]
    degree = np.bincount(row[inside], minlength=n)
    order = np.lexsort((np.arange(n), degree))
    ptr, nbr = indptr.tolist(), indices.tolist()
    ok = allowed.tolist()
    taken = [False] * n
    blocked = [False] * n
    for v in order.tolist():
        if not ok[v] or blocked[v]:
            continue
        taken[v] = True
        for w in nbr[ptr[v]:ptr[v + 1]]:
            blocked[w] = True
    return np.array(taken, dtype=bool)


def split_components(indptr: np.ndarray, indices: np.ndarray, removed: np.ndarray) -> np.ndarray:
    """Component label of each vertex of the graph minus ``removed`` (-1 for removed vertices)."""
    n = len(indptr) - 1
    row = np.repeat(np.arange(n), np.diff(indptr))
    keep = ~removed[row] & ~removed[indices]
    m = coo_matrix((np.ones(int(keep.sum()), np.int8), (row[keep], indices[keep])), shape=(n, n))
    labels = connected_components(m, directed=False)[1]
    return np.where(removed, -1, labels)


def place_mix_zones(network: RoadNetwork, n_zones: int) -> Placement:
    """UTMP placement of at most ``n_zones`` mix zones on the road vertices of ``network`` (module docstring)."""
    indptr, indices = node_graph(network)
    n = network.n_nodes
    ap = articulation_points(indptr, indices)
    mis = maximal_independent_set(indptr, indices, ~ap)
    is_zone = (~mis).tolist()
    n_candidates = int((~mis).sum())
    ptr, nbr = indptr.tolist(), indices.tolist()

    parent = list(range(n))
    size = [1] * n

    def find(v: int) -> int:
        root = v
        while parent[root] != root:
            root = parent[root]
        while parent[v] != root:
            parent[v], v = root, parent[v]
        return root

    # zones adjacent to each non-zone component (keyed by the component's root); every MIS vertex starts alone
    adjacent: dict[int, set[int]] = {}
    for v in range(n):
        if not is_zone[v]:
            adjacent[v] = {w for w in nbr[ptr[v]:ptr[v + 1]] if is_zone[w]}

    def roots_of(z: int) -> list[int]:
        return list({find(w) for w in nbr[ptr[z]:ptr[z + 1]] if not is_zone[w]})

    def cost(z: int) -> int:
        sizes = [size[r] for r in roots_of(z)]
        total = sum(sizes)
        return total + (total * total - sum(s * s for s in sizes)) // 2

    heap = [(cost(z), z) for z in range(n) if is_zone[z]]
    heapq.heapify(heap)
    remaining = len(heap)
    while remaining > n_zones and heap:
        c, z = heapq.heappop(heap)
        if not is_zone[z]:
            continue
        current = cost(z)
        if current != c:
            heapq.heappush(heap, (current, z))
            continue
        roots = roots_of(z)
        is_zone[z] = False
        remaining -= 1
        sets = [adjacent.pop(r) for r in roots]
        big = max(range(len(sets)), key=lambda i: len(sets[i])) if sets else -1
        # zones adjacent to two or more of the merged components: their cost may fall, so re-queue them
        seen: dict[int, int] = {}
        for i, s in enumerate(sets):
            if i != big:
                for w in s:
                    seen[w] = seen.get(w, 0) + 1
        falling = [w for w, cnt in seen.items() if cnt + (big >= 0 and w in sets[big]) >= 2]
        merged = sets[big] if sets else set()
        for i, s in enumerate(sets):
            if i != big:
                merged |= s
        merged.update(w for w in nbr[ptr[z]:ptr[z + 1]] if is_zone[w])
        merged.discard(z)
        new_size = 1 + sum(size[r] for r in roots)
        for r in roots:
            parent[r] = z
        size[z] = new_size
        adjacent[z] = merged
        for w in falling:
            if is_zone[w]:
                heapq.heappush(heap, (cost(w), w))

    zones = np.flatnonzero(np.array(is_zone, dtype=bool))
    labels = split_components(indptr, indices, np.array(is_zone, dtype=bool))
    counts = np.bincount(labels[labels >= 0]).astype(np.int64)
    associations = int((counts * (counts - 1) // 2).sum())
    return Placement(zones=zones, zone_xy=network.node_xy[zones].copy(), node_id=network.node_id[zones].copy(),
                     n_articulation=int(ap.sum()), n_candidates=n_candidates, associations=associations)
