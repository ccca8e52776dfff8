"""ObjTrace: the per-object budget and contribution bound, the noise scales, timestamps, and the adapter on real
Dask workers with the real T-Drive sample."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pandas as pd
import pytest

from audits.trajectory_utility import trajectory_metrics
from bench.utility_data import TDRIVE_WINDOW
from mechanisms import objtrace
from mechanisms.objtrace.adapter import ObjTrace
from mechanisms.objtrace.counting import ObjTraceCounts
from mechanisms.registry import example_spec_file
from tasks import check_output, protect
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import ParameterError
from trajpub.grid import GridSpec
from trajpub.mechanism import PublicInputs
from trajpub.segment import keep_trajectories, segment, to_grid
from trajpub.spec import ReleaseSpec, read_spec_file
from trajpub.window import ReleaseWindow

BBOX = (115.4, 39.4, 117.6, 41.1)
HISTOGRAMS = [p for p in objtrace.PARTS if p != "records"]


@pytest.fixture(scope="module")
def prepared(tdrive_points) -> pd.DataFrame:
    """The whole T-Drive sample prepared as the flow does (30 min gaps, UTC days, >= 2 points, 2 km grid)."""
    return to_grid(keep_trajectories(segment(tdrive_points, 30 * 60, True), 2, None), GridSpec(BBOX, 2000.0))


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0, 5.0, 7.3, 1e-3])
def test_budget_parts_sum_exactly_to_epsilon(epsilon: float) -> None:
    parts = objtrace.ObjTraceParams(epsilon=epsilon).budget()
    assert list(parts) == list(objtrace.PARTS)
    assert sum(parts.values()) == epsilon  # the ledger's sequential composition, exact in floating point
    assert all(v > 0 for v in parts.values())


def test_params_refuse_bad_values_with_the_field() -> None:
    for bad in ({"shares": [0.5, 0.5]}, {"length_edges": [1, 2]}, {"pace_edges_s": [0, 10, 5]},
                {"epsilon": 0}, {"reference_date": "2008-02-04"}, {"cell_size": 3}):
        with pytest.raises(ParameterError) as err:
            ObjTrace().parse_params(bad)
        assert err.value.where.startswith("objtrace.")
    params = objtrace.ObjTraceParams.from_dict({"length_edges": [0, 1, 5], "shares": [0.125] * 8})
    assert objtrace.ObjTraceParams.from_dict(params.to_dict()) == params


def test_an_object_with_45_records_contributes_at_most_one_unit_per_histogram_and_m_records(prepared) -> None:
    grid = GridSpec(BBOX, 2000.0)
    params = objtrace.ObjTraceParams(max_records_per_object=16)
    geometry = objtrace.geometry_of(grid, params)
    per_object = prepared.groupby("object_id")["traj_id"].nunique()
    big = per_object.idxmax()
    assert per_object[big] == 45  # the maximum records per taxi in this sample
    others = prepared[prepared["object_id"] != big]
    with_big = objtrace.count_points(prepared, geometry, params)
    without = objtrace.count_points(others, geometry, params)
    alone = objtrace.count_points(prepared[prepared["object_id"] == big], geometry, params)
    assert with_big.records - without.records == alone.records == 16
    for part in HISTOGRAMS:
        diff = getattr(with_big, part) - getattr(without, part)
        assert np.abs(diff).sum() <= 1 + 1e-9, part
        assert getattr(alone, part).sum() == pytest.approx(1.0), part  # this taxi moves: every histogram has items


def test_noise_scales_are_sensitivity_over_the_epsilon_part() -> None:
    params = objtrace.ObjTraceParams(epsilon=2.0, max_records_per_object=20)
    geometry = objtrace.geometry_of(GridSpec(BBOX, 2000.0), params)
    shapes = {"records": 1, "length": len(params.length_edges),
              "end": (2 * params.max_displacement + 1) ** 2, "density": geometry.model.n_cells,
              "moves": geometry.model.n_cells * 8, "weekday": 7, "hour": geometry.region.n_cells * 24,
              "pace": len(params.pace_edges_s)}
    zeros = ObjTraceCounts(**{f.name: 0.0 if f.name == "records" else np.zeros(shapes[f.name])
                              for f in fields(ObjTraceCounts)})
    rng = np.random.default_rng(11)
    draws = [objtrace.fit(zeros, geometry, params, rng).noisy for _ in range(400)]
    budget = params.budget()
    for part in objtrace.PARTS:
        expected = (20.0 if part == "records" else 1.0) / budget[part]
        if part in objtrace.params.SPATIAL_PARTS:  # a quadtree: every level with ε_part / (K + 1)
            expected *= params.quadtree_levels + 1
        assert params.scale(part) == expected
        noise = np.concatenate([d[part] for d in draws])
        # E|Laplace(b)| = b, sd(|X|) = b: the mean of n >= 400 draws is within 5 b / sqrt(n) of b
        assert abs(np.abs(noise).mean() - expected) <= 5 * expected / np.sqrt(len(noise)), part


def _check_release(points: pd.DataFrame, grid: GridSpec, params: objtrace.ObjTraceParams) -> None:
    assert list(points.columns[:6]) == ["traj_id", "seq", "cell", "t", "lon", "lat"]
    assert points["t"].notna().all() and str(points["t"].dtype).startswith("datetime64")
    g = points.groupby("traj_id")
    assert (g.size() >= 2).all()
    assert (g["t"].apply(lambda t: t.is_monotonic_increasing)).all()
    model = objtrace.geometry_of(grid, params).model
    cells = model.cell_of(points["x"].to_numpy(), points["y"].to_numpy())
    col, row = cells % model.n_cols, cells // model.n_cols
    same = points["traj_id"].eq(points["traj_id"].shift()).to_numpy()
    step = np.maximum(np.abs(np.diff(col)), np.abs(np.diff(row)))[same[1:]]
    size = g["seq"].transform("size").to_numpy()[1:][same[1:]]
    assert set(np.unique(step)) <= {0, 1}  # moves to neighbouring model cells...
    assert (size[step == 0] == 2).all()  # ...and a stay only in a one-cell record, written as two points
    candidate = CandidateRelease(Shape.SYNTHETIC, points, {}).check()
    check_output.check(check_output.coarsen_times(candidate, 60.0), 60.0)  # raises on failure


def test_every_released_record_has_timestamps_the_output_suite_accepts(prepared) -> None:
    grid = GridSpec(BBOX, 2000.0)
    params = objtrace.ObjTraceParams(epsilon=5.0)
    taxis = prepared["object_id"].drop_duplicates().iloc[:60]
    result = objtrace.synthesize(prepared[prepared["object_id"].isin(taxis)], grid, params, TDRIVE_WINDOW,
                                np.random.default_rng(3))
    _check_release(result.points, grid, params)


def test_adapter_on_dask_matches_the_in_memory_counts_and_leaks_no_true_count(dask_client, tdrive_prepared) -> None:
    futures, grid, frame = tdrive_prepared(40)
    adapter = ObjTrace()
    params = adapter.parse_params({"epsilon": 5.0})
    assert adapter.max_records_per_object(params) is None
    assert adapter.guarantee(params).privacy_unit == "one object" and adapter.guarantee(params).epsilon == 5.0
    out = protect.run(adapter, dask_client, futures, PublicInputs(grid, window=TDRIVE_WINDOW), params,
                       np.random.default_rng(8))
    _check_release(out.points, grid, params)
    meta = out.metadata
    assert meta["mechanism"] == "objtrace" and meta["params"] == params.to_dict()
    assert meta["released_records"] == out.points["traj_id"].nunique() == round(meta["noisy_records"])
    true_records = float(np.minimum(frame.groupby("object_id")["traj_id"].nunique(), 32).sum())
    assert meta["noisy_records"] != true_records
    assert "seed" not in str(meta).lower() and "input_trajectories" not in meta
    # the summed partitions are the whole frame's counts (each partition holds whole objects)
    whole = objtrace.count_points(frame, objtrace.geometry_of(grid, params), params)
    parts = [objtrace.count_points(p, objtrace.geometry_of(grid, params), params)
             for p in dask_client.gather(futures)]
    merged = parts[0].add(parts[1])
    for f in fields(ObjTraceCounts):
        np.testing.assert_allclose(getattr(merged, f.name), getattr(whole, f.name), atol=1e-9)
    metrics = trajectory_metrics(frame, out.points, grid.bbox, 0)
    assert metrics["outside_bbox_share"] == 0.0 and metrics["start_hour_jsd"] is not None


def test_the_objtrace_spec_parses_and_states_a_per_taxi_epsilon() -> None:
    spec = ReleaseSpec.from_dict(read_spec_file(example_spec_file("objtrace")))
    mech = ObjTrace()
    g = mech.guarantee(mech.parse_params(spec.params))
    assert spec.mechanism == "objtrace" and g.privacy_unit == "one object" and g.epsilon == 5.0
    mech.check_spec(spec, mech.parse_params(spec.params))  # its week is where the timestamps go


def test_a_spec_without_a_bounded_window_is_refused_before_the_release() -> None:
    """The timestamps go in the release's window: an open end (or none) is refused before anything is charged."""
    spec = ReleaseSpec.from_dict(read_spec_file(example_spec_file("objtrace")))
    mech = ObjTrace()
    for open_end in ({"window_start": None}, {"window_end": None}):
        with pytest.raises(ParameterError, match="needs window_start and window_end") as err:
            mech.check_spec(replace(spec, **open_end), mech.parse_params(spec.params))
        assert err.value.where == "window"


