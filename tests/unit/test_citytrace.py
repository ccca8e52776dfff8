"""CityTrace: the per-object budget (parts and density levels), the contribution bound of every statistic, the
new components against their definitions (step ratios, block directions, move times, speed bound, days), the
noise scales, the spec window check, and the adapter on real Dask workers with the T-Drive sample."""

from __future__ import annotations

import math
from dataclasses import fields, replace

import numpy as np
import pandas as pd
import pytest

from bench.utility_data import TDRIVE_WINDOW
from mechanisms import citytrace
from mechanisms.citytrace.adapter import CityTrace
from mechanisms.citytrace.counting import CityTraceCounts, step_ratios, top_cells_histogram
from mechanisms.citytrace.model import NoisyModel
from mechanisms.citytrace.points import densify, to_points
from mechanisms.citytrace.synthesis import (
    Synthetic,
    direction_shares,
    end_cells,
    move_weights,
    step_times,
    synthesize_from_model,
)
from mechanisms.objtrace.quadtree import block_index
from mechanisms.registry import example_spec_file
from tasks import protect
from trajpub.errors import ParameterError
from trajpub.grid import GridSpec
from trajpub.mechanism import PublicInputs
from trajpub.segment import keep_trajectories, segment, to_grid
from trajpub.spec import ReleaseSpec, read_spec_file

BBOX = (115.4, 39.4, 117.6, 41.1)
HISTOGRAMS = [p for p in citytrace.PARTS if p != "records"]


@pytest.fixture(scope="module")
def prepared(tdrive_points) -> pd.DataFrame:
    """The whole T-Drive sample prepared as the flow does (30 min gaps, UTC days, >= 2 points, 2 km grid)."""
    return to_grid(keep_trajectories(segment(tdrive_points, 30 * 60, True), 2, None), GridSpec(BBOX, 2000.0))


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0, 5.0, 7.3, 1e-3])
def test_the_parts_sum_to_epsilon_and_the_density_levels_to_its_part(epsilon: float) -> None:
    params = citytrace.CityTraceParams(epsilon=epsilon)
    parts = params.budget()
    assert list(parts) == list(citytrace.PARTS)
    assert sum(parts.values()) == epsilon  # the ledger's sequential composition, exact in floating point
    levels = params.level_epsilons()
    assert len(levels) == params.quadtree_levels + 1 and math.fsum(levels) == pytest.approx(parts["density"], rel=1e-12)
    # geometric: level k+1 gets level_ratio times level k (the last one absorbs the rounding)
    assert levels[1] / levels[0] == pytest.approx(params.level_ratio)
    assert levels[-1] / levels[-2] == pytest.approx(params.level_ratio, rel=1e-9)


def test_params_refuse_bad_values_with_the_field() -> None:
    for bad in ({"shares": [0.5, 0.5]}, {"shares": [0.05] * 8 + [0.6]}, {"level_ratio": 0}, {"level_ratio": 5}, {"days": 7},
                {"first_date": "2008-02-02"}, {"step_edges": [0, 1, 1]}, {"max_speed_kmh": -1}, {"cell_size": 3},
                {"density_cells": 0}, {"density_cells": 2.5}, {"end_edges": [1, 2]}, {"end_edges": [0, 2, 2]},
                {"max_displacement": 30}):
        with pytest.raises(ParameterError) as err:
            CityTrace().parse_params(bad)
        assert err.value.where.startswith("citytrace."), bad
    params = citytrace.CityTraceParams.from_dict({"length_edges": [0, 1, 5], "max_speed_kmh": 50})
    assert citytrace.CityTraceParams.from_dict(params.to_dict()) == params


def test_an_object_with_45_records_contributes_at_most_one_unit_per_histogram_and_m_records(prepared) -> None:
    grid = GridSpec(BBOX, 2000.0)
    params = citytrace.CityTraceParams(max_records_per_object=16)
    geometry = citytrace.geometry_of(grid, params)
    per_object = prepared.groupby("object_id")["traj_id"].nunique()
    big = per_object.idxmax()
    assert per_object[big] == 45
    others = prepared[prepared["object_id"] != big]
    with_big = citytrace.count_points(prepared, geometry, params)
    without = citytrace.count_points(others, geometry, params)
    alone = citytrace.count_points(prepared[prepared["object_id"] == big], geometry, params)
    assert with_big.records - without.records == alone.records == 16
    for part in HISTOGRAMS:
        diff = getattr(with_big, part) - getattr(without, part)
        assert np.abs(diff).sum() <= 1 + 1e-9, part
        assert getattr(alone, part).sum() == pytest.approx(1.0), part  # this taxi moves on every day of the window
    for k in range(params.quadtree_levels + 1):  # every density level: block sums of a vector of L1 norm 1
        block, n_blocks = block_index(geometry.model.n_cols, geometry.model.n_rows, k)
        level = np.bincount(block, weights=with_big.density - without.density, minlength=n_blocks)
        assert np.abs(level).sum() <= 1 + 1e-9


