"""GLOVE's greedy hierarchical merging with locality pruning, and the generalised release.

Pipeline: :func:`build_fingerprints` (points) → :func:`candidate_pairs` (the pruned candidate graph) →
:func:`~mechanisms.glove.stretch.pair_costs` (the expensive part; the adapter runs it in blocks on Dask) →
:func:`greedy_merge` (sequential, on one machine) → :func:`release` (one generalised record per member).
:func:`anonymize` chains them for an in-memory frame.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from mechanisms.glove.params import GloveParams
from mechanisms.glove.stretch import (
    COLUMNS,
    LAT0,
    LAT1,
    LON0,
    LON1,
    T0,
    T1,
    X0,
    X1,
    Y0,
    Y1,
    costs_to,
    locality_key,
    merge_cost,
    merge_samples,
    pair_costs,
    point_samples,
)


@dataclass(frozen=True)
class Fingerprints:
    """The fingerprints to anonymise: ``samples[i]`` (generalised samples array) belongs to object
    ``object_ids[i]`` and was built from the prepared trajectories ``source_traj_ids[i]``."""

    samples: list[np.ndarray]
    object_ids: np.ndarray
    source_traj_ids: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.samples)


@dataclass
class Group:
    """A merged group: its generalised fingerprint, the fingerprints it stands for and their objects."""

    samples: np.ndarray
    members: list[int]
    objects: frozenset

    @property
    def size(self) -> int:
        return len(self.objects)


@dataclass
class MergeResult:
    """Groups of >= k objects, the fingerprints left out, and diagnostics of the pruned search."""

    groups: list[Group]
    suppressed: list[int]
    stats: dict = field(default_factory=dict)


def _seconds(t: pd.Series) -> np.ndarray:
    t = pd.to_datetime(t, utc=True)
    return (t - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()


def build_fingerprints(points: pd.DataFrame, params: GloveParams) -> Fingerprints:
    """One fingerprint per trajectory (``unit="trajectory"``) or per object (``unit="object"``) from points with
    ``object_id, traj_id, t, lon, lat, x, y``; samples in time order. Ordered by (object_id, first traj_id)."""
    key = "traj_id" if params.unit == "trajectory" else "object_id"
    if len(points) == 0:
        return Fingerprints([], np.empty(0, dtype=object), [])
    df = points.sort_values(["object_id", key, "t", "traj_id"], kind="stable")
    samples = point_samples(df["x"].to_numpy(), df["y"].to_numpy(), _seconds(df["t"]), df["lon"].to_numpy(),
                            df["lat"].to_numpy())
    codes, _ = pd.factorize(df[key], sort=False)
    bounds = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1], True])
    objs = df["object_id"].astype(str).to_numpy()
    trajs = df["traj_id"].to_numpy()
    fps, owners, sources = [], [], []
    for a, b in itertools.pairwise(bounds):
        fps.append(samples[a:b])
        owners.append(objs[a])
        sources.append(np.unique(trajs[a:b]))
    return Fingerprints(fps, np.asarray(owners, dtype=object), sources)


def locality_keys(fps: Fingerprints, params: GloveParams) -> np.ndarray:
    return np.vstack([locality_key(s, params) for s in fps.samples]) if len(fps) else np.empty((0, 3))


def candidate_pairs(keys: np.ndarray, object_ids: np.ndarray, candidates: int | None) -> np.ndarray:
    """The pruned candidate graph: pairs ``(i, j)``, i < j, of fingerprints of different objects where j is among
    the ``candidates`` nearest of i by locality key (L1), or i among j's. ``None``: every pair (no pruning)."""
    n = len(keys)
    codes = pd.factorize(pd.Series(object_ids))[0]
    if candidates is None or candidates >= n - 1:
        i, j = np.triu_indices(n, 1)
        keep = codes[i] != codes[j]
        return np.column_stack([i[keep], j[keep]]).astype(np.int64)
    tree = cKDTree(keys)
    rows, cols = [], []
    todo = np.arange(n)
    q = min(n, 2 * candidates + 1)
    while len(todo):
        _, nb = tree.query(keys[todo], k=q, p=1)
        nb = np.atleast_2d(nb)
        ok = (nb < n) & (codes[np.minimum(nb, n - 1)] != codes[todo][:, None])
        rank = np.cumsum(ok, axis=1)
        take = ok & (rank <= candidates)
        r, c = np.nonzero(take)
        rows.append(todo[r])
        cols.append(nb[r, c])
        short = rank[:, -1] < candidates
        if q >= n:
            break
        todo = todo[short]
        q = min(n, 4 * q)
    i, j = np.concatenate(rows), np.concatenate(cols)
    pairs = np.unique(np.column_stack([np.minimum(i, j), np.maximum(i, j)]), axis=0)
    return pairs.astype(np.int64)