def test_an_empty_release_is_an_empty_frame(prepared) -> None:
    grid = GridSpec(BBOX, 2000.0)
    taxis = prepared["object_id"].drop_duplicates().iloc[:3]
    result = objtrace.synthesize(prepared[prepared["object_id"].isin(taxis)], grid,
                                 objtrace.ObjTraceParams(n_synthetic=0), TDRIVE_WINDOW, np.random.default_rng(1))
    assert result.points.empty and list(result.points.columns[:6]) == ["traj_id", "seq", "cell", "t", "lon", "lat"]


@pytest.mark.parametrize("window", [
    ReleaseWindow(pd.Timestamp("2008-02-03T16:00Z"), pd.Timestamp("2008-02-10T16:00Z"), "Asia/Shanghai"),  # a week
    ReleaseWindow(pd.Timestamp("2008-02-04T16:00Z"), pd.Timestamp("2008-02-05T16:00Z"), "Asia/Shanghai"),  # a day
    ReleaseWindow(pd.Timestamp("2008-02-05T10:00Z"), pd.Timestamp("2008-02-05T13:00Z"), "UTC"),  # 3 h: records squeezed
], ids=["local week", "local day", "three hours"])
def test_every_timestamp_lies_in_the_release_window(prepared, window) -> None:
    grid = GridSpec(BBOX, 2000.0)
    params = objtrace.ObjTraceParams(epsilon=5.0)
    taxis = prepared["object_id"].drop_duplicates().iloc[:60]
    points = objtrace.synthesize(prepared[prepared["object_id"].isin(taxis)], grid, params, window,
                                 np.random.default_rng(5)).points
    assert len(points) and points["t"].between(window.start, window.end, inclusive="left").all()
    assert points.groupby("traj_id")["t"].apply(lambda t: t.is_monotonic_increasing).all()
    # and they spread over the window instead of sitting on one date
    days = points.groupby("traj_id")["t"].first().dt.tz_convert(window.timezone).dt.date.nunique()
    assert days == len(window.local_days())