def test_the_density_gives_each_object_1_over_k_on_its_k_most_visited_cells() -> None:
    # a: cell 5 three times, 2 twice, 9 and 7 once; b: cell 1 only; c: cells 4 and 3 once each
    objects = np.array(["a"] * 7 + ["b"] * 2 + ["c"] * 2)
    cells = np.array([5, 2, 5, 9, 2, 7, 5, 1, 1, 4, 3])
    two = np.zeros(10)
    two[[5, 2]] = 0.5  # a: its two most visited cells, 1/2 each (by point share they had 3/7 and 2/7, 9 and 7 1/7)
    two[1] = 1.0  # b has one cell: its whole unit there
    two[[3, 4]] = 0.5
    np.testing.assert_array_equal(top_cells_histogram(objects, cells, 2, 10), two)
    one = np.zeros(10)
    one[[5, 1, 3]] = 1.0  # c's tie between cells 3 and 4 goes to the lower cell
    np.testing.assert_array_equal(top_cells_histogram(objects, cells, 1, 10), one)


def test_one_taxis_density_is_1_over_k_on_its_k_most_visited_fine_cells_at_every_level(prepared) -> None:
    """The density's sensitivity as the guarantee states it: adding one taxi adds 1/k on each of its k most
    visited fine cells (by its points), L1 norm exactly 1 at every quadtree level."""
    grid = GridSpec(BBOX, 2000.0)
    params = citytrace.CityTraceParams(density_cells=20)
    geometry = citytrace.geometry_of(grid, params)
    taxi = prepared.groupby("object_id")["traj_id"].nunique().idxmax()
    mine = prepared[prepared["object_id"] == taxi]
    diff = (citytrace.count_points(prepared, geometry, params).density
            - citytrace.count_points(prepared[prepared["object_id"] != taxi], geometry, params).density)
    visits = pd.DataFrame({"cell": geometry.model.cell_of(mine["x"].to_numpy(), mine["y"].to_numpy())}).value_counts()
    assert len(visits) > 20  # the taxi visits more cells than it may weigh
    top = visits.rename("n").reset_index().sort_values(["n", "cell"], ascending=[False, True])["cell"].head(20)
    touched = np.flatnonzero(np.abs(diff) > 1e-12)
    assert set(touched) == set(top)  # its 20 most visited cells (ties to the lower cell), nothing else
    np.testing.assert_allclose(diff[touched], 1 / 20, rtol=1e-9)
    for k in range(params.quadtree_levels + 1):
        block, n_blocks = block_index(geometry.model.n_cols, geometry.model.n_rows, k)
        assert np.abs(np.bincount(block, weights=diff, minlength=n_blocks)).sum() == pytest.approx(1.0, rel=1e-9)


def test_step_ratios_follow_their_definition() -> None:
    # one record through cells 0 -> 0 -> 1 -> 3 (two columns apart: 2 moves) over 0, 10, 40, 100 s; 3 moves in
    # 100 s, pace 100/3 s; changes at 40 s (1 move in 40 s) and 100 s (2 moves in 60 s)
    traj = np.array([7, 7, 7, 7])
    cells = np.array([0, 0, 1, 3])
    rec, ratio, moves = step_ratios(traj, cells, np.array([0.0, 10.0, 40.0, 100.0]), 10, pd.Series({7: 100 / 3}))
    assert list(rec) == [7, 7] and list(moves) == [1, 2]
    np.testing.assert_allclose(ratio, [40 / (100 / 3), 30 / (100 / 3)])


def _model(params: citytrace.CityTraceParams, grid: GridSpec, **noisy) -> NoisyModel:
    geometry = citytrace.geometry_of(grid, params)
    return NoisyModel(params, geometry, noisy)