def greedy_merge(fps: Fingerprints, params: GloveParams, pairs: np.ndarray | None = None,
                 costs: np.ndarray | None = None,
                 refine: Callable[[np.ndarray], np.ndarray] | None = None) -> MergeResult:
    """GLOVE's merging (paper Sec. 4; survey §2.1): repeatedly merge the pair of groups of least stretch effort;
    a merged group with >= k objects is finished, one still below k gets its costs to its candidates computed and
    goes back into the pool. Groups never contain two fingerprints of one object.

    Locality pruning: costs exist only along the candidate graph (``pairs``, ``costs``: computed here when not
    given). A new group's candidates are the active groups (still < k, sharing no object) of the fingerprints
    nearest to its locality key, up to ``params.candidates`` of them; when a group loses all its candidates the
    search is widened (4x more fingerprints each time, up to all of them). So each step merges the cheapest
    *computed* pair, not necessarily the globally cheapest: with ``candidates=None`` this is exact greedy GLOVE.
    Groups left below k at the end are merged into the finished group of least cost that shares no object with
    them (``on_leftover="merge_nearest"``) or suppressed.

    ``refine`` (optional) transforms every merged fingerprint's samples right after the merge, before any cost to
    it is computed; it must only grow samples (KLT grows them to l-diverse, t-close regions).
    """
    n = len(fps)
    keys = locality_keys(fps, params)
    if pairs is None:
        pairs = candidate_pairs(keys, fps.object_ids, params.candidates)
    if costs is None:
        costs = pair_costs(fps.samples, np.ones(n, dtype=np.int64), pairs, params)
    stats = {"fingerprints": n, "initial_pairs": len(pairs), "merge_pairs_costed": 0, "widened_searches": 0,
             "exhaustive_searches": 0, "leftover_groups": 0, "leftovers_merged": 0}
    groups: dict[int, Group] = {i: Group(fps.samples[i], [i], frozenset([fps.object_ids[i]])) for i in range(n)}
    fp_group = np.arange(n)
    active = set(range(n))
    nbrs: dict[int, set[int]] = {i: set() for i in range(n)}
    heap = [(float(c), int(i), int(j)) for (i, j), c in zip(pairs, costs, strict=True)]
    for _, i, j in heap:
        nbrs[i].add(j)
        nbrs[j].add(i)
    heapq.heapify(heap)
    tree = cKDTree(keys) if n else None
    finished: list[int] = []
    next_id = n

    def partners(g: int, pool: set[int]) -> list[int]:
        grp = groups[g]
        if params.candidates is None:
            return sorted(p for p in pool if p != g and not (groups[p].objects & grp.objects))
        key = locality_key(grp.samples, params)
        q = min(n, 2 * params.candidates + len(grp.members))
        while True:
            _, nb = tree.query(key, k=q, p=1)
            found: list[int] = []
            for f in np.atleast_1d(nb):
                p = int(fp_group[f])
                if p != g and p in pool and p not in found and not (groups[p].objects & grp.objects):
                    found.append(p)
                    if len(found) >= params.candidates:
                        return found
            if q >= n:
                stats["exhaustive_searches"] += 1
                return found
            stats["widened_searches"] += 1
            q = min(n, 4 * q)

    def connect(g: int) -> None:
        found = partners(g, active)
        grp = groups[g]
        costs = costs_to(grp.samples, len(grp.members), [(groups[p].samples, len(groups[p].members)) for p in found],
                         params)
        stats["merge_pairs_costed"] += len(found)
        for p, c in zip(found, costs.tolist(), strict=True):
            heapq.heappush(heap, (c, min(g, p), max(g, p)))
            nbrs[g].add(p)
            nbrs[p].add(g)

    def retire(g: int, orphans: set[int]) -> None:
        active.discard(g)
        for p in nbrs.pop(g, set()):
            if p in nbrs:
                nbrs[p].discard(g)
                if not nbrs[p] and p in active:
                    orphans.add(p)

    for g in range(n):  # fingerprints without any candidate (e.g. all near ones are the same object's)
        if not nbrs[g]:
            connect(g)
    while heap:
        _, a, b = heapq.heappop(heap)
        if a not in active or b not in active:
            continue
        ga, gb = groups.pop(a), groups.pop(b)
        merged = Group(merge_samples(ga.samples, gb.samples, len(ga.members), len(gb.members), params),
                       ga.members + gb.members, ga.objects | gb.objects)
        if refine is not None:
            merged.samples = refine(merged.samples)
        g = next_id
        next_id += 1
        groups[g] = merged
        fp_group[merged.members] = g
        orphans: set[int] = set()
        retire(a, orphans)
        retire(b, orphans)
        nbrs[g] = set()
        if merged.size >= params.k:
            finished.append(g)
        else:
            active.add(g)
            connect(g)
        for p in sorted(orphans):
            if p in active and not nbrs[p]:
                connect(p)

    leftovers = sorted(active)
    stats["leftover_groups"] = len(leftovers)
    suppressed: list[int] = []
    done = set(finished)
    for g in leftovers:
        grp = groups[g]
        targets = partners(g, done) if params.on_leftover == "merge_nearest" and done else []
        if not targets:
            suppressed.extend(grp.members)
            continue
        tcost = [merge_cost(grp.samples, groups[p].samples, len(grp.members), len(groups[p].members), params)
                 for p in targets]
        stats["merge_pairs_costed"] += len(targets)
        p = targets[int(np.argmin(tcost))]
        other = groups[p]
        groups[p] = Group(merge_samples(other.samples, grp.samples, len(other.members), len(grp.members), params),
                          other.members + grp.members, other.objects | grp.objects)
        if refine is not None:
            groups[p].samples = refine(groups[p].samples)
        fp_group[grp.members] = p
        stats["leftovers_merged"] += 1
    result = [groups[g] for g in finished]
    stats["groups"] = len(result)
    return MergeResult(result, sorted(suppressed), stats)


