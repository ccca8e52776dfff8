"""The AdaTrace adapter on real Dask workers with real T-Drive data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mechanisms.adatrace.adapter import AdaTrace
from mechanisms.registry import mechanism
from tasks import protect
from trajpub.candidate import Shape
from trajpub.errors import ParameterError
from trajpub.mechanism import PublicInputs


def test_registry_and_parameter_refusal_before_any_data():
    a = mechanism("adatrace")
    assert isinstance(a, AdaTrace) and a.shape is Shape.SYNTHETIC
    with pytest.raises(ParameterError) as err:
        a.parse_params({"epsilon": -1})
    assert err.value.where == "adatrace.epsilon"
    p = a.parse_params({"max_records_per_object": 4})
    assert a.max_records_per_object(p) == 4
    assert a.guarantee(p).proven is True


def _check_contract(out, grid, prepared):
    pts = out.points
    assert list(pts.columns[:6]) == ["traj_id", "seq", "cell", "t", "lon", "lat"]
    assert pts["t"].isna().all()
    assert (pts["cell"] >= 0).all()
    assert (pts["cell"].to_numpy() == grid.cell_of(pts["x"].to_numpy(), pts["y"].to_numpy())).all()
    # inside the public extent (the bbox's corners projected; its corners reach slightly past the lon/lat box)
    x0, y0, x1, y1 = grid.extent
    assert pts["x"].between(x0, x1).all() and pts["y"].between(y0, y1).all()
    min_lon, min_lat, max_lon, max_lat = grid.bbox
    assert pts["lon"].between(min_lon - 0.05, max_lon + 0.05).all()
    assert pts["lat"].between(min_lat - 0.05, max_lat + 0.05).all()
    seq_ok = pts.groupby("traj_id")["seq"].apply(lambda s: (s.to_numpy() == np.arange(len(s))).all())
    assert seq_ok.all()
    meta = out.metadata
    json.dumps(meta, allow_nan=False)
    assert "seed" not in json.dumps(meta).lower()
    assert meta["mechanism"] == "adatrace"
    assert meta["released_records"] == pts["traj_id"].nunique() and meta["released_points"] == len(pts)
    assert "input_trajectories" not in meta  # a true count would leak: only the noisy size is recorded
    # synthetic: no released point is a raw fix
    raw = set(zip(prepared["lon"].round(7), prepared["lat"].round(7), strict=True))
    assert not raw & set(zip(pts["lon"].round(7), pts["lat"].round(7), strict=True))


def test_adapter_on_tdrive(dask_client, tdrive_prepared):
    futures, grid, prepared = tdrive_prepared(10, max_points=200)
    a = AdaTrace()
    params = a.parse_params({"epsilon": 5.0})
    out = protect.run(a, dask_client, futures, PublicInputs(grid), params, np.random.default_rng(7))
    _check_contract(out, grid, prepared)
    meta = out.metadata
    # the number of synthetic trajectories is the noisy count (sd ~ sqrt(2 * 1296) * 0.4 = 20 here)
    bound = 6 * np.sqrt(2 * 6 ** 4) / 2.5
    assert abs(meta["released_records"] - prepared["traj_id"].nunique()) < bound
    assert abs(meta["noisy_input_trajectories"] - prepared["traj_id"].nunique()) < bound
    # the top level is the survey's 6 x 6 over the public extent, every walk at most max_length cells (or the
    # hop distance between its end leaves when longer)
    assert meta["grid"]["top_level"] == 6
    assert meta["grid"]["extent"] == pytest.approx(list(grid.extent))
    assert out.points.groupby("traj_id").size().max() <= max(params.max_length, 60)


def test_adapter_with_attack_resilience_on_tdrive(dask_client, tdrive_prepared):
    futures, grid, prepared = tdrive_prepared(10, max_points=200)
    a = AdaTrace()
    params = a.parse_params({"attack_resilience": True, "n_outliers": 20, "n_synthetic": 150})
    out = protect.run(a, dask_client, futures, PublicInputs(grid), params, np.random.default_rng(7))
    _check_contract(out, grid, prepared)
    rep = out.metadata["resilience"]
    assert out.metadata["released_records"] == 150 - rep["shortfall"]
    assert {"bayesian", "sniffing_failures", "dropped_start_outliers", "dropped_location_outliers"} <= set(rep)
    assert a.guarantee(params).proven is False
