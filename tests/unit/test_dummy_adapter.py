"""The DTPP dummy adapter on real Dask workers with real T-Drive data (sub-cell candidates, no network)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.dummy import DummyParams, cell_keys
from mechanisms.dummy.adapter import Dummy
from tasks import protect
from trajpub.mechanism import OnRoadNetwork, PublicInputs


def test_adapter_on_tdrive(dask_client, tdrive_prepared):
    futures, grid, prepared = tdrive_prepared(10, max_points=150)
    params = DummyParams()
    setup = OnRoadNetwork(params, None, "none")
    out = protect.run(Dummy(), dask_client, futures, PublicInputs(grid), setup, np.random.default_rng(7))
    pts, owners, meta = out.points, out.owners, out.metadata
    assert list(pts.columns) == ["set_id", "traj_id", "seq", "cell", "t", "lon", "lat", "x", "y"]
    assert "object_id" not in pts.columns and "seed" not in str(meta).lower()
    n_in = prepared["traj_id"].nunique()
    assert meta["input_trajectories"] == n_in == meta["published_sets"] + meta["suppressed_trajectories"]
    assert meta["published_sets"] > 0 and meta["released_records"] == 5 * meta["published_sets"]
    assert isinstance(pts["t"].dtype, pd.DatetimeTZDtype)
    assert (pts["cell"].to_numpy() == grid.cell_of(pts["x"].to_numpy(), pts["y"].to_numpy())).all()
    # exactly k members per set, one real member per set in the private owner table
    assert (pts.groupby("set_id")["traj_id"].nunique() == 5).all()
    assert len(owners) == meta["published_sets"] and owners["traj_id"].isin(pts["traj_id"]).all()
    assert set(owners["object_id"]) <= set(prepared["object_id"])
    # defining property at every published timestamp: either all 5 members coincide (exposed) or the real
    # location has >= l-1 = 2 distinct alternatives in its 0.001 degree cell
    real = pts[pts["traj_id"].isin(owners["traj_id"])].set_index(["set_id", "seq"])
    fake = pts[~pts["traj_id"].isin(owners["traj_id"])].join(real[["x", "y", "lon", "lat"]], on=["set_id", "seq"],
                                                             rsuffix="_r")
    same = (fake["x"] == fake["x_r"]) & (fake["y"] == fake["y_r"])
    by_ts = fake.assign(same=same).groupby(["set_id", "seq"])
    all_same = by_ts["same"].all()
    assert all_same.any() and (~all_same).any()
    unexposed = fake.set_index(["set_id", "seq"]).loc[all_same[~all_same].index]
    assert not (unexposed["x"] == unexposed["x_r"]).any()  # no dummy repeats the real location there
    alts = unexposed.groupby(level=[0, 1]).apply(lambda g: len(set(zip(g["x"], g["y"], strict=True))))
    assert (alts >= 2).all()
    keys = cell_keys(unexposed["lon"], unexposed["lat"], 0.001)
    assert (keys == cell_keys(unexposed["lon_r"], unexposed["lat_r"], 0.001)).all()
    # the real members are the owners' own points at their true times
    src = prepared[["object_id", "traj_id", "t", "x"]].rename(columns={"traj_id": "source_traj_id"})
    mine = pts.merge(owners, on="traj_id").merge(src, on=["object_id", "source_traj_id", "t"], suffixes=("", "_s"))
    assert len(mine) == len(pts) // 5 and (mine["x"] == mine["x_s"]).all()
