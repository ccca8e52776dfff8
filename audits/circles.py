"""Range-count queries over circles: how many trajectories pass within a circle (the answers of
:func:`audits.trajectory_utility.circle_query_re`; PrivTrace's query error).

A trajectory answers a circle when one of its points, or one of its segments (consecutive points), lies within the
radius of the centre: the distance from the centre to the segment is that of its closest point, the projection
clamped to the segment. Compiled with numba: a city's raw frame has 10^7 points, and numpy would hold several
arrays of that size per query batch (bench/SCALE_RESULTS.md); the loop instead skips every trajectory whose
bounding box misses the circle's square and stops at a trajectory's first hit.
"""

from __future__ import annotations

import math

import numba
import numpy as np


def circle_counts(xy: np.ndarray, codes: np.ndarray, centres: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Per circle (``centres`` (m, 2), ``radii`` (m,)): the number of trajectories with a point or a segment at
    distance <= radius from the centre. ``xy`` (n, 2) holds the points grouped by trajectory (``codes``, one
    contiguous run each) and in order within each, in metres."""
    xy = np.ascontiguousarray(xy, dtype=np.float64)
    bounds = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1], True]) if len(codes) else np.zeros(1, np.int64)
    starts = bounds[:-1]
    boxes = np.empty((len(starts), 4))
    if len(starts):
        boxes[:, 0], boxes[:, 1] = np.minimum.reduceat(xy[:, 0], starts), np.maximum.reduceat(xy[:, 0], starts)
        boxes[:, 2], boxes[:, 3] = np.minimum.reduceat(xy[:, 1], starts), np.maximum.reduceat(xy[:, 1], starts)
    return _counts(xy, bounds.astype(np.int64), boxes, np.ascontiguousarray(centres, dtype=np.float64),
                   np.ascontiguousarray(radii, dtype=np.float64))


@numba.njit(cache=True, nogil=True)
def _counts(xy, bounds, boxes, centres, radii):  # pragma: no cover - compiled
    out = np.zeros(len(centres))
    tiny = np.finfo(np.float64).tiny
    for q in range(len(centres)):
        cx, cy, r = centres[q, 0], centres[q, 1], radii[q]
        for k in range(len(bounds) - 1):
            if boxes[k, 0] > cx + r or boxes[k, 1] < cx - r or boxes[k, 2] > cy + r or boxes[k, 3] < cy - r:
                continue
            last = bounds[k + 1] - 1
            for j in range(bounds[k], last + 1):
                ax, ay = xy[j, 0], xy[j, 1]
                bx, by = (xy[j + 1, 0], xy[j + 1, 1]) if j < last else (ax, ay)  # the last point: a point
                if min(ax, bx) > cx + r or max(ax, bx) < cx - r or min(ay, by) > cy + r or max(ay, by) < cy - r:
                    continue
                abx, aby = bx - ax, by - ay
                s = min(max(((cx - ax) * abx + (cy - ay) * aby) / max(abx * abx + aby * aby, tiny), 0.0), 1.0)
                if math.hypot(ax + s * abx - cx, ay + s * aby - cy) <= r:
                    out[q] += 1
                    break
    return out