def test_an_end_lies_at_the_drawn_distance_in_proportion_to_the_density() -> None:
    """The gravity model of :func:`end_cells`: every end at a Chebyshev distance of the one bin the noisy
    histogram holds ([4, 6) cells), none on a cell the density says is empty, and the two dense cells of the ring
    chosen 3 : 1 as their density (a binomial share within 5 standard deviations)."""
    grid = GridSpec(BBOX, 4000.0)
    params = citytrace.CityTraceParams(cell_size_m=4000.0, quadtree_levels=0, end_edges=(0, 2, 4, 6, 8))
    geometry = citytrace.geometry_of(grid, params)
    n_cols, n = geometry.model.n_cols, geometry.model.n_cells
    start = (geometry.model.n_rows // 2) * n_cols + n_cols // 2
    assert geometry.usable[start]
    end = np.zeros(len(params.end_edges))
    end[2] = 1e6
    density = np.full(n, -1.0)  # empty but the start and two cells of the ring: 4 columns east; 5 rows on, 5 west
    density[[start + 4, start + 5 * n_cols - 5]] = [3e6, 1e6]
    density[start] = 1e6
    ends = end_cells(_model(params, grid, end=end, density=density), np.full(4000, start), np.random.default_rng(4))
    assert set(ends) == {start + 4, start + 5 * n_cols - 5}
    share = np.mean(ends == start + 4)
    assert abs(share - 0.75) <= 5 * np.sqrt(0.75 * 0.25 / len(ends))
    # on a grid of a few cells no cell lies 4 to 6 cells away: every record ends where it starts
    small = GridSpec(BBOX, 64000.0)
    coarse = replace(params, cell_size_m=64000.0)
    model_grid = citytrace.geometry_of(small, coarse).model
    assert max(model_grid.n_cols, model_grid.n_rows) <= 4
    n_small = model_grid.n_cells
    starts = np.arange(n_small)
    np.testing.assert_array_equal(
        end_cells(_model(coarse, small, end=end, density=np.ones(n_small)), starts, np.random.default_rng(5)), starts)


def test_the_end_histogram_counts_each_records_start_to_end_distance_per_object(prepared) -> None:
    grid = GridSpec(BBOX, 2000.0)
    params = citytrace.CityTraceParams()
    geometry = citytrace.geometry_of(grid, params)
    taxi = prepared.groupby("object_id")["traj_id"].nunique().idxmax()
    mine = prepared[prepared["object_id"] == taxi].sort_values(["traj_id", "seq"])
    counts = citytrace.count_points(mine, geometry, params)
    ends = mine.groupby("traj_id")[["x", "y"]].agg(["first", "last"])
    first = geometry.model.cell_of(ends[("x", "first")].to_numpy(), ends[("y", "first")].to_numpy())
    last = geometry.model.cell_of(ends[("x", "last")].to_numpy(), ends[("y", "last")].to_numpy())
    n_cols = geometry.model.n_cols
    dist = np.maximum(np.abs(first % n_cols - last % n_cols), np.abs(first // n_cols - last // n_cols))
    expected = np.bincount(np.searchsorted(params.end_edges, dist, side="right") - 1,
                           minlength=len(params.end_edges)) / len(dist)
    np.testing.assert_allclose(counts.end, expected, atol=1e-12)


def test_block_directions_steer_the_fine_walk_and_the_density_bars_empty_cells() -> None:
    grid = GridSpec(BBOX, 16000.0)
    params = citytrace.CityTraceParams(cell_size_m=8000.0, quadtree_levels=0, moves_level=1, prior_weight=0.0)
    geometry = citytrace.geometry_of(grid, params)
    n = geometry.model.n_cells
    _, n_blocks = block_index(geometry.model.n_cols, geometry.model.n_rows, 1)
    moves = np.zeros((n_blocks, 8))
    moves[:, 2] = 5.0  # every block's traffic goes in direction 2 only
    density = np.ones(n)
    density[0] = -3.0  # a cell the noisy density says is empty
    model = _model(params, grid, moves=moves.ravel(), density=density)
    shares = direction_shares(model)
    np.testing.assert_allclose(shares.sum(axis=1), 1.0)
    assert (shares[:, 2] == 1.0).all()  # κ = 0: the clipped counts alone
    w = move_weights(model)
    assert (w[:, [0, 1, 3, 4, 5, 6, 7]] == 0).all() and (w[:, 2] > 0).any()
    from mechanisms.dpt import Hierarchy
    nxt, inside = Hierarchy(geometry.model.n_cols, geometry.model.n_rows, 1).move(
        0, np.repeat(np.arange(n), 8), np.tile(np.arange(8), n))
    into_empty = (nxt.reshape(n, 8) == 0) & inside.reshape(n, 8)
    assert (w[into_empty] == 0).all()


def test_a_record_lasts_its_pace_times_its_moves_and_no_segment_beats_the_speed_bound() -> None:
    grid = GridSpec(BBOX, 2000.0)
    params = citytrace.CityTraceParams(step_edges=(0, 0.5, 1, 2), max_speed_kmh=80.0)
    model = _model(params, grid, step=np.array([1.0, 1.0, 1.0, 0.5]))
    rng = np.random.default_rng(4)
    n_moves = np.array([0, 1, 5, 30])
    pace = np.array([50.0, 60.0, 20.0, 90.0])
    times = step_times(model, n_moves, pace, rng)
    offsets = np.r_[0, np.cumsum(n_moves + 1)]
    assert (times[offsets[:-1]] == 0).all()
    np.testing.assert_allclose(np.add.reduceat(times, offsets[:-1]), pace * n_moves)
    # points: a straight walk east on the model grid, far faster than 80 km/h at its drawn times
    geometry = citytrace.geometry_of(grid, params)
    start = geometry.model.n_cols * (geometry.model.n_rows // 2) + geometry.model.n_cols // 2
    cells = np.concatenate([start + np.arange(k + 1) for k in n_moves])
    synth = Synthetic(offsets, cells, np.array([0.0, 3600.0, 86400.0, 6 * 86400.0]), pace, times)
    points = to_points(synth, NoisyModel(params, geometry, {}), grid, TDRIVE_WINDOW, rng)
    start_t, end_t = TDRIVE_WINDOW.start, TDRIVE_WINDOW.end
    assert (points["t"] >= start_t).all() and (points["t"] < end_t).all()  # the last one moved to end inside
    same = points["traj_id"].eq(points["traj_id"].shift()).to_numpy()[1:]
    dist = np.hypot(np.diff(points["x"].to_numpy()), np.diff(points["y"].to_numpy()))[same]
    dt = np.diff(points["t"].astype("int64").to_numpy() / 1e9)[same]
    assert (dt > 0).all() and (dist / dt * 3.6 <= 80.0 + 1e-6).all()
    assert set(points.groupby("traj_id")["t"].min().dt.day) == {2, 3, 8}  # the start days: 2, 3 and 8 Feb


def test_densified_records_keep_their_path_duration_and_speeds_with_points_at_most_the_spacing_apart() -> None:
    # two records: 0 -> 1000 m east in 100 s then 0 m in 50 s (a stop); 0 -> 300 m north in 30 s
    traj = np.array([0, 0, 0, 1, 1])
    seconds = np.array([0.0, 100.0, 150.0, 1000.0, 1030.0])
    x = np.array([0.0, 1000.0, 1000.0, 5.0, 5.0])
    y = np.array([0.0, 0.0, 0.0, 0.0, 300.0])
    out_traj, seq, t, xs, ys = densify(traj, seconds, x, y, 250.0)
    np.testing.assert_array_equal(out_traj, [0, 0, 0, 0, 0, 0, 1, 1, 1])  # ⌈1000/250⌉ = 4, 1 (a stop), ⌈300/250⌉ = 2
    np.testing.assert_array_equal(seq, [0, 1, 2, 3, 4, 5, 0, 1, 2])
    np.testing.assert_allclose(xs, [0, 250, 500, 750, 1000, 1000, 5, 5, 5])
    np.testing.assert_allclose(ys, [0, 0, 0, 0, 0, 0, 0, 150, 300])
    np.testing.assert_allclose(t, [0, 25, 50, 75, 100, 150, 1000, 1015, 1030])  # each segment's speed kept
    same = out_traj[1:] == out_traj[:-1]
    assert (np.hypot(np.diff(xs), np.diff(ys))[same] <= 250.0).all()


def test_noise_scales_are_sensitivity_over_the_epsilon_of_each_part_and_level() -> None:
    params = citytrace.CityTraceParams(epsilon=2.0, cell_size_m=16000.0, quadtree_levels=2, max_records_per_object=20)
    geometry = citytrace.geometry_of(GridSpec(BBOX, 16000.0), params)
    _, n_blocks = block_index(geometry.model.n_cols, geometry.model.n_rows, params.moves_level)
    shapes = {"records": 1, "length": len(params.length_edges), "end": len(params.end_edges),
              "density": geometry.model.n_cells, "moves": n_blocks * 8, "weekday": 7,
              "hour": geometry.region.n_cells * 24, "pace": len(params.pace_edges_s), "step": len(params.step_edges)}
    zeros = CityTraceCounts(**{f.name: 0.0 if f.name == "records" else np.zeros(shapes[f.name])
                               for f in fields(CityTraceCounts)})
    rng = np.random.default_rng(11)
    draws = [citytrace.fit(zeros, geometry, params, rng).noisy for _ in range(300)]
    budget = params.budget()
    expected = {part: (20.0 if part == "records" else 1.0) / budget[part] for part in citytrace.PARTS}
    sizes = [block_index(geometry.model.n_cols, geometry.model.n_rows, k)[1] for k in range(3)]
    bounds = np.r_[0, np.cumsum(sizes)]
    for part in citytrace.PARTS:
        if part == "density":
            for k, eps_k in enumerate(params.level_epsilons()):
                noise = np.concatenate([d[part][bounds[k]:bounds[k + 1]] for d in draws])
                # E|Laplace(b)| = b, sd(|X|) = b: the mean of n draws is within 5 b / sqrt(n) of b
                assert abs(np.abs(noise).mean() - 1 / eps_k) <= 5 / eps_k / np.sqrt(len(noise)), k
            continue
        assert params.scale(part) == expected[part]
        noise = np.concatenate([d[part] for d in draws])
        assert abs(np.abs(noise).mean() - expected[part]) <= 5 * expected[part] / np.sqrt(len(noise)), part


def test_a_spec_without_a_bounded_window_is_refused_before_the_release() -> None:
    spec = ReleaseSpec.from_dict(read_spec_file(example_spec_file("citytrace")))
    mech = CityTrace()
    mech.check_spec(spec, mech.parse_params(spec.params))  # the example's week: its timestamps go there
    with pytest.raises(ParameterError, match="window") as err:
        mech.check_spec(replace(spec, window_end=None), mech.parse_params(spec.params))
    assert err.value.where == "window"
    g = mech.guarantee(mech.parse_params(spec.params))
    assert spec.mechanism == "citytrace" and g.privacy_unit == "one object" and g.epsilon == 5.0


def test_adapter_on_dask_matches_the_in_memory_counts_and_leaks_no_true_count(dask_client, tdrive_prepared) -> None:
    futures, grid, frame = tdrive_prepared(40)
    adapter = CityTrace()
    params = adapter.parse_params({"epsilon": 5.0})
    assert adapter.max_records_per_object(params) is None
    out = protect.run(adapter, dask_client, futures, PublicInputs(grid, window=TDRIVE_WINDOW), params,
                      np.random.default_rng(8))
    meta = out.metadata
    assert meta["mechanism"] == "citytrace" and meta["params"] == params.to_dict()
    assert meta["released_records"] == out.points["traj_id"].nunique() == round(meta["noisy_records"])
    assert math.fsum(meta["epsilon_parts"].values()) == pytest.approx(5.0)
    true_records = float(np.minimum(frame.groupby("object_id")["traj_id"].nunique(), 24).sum())
    assert meta["noisy_records"] != true_records
    assert "seed" not in str(meta).lower()
    assert out.points["t"].between(TDRIVE_WINDOW.start, TDRIVE_WINDOW.end, inclusive="left").all()
    whole = citytrace.count_points(frame, citytrace.geometry_of(grid, params), params)
    parts = [citytrace.count_points(p, citytrace.geometry_of(grid, params), params)
             for p in dask_client.gather(futures)]
    merged = parts[0].add(parts[1])
    for f in fields(CityTraceCounts):
        np.testing.assert_allclose(getattr(merged, f.name), getattr(whole, f.name), atol=1e-9)


def test_a_long_record_at_a_slow_pace_is_sped_up_to_last_at_most_max_duration() -> None:
    # every record drawn with 300 fine moves at the slowest pace (the open bin from 1,800 s per move): 150 h
    params = citytrace.CityTraceParams(epsilon=1e4, cell_size_m=8000.0, quadtree_levels=1, n_synthetic=50,
                                       max_duration_s=86400.0)
    geometry = citytrace.geometry_of(GridSpec(BBOX, 8000.0), params)
    _, n_blocks = block_index(geometry.model.n_cols, geometry.model.n_rows, params.moves_level)
    length, pace, weekday = np.zeros(len(params.length_edges)), np.zeros(len(params.pace_edges_s)), np.ones(7)
    length[-1] = pace[-1] = 1e3
    counts = CityTraceCounts(records=50.0, length=length, end=np.ones(len(params.end_edges)),
                             density=np.ones(geometry.model.n_cells), moves=np.ones(n_blocks * 8), weekday=weekday,
                             hour=np.ones(geometry.region.n_cells * 24), pace=pace, step=np.ones(len(params.step_edges)))
    model = citytrace.fit(counts, geometry, params, np.random.default_rng(2))
    synth = synthesize_from_model(model, TDRIVE_WINDOW, np.random.default_rng(3))
    n_moves = np.diff(synth.offsets) - 1
    assert (n_moves >= 300).all()
    assert (synth.pace_s * n_moves <= 86400.0 + 1e-6).all() and synth.pace_s.max() < 1800.0
