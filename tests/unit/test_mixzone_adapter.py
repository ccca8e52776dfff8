"""The mix-zone adapter on real Dask workers with real T-Drive data and a synthetic road network."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.mixzone import MixzoneParams, place_mix_zones
from mechanisms.mixzone.adapter import Mixzone
from tasks import protect
from trajpub.mechanism import OnRoadNetwork, PublicInputs
from trajpub.road_synthetic import synthetic_grid


def test_adapter_on_tdrive(dask_client, tdrive_prepared):
    futures, grid, prepared = tdrive_prepared(12, max_points=400)
    x0, y0 = grid.project(116.25, 39.80)
    net = synthetic_grid(25, 25, 800.0, rng=np.random.default_rng(1), origin=(float(x0), float(y0)),
                         crs=grid.crs)
    params = MixzoneParams(radius_m=300.0, n_zones=60)
    setup = OnRoadNetwork(params, "synthetic-beijing", "synthetic")
    adapter = Mixzone()
    inputs = PublicInputs(grid, road_network=net, road_network_source="synthetic")
    out = protect.run(adapter, dask_client, futures, inputs, setup, np.random.default_rng(7))
    pts = out.points
    assert list(pts.columns) == ["object_id", "traj_id", "seq", "cell", "t", "lon", "lat", "x", "y"]
    assert "source_traj_id" not in pts.columns  # which raw trajectory a fragment comes from stays private:
    owners = out.owners.set_index("traj_id")
    assert sorted(owners.index) == sorted(pts["traj_id"].unique())
    sources = prepared.drop_duplicates("traj_id").set_index("traj_id")["object_id"]
    assert (owners["source_traj_id"].map(sources) == owners["object_id"]).all()
    meta = out.metadata
    assert meta["zones_placed"] == 60 and meta["released_fragments"] > meta["input_trajectories"] > 0
    assert "seed" not in str(meta).lower()
    # no released point within r of a zone (the zones depend on the network only: recompute them)
    placement = place_mix_zones(net, 60)  # the network alone decides the zones, whatever the data
    assert meta["zone_digest"] == placement.digest
    zones = placement.zone_xy
    d = np.hypot(pts["x"].to_numpy()[:, None] - zones[:, 0], pts["y"].to_numpy()[:, None] - zones[:, 1])
    assert d.min() > 300.0
    assert meta["suppressed_in_zone_points"] == len(prepared) - len(pts) - meta["suppressed_short_fragment_points"]
    # every fragment is one object's, a time-ordered piece of one original trajectory, seq 0..n-1
    src = prepared[["object_id", "traj_id", "t"]].rename(columns={"traj_id": "source"})
    merged = pts.merge(src, on=["object_id", "t"], how="left", validate="one_to_one")
    assert merged["source"].notna().all()
    g = merged.groupby("traj_id")
    assert (g["source"].nunique() == 1).all() and (g["object_id"].nunique() == 1).all()
    assert (g["t"].apply(lambda s: s.is_monotonic_increasing)).all()
    assert (g["seq"].apply(lambda s: s.tolist() == list(range(len(s))))).all()
    assert sorted(pts["traj_id"].unique().tolist()) == list(range(1, meta["released_fragments"] + 1))
    assert (pts["cell"].to_numpy() == grid.cell_of(pts["x"].to_numpy(), pts["y"].to_numpy())).all()
    assert isinstance(pts["t"].dtype, pd.DatetimeTZDtype)
    assert adapter.guarantee(setup).proven is False