RELEASE_COLUMNS = ["set_id", "traj_id", "seq", "object_id", "t", "t_end", "lon", "lat", "lon_min", "lat_min",
                   "lon_max", "lat_max", "x", "y"]


def release(fps: Fingerprints, result: MergeResult, rng: np.random.Generator,
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The generalised release: every member fingerprint of a group is published as the group's generalised
    fingerprint (so the k or more records of a group are identical), with its owner's ``object_id``.

    Returns ``(points, sources)``: ``points`` has :data:`RELEASE_COLUMNS` (``lon, lat`` the centre of the degree
    box, ``t``/``t_end`` the span, ``x, y`` the centre of the metric box); ``sources`` (private) maps each released
    ``traj_id`` to its ``object_id`` and ``source_traj_id`` (one row per source trajectory). ``set_id`` and
    ``traj_id`` are random permutations, so they reveal nothing of the input order.
    """
    groups = result.groups
    n_records = sum(len(g.members) for g in groups)
    set_ids = rng.permutation(len(groups)).astype(np.int64)
    traj_ids = rng.permutation(n_records).astype(np.int64) + 1
    members = [m for g in groups for m in g.members]
    lengths = np.array([len(g.samples) for g in groups for _ in g.members], dtype=np.int64)
    s = (np.vstack([g.samples for g in groups for _ in g.members]) if members
         else np.empty((0, len(COLUMNS))))
    owner = fps.object_ids[np.asarray(members, dtype=np.int64)] if members else np.empty(0, dtype=object)
    starts = np.cumsum(np.r_[0, lengths])[:-1].astype(np.int64)
    points = pd.DataFrame({
        "set_id": np.repeat(np.repeat(set_ids, [len(g.members) for g in groups]), lengths),
        "traj_id": np.repeat(traj_ids, lengths),
        "seq": np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(starts, lengths),
        "object_id": np.repeat(owner, lengths).astype(str),
        "t": s[:, T0], "t_end": s[:, T1],
        "lon": (s[:, LON0] + s[:, LON1]) / 2, "lat": (s[:, LAT0] + s[:, LAT1]) / 2,
        "lon_min": s[:, LON0], "lat_min": s[:, LAT0], "lon_max": s[:, LON1], "lat_max": s[:, LAT1],
        "x": (s[:, X0] + s[:, X1]) / 2, "y": (s[:, Y0] + s[:, Y1]) / 2})
    n_src = np.array([len(fps.source_traj_ids[m]) for m in members], dtype=np.int64)
    sources = pd.DataFrame({"traj_id": np.repeat(traj_ids, n_src), "object_id": np.repeat(owner, n_src).astype(str),
                            "source_traj_id": (np.concatenate([fps.source_traj_ids[m] for m in members])
                                               if members else np.empty(0, dtype=np.int64))})
    for c, outward in (("t", np.floor), ("t_end", np.ceil)):  # whole seconds, rounded outwards: spans only grow
        points[c] = pd.to_datetime(outward(points[c].astype(float)), unit="s", utc=True)
    points = points.sort_values(["traj_id", "seq"], kind="stable").reset_index(drop=True)[RELEASE_COLUMNS]
    return points, sources


def summary(fps: Fingerprints, result: MergeResult, points: pd.DataFrame) -> dict:
    """JSON-safe counts and diagnostics of a run."""
    sizes = [g.size for g in result.groups]
    area = ((points["lon_max"] - points["lon_min"]) * (points["lat_max"] - points["lat_min"])) if len(points) else []
    span = (points["t_end"] - points["t"]).dt.total_seconds() if len(points) else pd.Series(dtype=float)
    return {
        "input_fingerprints": len(fps),
        "input_trajectories": int(sum(len(s) for s in fps.source_traj_ids)),
        "input_objects": len(set(fps.object_ids)),
        "published_groups": len(result.groups),
        "group_size_min": int(min(sizes)) if sizes else 0,
        "group_size_max": int(max(sizes)) if sizes else 0,
        "released_records": int(points["traj_id"].nunique()) if len(points) else 0,
        "released_points": len(points),
        "suppressed_fingerprints": len(result.suppressed),
        "median_region_area_deg2": float(np.median(area)) if len(points) else None,
        "median_time_span_s": float(np.median(span)) if len(points) else None,
        "search": {k: int(v) for k, v in result.stats.items()},
    }


def anonymize(points: pd.DataFrame, params: GloveParams, rng: np.random.Generator
              ) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """GLOVE on an in-memory frame (``object_id, traj_id, t, lon, lat, x, y``): ``(points, sources, summary)``."""
    fps = build_fingerprints(points, params)
    result = greedy_merge(fps, params)
    out, sources = release(fps, result, rng)
    return out, sources, summary(fps, result, out)
