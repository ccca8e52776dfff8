"""Mix-zone anonymisation of trajectories (survey [S-code] ``MixZone.anonymize``, with the corrections named in
the package docstring): cover points by zones, cut trajectories into fragments, optionally suppress the
covered points, give every fragment a fresh random pseudonym.
"""

from __future__ import annotations

import numba
import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from mechanisms.mixzone.params import MixzoneParams


def covering_zone(x: np.ndarray, y: np.ndarray, zone_xy: np.ndarray, radius_m: float) -> np.ndarray:
    """Index (row of ``zone_xy``) of the nearest mix zone within ``radius_m`` (inclusive) of each point, -1 for
    a point no zone covers. Ties between equidistant zones go to the smaller index."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(zone_xy) == 0 or len(x) == 0:
        return np.full(len(x), -1, np.int64)
    tree = cKDTree(np.asarray(zone_xy, float))
    d, i = tree.query(np.column_stack([x, y]), k=1, distance_upper_bound=np.nextafter(radius_m, np.inf))
    return np.where(np.isfinite(d) & (d <= radius_m), i, -1).astype(np.int64)


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


def split_fragments(points: pd.DataFrame, zone_xy: np.ndarray, params: MixzoneParams) -> tuple[pd.DataFrame, dict]:
    """Cut the trajectories of ``points`` (``traj_id, seq, x, y`` and any other columns, kept) at mix zones.

    Returns the released points with a local ``fragment`` number (0..F−1, in input order: NOT a pseudonym,
    see :func:`assign_pseudonyms`), ``seq`` renumbered within each fragment, ``zone`` (covering zone or -1),
    and counts. With ``suppress_in_zone`` every covered point is removed; fragments left with fewer than
    ``min_fragment_points`` points are dropped and counted.
    """
    df = points.sort_values(["traj_id", "seq"], kind="stable").reset_index(drop=True)
    zone = covering_zone(df["x"].to_numpy(), df["y"].to_numpy(), zone_xy, params.radius_m)
    traj = df["traj_id"].to_numpy()
    starts = np.flatnonzero(np.r_[True, traj[1:] != traj[:-1]]) if len(df) else np.empty(0, np.int64)
    ends = np.r_[starts[1:], len(df)]
    frag = _fragments(zone, starts.astype(np.int64), ends.astype(np.int64), params.min_length)
    n_cut_fragments = int(frag[-1]) + 1 if len(frag) else 0
    df["zone"] = zone
    df["fragment"] = frag
    covered = zone >= 0
    stats = {"input_trajectories": len(starts), "input_points": len(df),
             "points_in_zones": int(covered.sum()),
             "trajectories_touching_a_zone": int(pd.Series(covered).groupby(traj).any().sum()) if len(df) else 0,
             "zones_touched": len(np.unique(zone[covered])), "cut_fragments": n_cut_fragments}
    if params.suppress_in_zone:
        df = df[~covered]
    sizes = df.groupby("fragment")["fragment"].transform("size") if len(df) else df["fragment"]
    short = (sizes < params.min_fragment_points).to_numpy()
    stats["suppressed_in_zone_points"] = stats["points_in_zones"] if params.suppress_in_zone else 0
    stats["suppressed_short_fragments"] = int(df.loc[short, "fragment"].nunique())
    stats["suppressed_short_fragment_points"] = int(short.sum())
    df = df[~short]
    _, local = np.unique(df["fragment"].to_numpy(), return_inverse=True)
    df = df.assign(fragment=local.astype(np.int64))
    df["seq"] = df.groupby("fragment").cumcount().astype(np.int64)
    stats["released_fragments"] = int(local.max()) + 1 if len(df) else 0
    stats["released_points"] = len(df)
    return df.reset_index(drop=True), stats


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
    """Replace local fragment numbers by their pseudonyms and order rows by pseudonym (no input order left)."""
    df = df.rename(columns={"traj_id": "source_traj_id"})
    df["traj_id"] = pseudonyms[df["fragment"].to_numpy()]
    return df.drop(columns=["fragment"]).sort_values(["traj_id", "seq"], kind="stable").reset_index(drop=True)