def test_start_days_follow_the_noisy_local_day_of_week_histogram(prepared) -> None:
    """The days of week of the records' starts follow the noisy local day-of-week histogram the model released, so
    a weekly release keeps the fleet's weekly rhythm: each share of the n synthetic starts is within 4 standard
    deviations sqrt(p (1 - p) / n) of the probability it was drawn with; hours and days are counted in the
    dataset's zone."""
    grid = GridSpec(BBOX, 2000.0)
    params = objtrace.ObjTraceParams(epsilon=5.0, n_synthetic=4000)
    week = ReleaseWindow(pd.Timestamp("2008-02-03T16:00Z"), pd.Timestamp("2008-02-10T16:00Z"), "Asia/Shanghai")
    result = objtrace.synthesize(prepared, grid, params, week, np.random.default_rng(9))
    starts = result.points.groupby("traj_id")["t"].first().dt.tz_convert(week.timezone)
    n = len(starts)
    p = np.clip(result.model.noisy["weekday"], 0, None)
    p = p / p.sum()  # the week holds every day of week once
    share = np.bincount(starts.dt.weekday, minlength=7) / n
    assert (np.abs(share - p) <= 4 * np.sqrt(p * (1 - p) / n) + 1e-12).all(), (share, p)
    # the histograms are counted in local time: Beijing's hours are UTC's 8 hours later (no daylight saving)
    geometry = objtrace.geometry_of(grid, params)
    local = objtrace.count_points(prepared, geometry, params, week.timezone)
    in_utc = objtrace.count_points(prepared, geometry, params, "UTC")
    np.testing.assert_allclose(local.hour.reshape(-1, 24), np.roll(in_utc.hour.reshape(-1, 24), 8, axis=1))
    assert not np.allclose(local.weekday, in_utc.weekday)  # 16:00-24:00 UTC is the next day in Beijing
    # the noisy weekday histogram is the true per-object one plus Laplace(1 / epsilon_weekday) per bin: |noise| <
    # 12 b for all 7 bins but with probability 7 exp(-12) < 1e-4
    scale = params.scale("weekday")
    assert scale == 1 / (5.0 * 0.05) and np.abs(result.model.noisy["weekday"] - local.weekday).max() < 12 * scale
