"""Checks of GLOVE's defining property on a release (used by the tests and the adapter's diagnostics)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def region_coverage(released: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """For every published region (one row per ``set_id, seq``), how many distinct objects of its set have an
    original fix inside it (degree box × [t, t_end], bounds inclusive), and how many objects the set has.

    ``released``: a generalised release (``set_id, seq, object_id, t, t_end, lon_min..lat_max``); ``points``: the
    original fixes (``object_id, t, lon, lat``). GLOVE's k-anonymity holds when ``covered >= k`` everywhere.
    """
    pts = points[["object_id", "t", "lon", "lat"]].copy()
    pts["object_id"] = pts["object_id"].astype(str)
    rows = []
    for sid, rec in released.groupby("set_id", sort=True):
        objects = rec["object_id"].astype(str).unique()
        regions = rec.drop_duplicates("seq")
        mine = pts[pts["object_id"].isin(objects)]
        code = pd.Categorical(mine["object_id"], categories=objects).codes
        lon, lat, t = mine["lon"].to_numpy(), mine["lat"].to_numpy(), mine["t"].to_numpy()
        inside = ((regions["lon_min"].to_numpy()[:, None] <= lon) & (lon <= regions["lon_max"].to_numpy()[:, None])
                  & (regions["lat_min"].to_numpy()[:, None] <= lat) & (lat <= regions["lat_max"].to_numpy()[:, None])
                  & (regions["t"].to_numpy()[:, None] <= t) & (t <= regions["t_end"].to_numpy()[:, None]))
        hit = np.zeros((len(regions), len(objects)), dtype=bool)
        r, c = np.nonzero(inside)
        hit[r, code[c]] = True
        rows.append(pd.DataFrame({"set_id": sid, "seq": regions["seq"].to_numpy(), "covered": hit.sum(axis=1),
                                  "set_objects": len(objects)}))
    if not rows:
        return pd.DataFrame({"set_id": [], "seq": [], "covered": [], "set_objects": []})
    return pd.concat(rows, ignore_index=True)


def identical_within_sets(released: pd.DataFrame) -> bool:
    """Whether all records of each set publish the same regions (GLOVE publishes one fingerprint per group)."""
    cols = ["seq", "t", "t_end", "lon_min", "lat_min", "lon_max", "lat_max"]
    for _, rec in released.groupby("set_id"):
        first = None
        for _, r in rec.groupby("traj_id"):
            v = r.sort_values("seq")[cols].reset_index(drop=True)
            if first is None:
                first = v
            elif not first.equals(v):
                return False
    return True
