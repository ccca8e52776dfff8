"""The W4M adapter on real Dask workers with real T-Drive taxis: output contract and (k,δ)-anonymity."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from mechanisms.registry import mechanism
from mechanisms.w4m import W4MParams, anonymize, is_k_delta_anonymous
from mechanisms.w4m.adapter import W4M
from tasks import protect
from trajpub.candidate import Shape
from trajpub.mechanism import PublicInputs


def test_w4m_on_tdrive_keeps_the_contract_and_the_property(dask_client, tdrive_prepared):
    futures, grid, prepared = tdrive_prepared(10, max_points=100)
    a = mechanism("w4m")
    assert isinstance(a, W4M)
    params = a.parse_params({"k": 4, "delta_m": 500.0})
    out = protect.run(a, dask_client, futures, PublicInputs(grid), params, np.random.default_rng(7))
    pts = out.points
    for col in ("set_id", "traj_id", "object_id", "seq", "cell", "t", "lon", "lat", "x", "y"):
        assert col in pts.columns
    assert out.check().shape is Shape.ANONYMITY_SETS
    # the private owner table: one row per released trajectory, naming its owner and the raw trajectory it edits
    owners = out.owners.set_index("traj_id")
    assert sorted(owners.index) == sorted(pts["traj_id"].unique())
    assert (pts["object_id"] == pts["traj_id"].map(owners["object_id"])).all()
    sources = prepared.drop_duplicates("traj_id").set_index("traj_id")["object_id"]
    assert (owners["source_traj_id"].map(sources) == owners["object_id"]).all()
    assert isinstance(pts["t"].dtype, pd.DatetimeTZDtype)
    np.testing.assert_array_equal(pts["cell"], grid.cell_of(pts["x"].to_numpy(), pts["y"].to_numpy()))
    x, y = grid.project(pts["lon"].to_numpy(), pts["lat"].to_numpy())
    np.testing.assert_allclose(x, pts["x"], atol=1e-3)
    np.testing.assert_allclose(y, pts["y"], atol=1e-3)
    # the defining property on real data: k distinct taxis per set, co-localised within δ at every timestamp
    assert is_k_delta_anonymous(pts, 4, 500.0)
    assert set(pts["object_id"]) <= set(prepared["object_id"])
    seq_ok = pts.groupby("traj_id")["seq"].apply(lambda s: np.array_equal(s.to_numpy(), np.arange(len(s))))
    assert seq_ok.all()
    meta = out.metadata
    json.dumps(meta, allow_nan=False)
    assert meta["mechanism"] == "w4m" and meta["params"] == params.to_dict() and meta["k_delta_verified"]
    assert "seed" not in json.dumps(meta).lower()
    n = prepared["traj_id"].nunique()
    assert meta["input_trajectories"] == n
    assert meta["suppressed_trajectories"] <= int(np.floor(params.trash_max * n))
    assert meta["released_records"] == pts["traj_id"].nunique() == n - meta["suppressed_trajectories"]
    assert meta["released_points"] == len(pts)
    # the Dask path runs the same steps with the same random streams as the in-memory pipeline
    ordered = pd.concat([f.result() for f in futures], ignore_index=True)
    local = anonymize(ordered.sort_values(["traj_id", "seq"]), params, np.random.default_rng(7))
    assert local.summary["released_points"] == meta["released_points"]
    assert local.summary["kept_points"] == meta["kept_points"]
    assert W4MParams.from_dict(meta["params"]) == params
