"""Exact fixed-radius neighbour search between two point sets with owners (k-d tree, in blocks), for the
metrics that ask whether a released point reproduces a raw one (:mod:`audits.point_utility`) and the attacks
that list every candidate within a radius."""

from __future__ import annotations

from itertools import chain

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

_NEIGHBOUR_QUERY_BLOCK = 1_000_000  # points per block of :func:`has_neighbour`'s k-d tree queries (~50 MB)


def has_neighbour(xy: np.ndarray, t: np.ndarray, owner: np.ndarray, other_xy: np.ndarray, other_t: np.ndarray,
                  other_owner: np.ndarray, radius_m: float, radius_s: float | None) -> np.ndarray:
    """For each point: is there a point of ``other`` with the same owner within ``radius_m`` (and ``radius_s``)?

    Exact matches (both radii 0) are found by a join; otherwise by a k-d tree over (x, y, scaled t, owner) with the
    Chebyshev metric (a box), refined by the Euclidean distance in the plane. Owners are kept apart by an offset
    larger than any distance in the data.
    """
    timed = radius_s is not None
    if radius_m == 0 and (not timed or radius_s == 0):
        keys = ["x", "y", "owner", *(["t"] if timed else [])]
        left = pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1], "owner": owner, "t": t}, columns=["x", "y", "owner", "t"])
        right = pd.DataFrame({"x": other_xy[:, 0], "y": other_xy[:, 1], "owner": other_owner, "t": other_t},
                             columns=["x", "y", "owner", "t"])[keys].drop_duplicates()
        right["hit"] = True
        return left[keys].merge(right, on=keys, how="left")["hit"].fillna(False).to_numpy(dtype=bool)
    box = max(radius_m, 1e-6)  # a zero radius (equal positions, or equal times) as a micrometre / microsecond
    scale = box / max(radius_s, 1e-6) if timed else 0.0  # seconds -> metres, so the box is radius_s wide in time
    sides = [side for side in ((xy, t), (other_xy, other_t)) if len(side[0])]  # no copy of a city's points
    t0 = min(float(tt.min()) for _, tt in sides) if timed else 0.0
    t1 = max(float(tt.max()) for _, tt in sides)
    reach = max(max(-float(p.min()), float(p.max())) for p, _ in sides)
    offset = 4 * (reach + box) + 4 * scale * (t1 - t0) + 1.0

    def embed(p: np.ndarray, tt: np.ndarray, o: np.ndarray) -> np.ndarray:
        return np.column_stack([p, (tt - t0) * scale, o * offset])

    tree = cKDTree(embed(other_xy, other_t, other_owner))
    bound = box * (1 + 1e-9)

    def near(query: np.ndarray, candidate: np.ndarray) -> np.ndarray:
        ok = np.hypot(other_xy[candidate, 0] - xy[query, 0], other_xy[candidate, 1] - xy[query, 1]) <= radius_m
        if timed:
            ok &= np.abs(other_t[candidate] - t[query]) <= radius_s
        return ok

    # The nearest point in the box decides almost every point with constant memory; only points whose nearest
    # box neighbour is outside the disc (a box corner) have their whole box listed, so the answer stays exact.
    # The points are queried in blocks, so that the embedded queries of a city (10^7 points) are never all held.
    found = np.zeros(len(xy), dtype=bool)
    for first in range(0, len(xy), _NEIGHBOUR_QUERY_BLOCK):
        block = np.arange(first, min(first + _NEIGHBOUR_QUERY_BLOCK, len(xy)))
        queries = embed(xy[block], t[block], owner[block])
        dist, nearest = tree.query(queries, k=1, p=np.inf, distance_upper_bound=bound)
        in_box = np.flatnonzero(np.isfinite(dist))
        found[block[in_box]] = near(block[in_box], nearest[in_box])
        undecided = in_box[~found[block[in_box]]]
        if len(undecided):
            query, candidate = flatten_hits(tree.query_ball_point(queries[undecided], r=bound, p=np.inf,
                                                                  return_sorted=False))
            hit = near(block[undecided[query]], candidate)
            found[block[undecided]] = np.bincount(query[hit], minlength=len(undecided)) > 0
    return found


def flatten_hits(hits: np.ndarray | list) -> tuple[np.ndarray, np.ndarray]:
    """The lists of ``cKDTree.query_ball_point`` as two aligned arrays: query index, hit index."""
    counts = np.fromiter((len(h) for h in hits), dtype=np.int64, count=len(hits))
    flat = np.fromiter(chain.from_iterable(hits), dtype=np.int64, count=int(counts.sum()))
    return np.repeat(np.arange(len(hits)), counts), flat
