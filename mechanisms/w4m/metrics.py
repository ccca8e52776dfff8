"""Checks of the (k,δ)-anonymity property on a release (Abul, Bonchi, Nanni 2008 Def. 3-4: co-localisation)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def set_diameters(points: pd.DataFrame) -> pd.DataFrame:
    """Per published set and timestamp: ``members`` (trajectories present) and ``diameter_m`` (largest
    pairwise distance). ``points`` has ``set_id, traj_id, t, x, y``."""
    p = points[["set_id", "traj_id", "t", "x", "y"]]
    pairs = p.merge(p, on=["set_id", "t"], suffixes=("_a", "_b"))
    pairs = pairs[pairs["traj_id_a"] <= pairs["traj_id_b"]]
    dist = np.hypot(pairs["x_a"].to_numpy() - pairs["x_b"].to_numpy(),
                    pairs["y_a"].to_numpy() - pairs["y_b"].to_numpy())
    g = pairs.assign(d=dist).groupby(["set_id", "t"])
    return pd.DataFrame({"members": p.groupby(["set_id", "t"])["traj_id"].nunique(),
                         "diameter_m": g["d"].max()}).reset_index()


def is_k_delta_anonymous(points: pd.DataFrame, k: int, delta_m: float, tol_m: float = 1e-6,
                         owners: str | None = "object_id") -> bool:
    """Whether every published set holds at least ``k`` trajectories (``k`` distinct ``owners`` when that
    column is given), every member of a set is published at the same timestamps, and at every timestamp any
    two members are within ``delta_m`` (+ ``tol_m`` for floating point)."""
    if points.empty:
        return True
    size = points.groupby("set_id")["traj_id"].nunique()
    if (size < k).any():
        return False
    if owners is not None and (points.groupby("set_id")[owners].nunique() < k).any():
        return False
    d = set_diameters(points)
    if (d["members"].to_numpy() != size.loc[d["set_id"]].to_numpy()).any():
        return False
    return bool((d["diameter_m"] <= delta_m + tol_m).all())
