"""W4M's space translation by spatio-temporal editing (Abul, Bonchi, Nanni 2010 §6; the survey: "minimum space
translation via spatiotemporal editing pushes all members inside a cylinder of radius δ/2 around the cluster
centre").

Per cluster, with the pivot's timestamps as the common time grid:

1. Align: each member is aligned with the pivot by EDR (:func:`mechanisms.w4m.edr.alignment`). A pivot point
   matched with a member point takes that point (the member's own fix, re-timed to the pivot's timestamp,
   which differs by at most ``time_tolerance_s``). Between two matches, an optimal alignment substitutes
   pairs arbitrarily (any monotone pairing of min(a, b) of the gap's points costs the same), so the pairs are
   chosen by time here (:func:`time_pairs`): a pivot point takes the member's time-nearest unused fix of the
   gap if it is no more than ``time_tolerance_s`` away (an edit of the fix's position: step 3 moves it). Any
   other pivot point gets an INSERTED point: the member's own position linearly interpolated at the pivot's
   timestamp (its first or last fix outside its time span). A member fix not used is DELETED.
2. Centre: the pivot's point (``centre="pivot"``) or the mean of the k aligned positions (``"mean"``).
3. Translate: every aligned position farther than δ/2 from the centre moves along the straight line to the
   centre onto the circle of radius δ/2 (the least displacement that puts it in the disc); a position already
   inside stays where it is ("two spatially matched points would be reserved", survey §5.2).

So every member is published at exactly the pivot's timestamps, at most δ/2 from the centre at each: any two
members of a set are within δ of each other at every published timestamp.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.w4m.clustering import Clustering
from mechanisms.w4m.edr import alignment
from mechanisms.w4m.params import W4MParams
from mechanisms.w4m.trajectories import Trajectories

#: ``origin`` codes of the translated points.
KEPT, MOVED, INSERTED = 0, 1, 2

COLUMNS = ["cluster", "member", "object_id", "source_traj_id", "seq", "t", "x", "y", "origin", "shift_m"]


def translate_cluster(traj: Trajectories, members: np.ndarray, params: W4MParams) -> tuple[pd.DataFrame, int]:
    """Edit and translate one cluster; ``members[0]`` is its pivot. Returns the published points (columns
    :data:`COLUMNS` without ``cluster``; ``t`` in epoch seconds; ``origin`` :data:`KEPT` / :data:`MOVED` /
    :data:`INSERTED`; ``shift_m`` the translation distance) and the number of deleted member points."""
    pivot = traj.points(int(members[0]))
    tp = pivot[0]
    n_p, k = len(tp), len(members)
    qx = np.empty((k, n_p))
    qy = np.empty((k, n_p))
    own = np.zeros((k, n_p), dtype=bool)
    deleted = 0
    for r, m in enumerate(members):
        tm, xm, ym = traj.points(int(m))
        if r == 0:
            qx[0], qy[0], own[0] = xm, ym, True
            continue
        ia, jb = alignment(pivot, (tm, xm, ym), params.match_m, params.time_tolerance_s)
        ia, jb = time_pairs(tp, tm, ia, jb, params.time_tolerance_s)
        qx[r] = np.interp(tp, tm, xm)
        qy[r] = np.interp(tp, tm, ym)
        qx[r, ia] = xm[jb]
        qy[r, ia] = ym[jb]
        own[r, ia] = True
        deleted += len(tm) - len(jb)
    if params.centre == "pivot":
        cx, cy = qx[0], qy[0]
    else:
        cx, cy = qx.mean(axis=0), qy.mean(axis=0)
    vx, vy = qx - cx, qy - cy
    dist = np.hypot(vx, vy)
    r = params.radius_m
    outside = dist > r
    scale = np.where(outside, r / np.where(outside, dist, 1.0), 1.0)
    x, y = cx + vx * scale, cy + vy * scale
    origin = np.where(own, np.where(outside, MOVED, KEPT), INSERTED).astype(np.int8)
    frame = pd.DataFrame({
        "member": np.repeat(np.arange(k, dtype=np.int64), n_p),
        "object_id": np.repeat(traj.object_id[members], n_p),
        "source_traj_id": np.repeat(traj.traj_id[members], n_p),
        "seq": np.tile(np.arange(n_p, dtype=np.int64), k),
        "t": np.tile(tp, k),
        "x": x.ravel(), "y": y.ravel(), "origin": origin.ravel(),
        "shift_m": np.where(outside, dist - r, 0.0).ravel(),
    })
    return frame, deleted


def time_pairs(tp: np.ndarray, tm: np.ndarray, ia: np.ndarray, jb: np.ndarray,
               time_tolerance_s: float) -> tuple[np.ndarray, np.ndarray]:
    """The matched pairs ``(ia, jb)`` of pivot times ``tp`` and member times ``tm``, completed between matches:
    in order, each unmatched pivot point takes the time-nearest member fix after the last one used and before
    the next match, if it is within ``time_tolerance_s``. Returns all pairs, increasing in both indices."""
    out_i, out_j = [], []
    last, k = -1, 0
    for i in range(len(tp)):
        if k < len(ia) and ia[k] == i:
            out_i.append(i)
            out_j.append(int(jb[k]))
            last, k = int(jb[k]), k + 1
            continue
        lo, hi = last + 1, (int(jb[k]) if k < len(ia) else len(tm))
        if lo >= hi:
            continue
        j = lo + int(np.searchsorted(tm[lo:hi], tp[i]))
        best = min((c for c in (j - 1, j) if lo <= c < hi), key=lambda c: abs(tm[c] - tp[i]))
        if abs(tm[best] - tp[i]) <= time_tolerance_s:
            out_i.append(i)
            out_j.append(best)
            last = best
    return np.asarray(out_i, dtype=np.int64), np.asarray(out_j, dtype=np.int64)


def cluster_members(clustering: Clustering, clusters: np.ndarray | None = None) -> list[np.ndarray]:
    """For each cluster (all, or those in ``clusters``), its members with the pivot first, the others in
    index order."""
    ids = np.arange(clustering.n_clusters) if clusters is None else np.asarray(clusters, dtype=np.int64)
    out = []
    for c in ids:
        p = clustering.pivots[c]
        others = np.flatnonzero(clustering.labels == c)
        out.append(np.r_[p, others[others != p]].astype(np.int64))
    return out


def translate_clusters(traj: Trajectories, clustering: Clustering, params: W4MParams,
                       clusters: np.ndarray | None = None) -> tuple[pd.DataFrame, int]:
    """:func:`translate_cluster` for every cluster (or those in ``clusters``); the ``cluster`` column is the
    cluster's index. Returns the points and the number of deleted member points."""
    ids = np.arange(clustering.n_clusters) if clusters is None else np.asarray(clusters, dtype=np.int64)
    frames, deleted = [], 0
    for c, members in zip(ids, cluster_members(clustering, ids), strict=True):
        f, d = translate_cluster(traj, members, params)
        frames.append(f.assign(cluster=int(c)))
        deleted += d
    if not frames:
        dtypes = {"cluster": np.int64, "member": np.int64, "object_id": object, "source_traj_id": np.int64,
                  "seq": np.int64, "t": np.float64, "x": np.float64, "y": np.float64, "origin": np.int8,
                  "shift_m": np.float64}
        return pd.DataFrame({c: np.zeros(0, dtype=dtypes[c]) for c in COLUMNS}), 0
    return pd.concat(frames, ignore_index=True)[COLUMNS], deleted
