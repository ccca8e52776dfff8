"""Mix-zone anonymisation of trajectories (survey [S-code] ``MixZone.anonymize``, with the corrections named in
the package docstring): cover points by zones, cut trajectories into fragments, optionally suppress the
covered points, give every fragment a fresh random pseudonym.

The cover (a bucket grid of the zones), the cut and the suppression run as compiled numba loops over the points
sorted by trajectory (per-point state machines numpy cannot vectorise); pandas only takes the kept rows, once.
"""

from __future__ import annotations

import numba
import numpy as np
import pandas as pd

from mechanisms.mixzone.params import MixzoneParams

_MAX_CELLS_PER_AXIS = 1024
"""The zones' bucket grid has cells of side ``radius_m``, or wider when that would need more cells per axis."""


@numba.njit(cache=True)
def _cover(x: np.ndarray, y: np.ndarray, zx: np.ndarray, zy: np.ndarray, radius: float, cell: float,
           x0: float, y0: float, nx: int, ny: int) -> np.ndarray:
    """Nearest zone within ``radius`` of each point (-1: none; ties to the smaller index). Zones are bucketed
    in an ``nx`` x ``ny`` grid of side ``cell`` >= ``radius`` from (``x0``, ``y0``), so a covering zone lies in
    the point's cell or one of its eight neighbours."""
    bucket = np.minimum((zx - x0) / cell, nx - 1).astype(np.int64) * ny \
        + np.minimum((zy - y0) / cell, ny - 1).astype(np.int64)
    order = np.argsort(bucket, kind="mergesort")
    first = np.searchsorted(bucket[order], np.arange(nx * ny + 1))
    out = np.full(len(x), -1, np.int64)
    for i in range(len(x)):
        px, py = x[i], y[i]
        if not (px >= x0 - cell and px < x0 + (nx + 1) * cell and py >= y0 - cell and py < y0 + (ny + 1) * cell):
            continue  # outside the grid and its margin (NaN included): no zone within radius
        cx, cy = int(np.floor((px - x0) / cell)), int(np.floor((py - y0) / cell))
        best, best_d = -1, np.inf
        for gx in range(max(cx - 1, 0), min(cx + 2, nx)):
            for gy in range(max(cy - 1, 0), min(cy + 2, ny)):
                b = gx * ny + gy
                for j in order[first[b]:first[b + 1]]:
                    dx, dy = px - zx[j], py - zy[j]
                    d = np.sqrt(dx * dx + dy * dy)
                    if d <= radius and (d < best_d or (d == best_d and j < best)):
                        best, best_d = j, d
        out[i] = best
    return out


