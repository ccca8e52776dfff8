"""DPT adapter on real Dask workers with real T-Drive data (session fixtures of conftest.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mechanisms.dpt import DptParams, discretise, hierarchy_of
from mechanisms.dpt.adapter import Dpt
from tasks import protect
from trajpub.candidate import Shape
from trajpub.errors import ParameterError
from trajpub.mechanism import PublicInputs


def test_parse_params_refuses_before_reading_data() -> None:
    adapter = Dpt()
    with pytest.raises(ParameterError) as err:
        adapter.parse_params({"epsilon": 5.0, "tree_height": 3})
    assert err.value.where == "dpt.tree_height"
    params = adapter.parse_params({"max_records_per_object": 3})
    assert adapter.max_records_per_object(params) == 3
    assert adapter.shape is Shape.SYNTHETIC
    assert adapter.guarantee(params).epsilon == 5.0


def _check_contract(points: pd.DataFrame, grid, params: DptParams) -> None:
    assert list(points.columns[:6]) == ["traj_id", "seq", "cell", "t", "lon", "lat"]
    assert points["t"].isna().all() and str(points["t"].dtype) == "datetime64[ns, UTC]"
    assert (points["cell"] >= 0).all()
    np.testing.assert_array_equal(points["cell"], grid.cell_of(points["x"].to_numpy(), points["y"].to_numpy()))
    lon0, lat0, lon1, lat1 = grid.bbox
    assert points["lon"].between(lon0 - 0.05, lon1 + 0.05).all() and points["lat"].between(lat0 - 0.05, lat1 + 0.05).all()
    g = points.groupby("traj_id")
    assert (g["seq"].transform(lambda s: (s.to_numpy() == np.arange(len(s))).all())).all()
    assert g.size().max() <= params.max_transitions + 1
    # every move goes to a neighbouring cell of one reference system: at most 2**(levels-1) cells, never a stay
    same = points["traj_id"].eq(points["traj_id"].shift())
    step = np.maximum(points["x"].diff().abs(), points["y"].diff().abs())[same]
    assert (step > 1.0).all() and (step <= grid.cell_size_m * 2 ** (params.n_levels - 1) + 1e-6).all()


def test_adapter_on_tdrive(dask_client, tdrive_prepared) -> None:
    futures, grid, _ = tdrive_prepared(15, cell_size_m=2000, max_points=400)
    adapter = Dpt()
    params = adapter.parse_params({"epsilon": 5.0, "max_records_per_object": 20})
    out = protect.run(adapter, dask_client, futures, PublicInputs(grid), params, np.random.default_rng(7))
    meta = out.metadata
    _check_contract(out.points, grid, params)
    assert meta["mechanism"] == "dpt" and meta["params"] == params.to_dict()
    assert "input_trajectories" not in meta  # a true count would leak: only noisy sizes are recorded
    assert meta["noisy_input_trajectories"] == pytest.approx(sum(s["noisy_trajectories"] for s in meta["systems"]))
    assert meta["released_records"] == round(meta["noisy_input_trajectories"])  # n_synthetic = None: the noisy count
    assert meta["released_records"] == out.points["traj_id"].nunique()
    assert meta["released_points"] == len(out.points)
    assert math.isclose(sum(meta["epsilon_parts"].values()), 5.0, rel_tol=1e-12)
    assert "seed" not in str(meta).lower()
    assert any(s["kept"] for s in meta["systems"])


def test_adapter_with_huge_epsilon_starts_where_real_records_start(dask_client, tdrive_prepared) -> None:
    """With ε = 1e9 the thresholded start histogram keeps exactly the real start cells, so every synthetic
    trajectory starts in a cell (of some reference system) where a real discretised record starts."""
    futures, grid, prepared = tdrive_prepared(15, cell_size_m=2000, max_points=400)
    params = DptParams(epsilon=1e9, n_synthetic=300)
    out = protect.run(Dpt(), dask_client, futures, PublicInputs(grid), params, np.random.default_rng(7))
    _check_contract(out.points, grid, params)
    assert out.metadata["released_records"] == 300
    df = prepared.sort_values(["traj_id", "seq"])
    hier = hierarchy_of(grid, params)
    disc = discretise(df["traj_id"].to_numpy(), df["cell"].to_numpy(), hier, params.max_transitions,
                      params.jump_tolerance)
    allowed = set()
    for k in range(params.n_levels):
        starts = disc.cells[disc.offsets[:-1]][disc.level == k]
        col, row = hier.block_centre(k, starts)
        f = 1 << k  # base cells of the block
        for c, r in zip(col, row, strict=True):
            c0, r0 = int(c - f / 2), int(r - f / 2)
            allowed |= {(rr * grid.n_cols + cc) for cc in range(c0, c0 + f) for rr in range(r0, r0 + f)}
    first = out.points[out.points["seq"] == 0]["cell"]
    assert set(first.tolist()) <= allowed