def covering_zone(x: np.ndarray, y: np.ndarray, zone_xy: np.ndarray, radius_m: float) -> np.ndarray:
    """Index (row of ``zone_xy``) of the nearest mix zone within ``radius_m`` (inclusive) of each point, -1 for
    a point no zone covers. Ties between equidistant zones go to the smaller index."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    zone_xy = np.asarray(zone_xy, np.float64).reshape(-1, 2)
    if len(zone_xy) == 0 or len(x) == 0:
        return np.full(len(x), -1, np.int64)
    lo, hi = zone_xy.min(axis=0), zone_xy.max(axis=0)
    # a hair wider than the radius, so that rounding cannot put a covering zone two cells away
    cell = max(float(radius_m) * (1 + 1e-9), float((hi - lo).max()) / _MAX_CELLS_PER_AXIS, 1e-9)
    nx, ny = (np.floor((hi - lo) / cell).astype(np.int64) + 1).tolist()
    return _cover(x, y, np.ascontiguousarray(zone_xy[:, 0]), np.ascontiguousarray(zone_xy[:, 1]),
                  float(radius_m), cell, float(lo[0]), float(lo[1]), nx, ny)


@numba.njit(cache=True)
def _fragments(zone: np.ndarray, starts: np.ndarray, ends: np.ndarray, min_length: int) -> np.ndarray:
    """Fragment numbers of every point, trajectory by trajectory (rows ``starts[i]:ends[i]``), numbered
    consecutively over all trajectories (the rule of :func:`fragment_numbers`)."""
    out = np.empty(len(zone), np.int64)
    frag = -1
    for a, b in zip(starts, ends):
        frag += 1
        count, ref = 0, zone[a]
        for i in range(a, b):
            z = zone[i]
            if z >= 0 and z != ref and count >= min_length:
                frag += 1
                count = 0
                ref = z
            out[i] = frag
            count += 1
    return out


@numba.njit(cache=True)
def _release(frag: np.ndarray, dropped: np.ndarray, min_points: int) -> tuple:
    """Released fragments: given each point's fragment number (non-decreasing, consecutive) and whether it is
    suppressed, the local number of its released fragment (-1: not released) and its position in it; a
    fragment keeping fewer than ``min_points`` points is not released. Also returns the number of released
    fragments and of the dropped short fragments (left with >= 1 point) and their points."""
    n = len(frag)
    local = np.full(n, -1, np.int64)
    seq = np.full(n, -1, np.int64)
    n_local, short_fragments, short_points = 0, 0, 0
    a = 0
    while a < n:
        b, kept = a, 0
        while b < n and frag[b] == frag[a]:
            kept += not dropped[b]
            b += 1
        if kept >= min_points:
            s = 0
            for i in range(a, b):
                if not dropped[i]:
                    local[i], seq[i] = n_local, s
                    s += 1
            n_local += 1
        elif kept > 0:
            short_fragments += 1
            short_points += kept
        a = b
    return local, seq, n_local, short_fragments, short_points


def fragment_numbers(zone: np.ndarray, min_length: int) -> np.ndarray:
    """Fragment number (0, 1, ...) of each point of ONE trajectory, given each point's covering zone (-1: none).

    The cut rule: at a point covered by a zone other than the reference zone (the zone of the last cut; at the
    start, the zone covering the first point, or none), if the current fragment already holds >= ``min_length``
    points, a new fragment starts AT that point and that zone becomes the reference. A long stay in one zone
    is cut at most once; a trip A → B → A that starts outside A is cut at each of the three entries (given
    enough points in between).
    The survey's code instead takes the first zone the trajectory touches as the reference, never cuts there
    and never updates it (so it does not cut on re-entering that zone and re-cuts every ``min_length`` points
    while inside any other zone).
    """
    zone = np.asarray(zone, np.int64)
    if len(zone) == 0:
        return np.empty(0, np.int64)
    return _fragments(zone, np.zeros(1, np.int64), np.full(1, len(zone), np.int64), min_length)


def _trajectory_order(traj: np.ndarray, seq: np.ndarray) -> np.ndarray | None:
    """Row order by (``traj``, ``seq``), stable; None when the rows are already in that order."""
    same = traj[1:] == traj[:-1]
    if np.all((traj[1:] > traj[:-1]) | (same & (seq[1:] >= seq[:-1]))):
        return None
    return np.lexsort((seq, traj))


def split_fragments(points: pd.DataFrame, zone_xy: np.ndarray, params: MixzoneParams) -> tuple[pd.DataFrame, dict]:
    """Cut the trajectories of ``points`` (``traj_id, seq, x, y`` and any other columns, kept) at mix zones.

    Returns the released points, sorted by (``traj_id``, ``seq``), with a local ``fragment`` number (0..F−1,
    in input order: NOT a pseudonym, see :func:`assign_pseudonyms`), ``seq`` renumbered within each fragment,
    ``zone`` (covering zone or -1), and counts. With ``suppress_in_zone`` every covered point is removed;
    fragments left with fewer than ``min_fragment_points`` points are dropped and counted.
    """
    traj, seq = points["traj_id"].to_numpy(), points["seq"].to_numpy()
    order = _trajectory_order(traj, seq)
    x, y = points["x"].to_numpy(np.float64), points["y"].to_numpy(np.float64)
    if order is not None:
        traj, x, y = traj[order], x[order], y[order]
    zone = covering_zone(x, y, zone_xy, params.radius_m)
    starts = np.flatnonzero(np.r_[True, traj[1:] != traj[:-1]]) if len(traj) else np.empty(0, np.int64)
    ends = np.r_[starts[1:], len(traj)].astype(np.int64)
    frag = _fragments(zone, starts.astype(np.int64), ends, params.min_length)
    covered = zone >= 0
    local, new_seq, n_local, short_fragments, short_points = _release(
        frag, covered if params.suppress_in_zone else np.zeros_like(covered), params.min_fragment_points)
    kept = np.flatnonzero(local >= 0)
    df = points.take(kept if order is None else order[kept]).reset_index(drop=True)
    df["seq"] = new_seq[kept]
    df["zone"] = zone[kept]
    df["fragment"] = local[kept]
    stats = {"input_trajectories": len(starts), "input_points": len(traj),
             "points_in_zones": int(covered.sum()),
             "trajectories_touching_a_zone": int(np.logical_or.reduceat(covered, starts).sum()) if len(traj) else 0,
             "zones_touched": len(np.unique(zone[covered])), "cut_fragments": int(frag[-1]) + 1 if len(frag) else 0,
             "suppressed_in_zone_points": int(covered.sum()) if params.suppress_in_zone else 0,
             "suppressed_short_fragments": short_fragments, "suppressed_short_fragment_points": short_points,
             "released_fragments": n_local, "released_points": len(kept)}
    return df, stats


def assign_pseudonyms(n_fragments: int, rng: np.random.Generator) -> np.ndarray:
    """Pseudonyms (new ``traj_id`` values) for fragments 0..n−1: a uniformly random permutation of 1..n, so
    that neither the order of fragments in the input nor which fragments came from one trajectory shows in
    the ids."""
    return rng.permutation(n_fragments).astype(np.int64) + 1


def anonymize(points: pd.DataFrame, zone_xy: np.ndarray, params: MixzoneParams,
              rng: np.random.Generator) -> tuple[pd.DataFrame, dict]:
    """Whole in-memory frame: :func:`split_fragments` then :func:`assign_pseudonyms`. Returns the released
    points (``traj_id`` = pseudonym, ``source_traj_id`` = the original trajectory, private; rows ordered by
    pseudonym then ``seq``) and the counts."""
    df, stats = split_fragments(points, zone_xy, params)
    return finish(df, assign_pseudonyms(stats["released_fragments"], rng)), stats


def finish(df: pd.DataFrame, pseudonyms: np.ndarray) -> pd.DataFrame:
    """Replace local fragment numbers by their pseudonyms and order rows by pseudonym (no input order left).

    The order is a stable sort on pseudonym x (largest seq + 1) + seq: the order by (pseudonym, seq) in one
    integer key (pseudonyms and seq are small non-negative integers)."""
    ids = pseudonyms[df["fragment"].to_numpy()]
    seq = df["seq"].to_numpy(np.int64)
    order = np.argsort(ids * (int(seq.max(initial=0)) + 1) + seq, kind="stable")
    out = df.take(order).rename(columns={"traj_id": "source_traj_id"}).reset_index(drop=True)
    out["traj_id"] = ids[order]
    return out.drop(columns=["fragment"])
