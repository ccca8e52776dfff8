"""The shared core: release spec, grid, segmentation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trajpub.errors import ParameterError
from trajpub.grid import GridSpec
from trajpub.segment import cell_sequences, keep_trajectories, segment, to_grid
from trajpub.spec import ReleaseSpec

BEIJING = (115.4, 39.4, 117.6, 41.1)


def test_spec_refuses_unknown_keys_naming_them_and_the_allowed_ones():
    with pytest.raises(ParameterError, match="unknown parameter.*colour.*allowed: .*bbox") as err:
        ReleaseSpec.from_dict({"dataset": "d", "bbox": BEIJING, "colour": "red"})
    assert err.value.where == "release spec"
    with pytest.raises(ParameterError, match="time_gap_minuts") as err:
        ReleaseSpec.from_dict({"dataset": "d", "bbox": BEIJING, "prepare": {"time_gap_minuts": 5}})
    assert err.value.where == "prepare"


@pytest.mark.parametrize("name", ["Tdrive", "1abc", "a-b", "a" * 41, "x; DROP TABLE raw.points", "", "taxi\n"])
def test_spec_refuses_dataset_names_that_are_not_plain_identifiers(name):
    with pytest.raises(ParameterError, match="dataset name"):
        ReleaseSpec.from_dict({"dataset": name, "bbox": BEIJING})


def test_seed_only_in_test_mode_and_never_in_the_stored_record(monkeypatch):
    monkeypatch.delenv("TRAJPUB_TEST_MODE", raising=False)
    with pytest.raises(ParameterError, match="test mode"):
        ReleaseSpec.from_dict({"dataset": "d", "bbox": BEIJING, "seed": 1})
    monkeypatch.setenv("TRAJPUB_TEST_MODE", "1")
    spec = ReleaseSpec.from_dict({"dataset": "d", "bbox": BEIJING, "seed": 1, "window_start": "2008-02-02"})
    record = spec.to_record()
    assert "seed" not in record and record["window_start"] == "2008-02-02T00:00:00+00:00"


def test_grid_cells_round_trip_and_distances_are_metric():
    grid = GridSpec(BEIJING, 1000.0)
    rng = np.random.default_rng(0)
    lon, lat = rng.uniform(115.5, 117.5, 500), rng.uniform(39.5, 41.0, 500)
    x, y = grid.project(lon, lat)
    cells = grid.cell_of(x, y)
    assert (cells >= 0).all() and (cells < grid.n_cells).all()
    cx, cy = grid.project(*grid.cell_centre(cells))
    # a point is within half a cell diagonal of its cell's centre
    assert np.max(np.hypot(x - cx, y - cy)) <= 1000 * np.sqrt(2) / 2 + 1e-6
    # 0.01 degree of latitude is about 1,112 m anywhere
    _, y0 = grid.project([116.5], [40.0])
    _, y1 = grid.project([116.5], [40.01])
    assert abs((y1 - y0)[0] - 1112) < 5
    assert grid.cell_of(*grid.project([120.0], [40.0]))[0] == -1


def test_grid_refuses_bad_bbox_and_cell_size():
    with pytest.raises(ParameterError, match="bbox"):
        GridSpec((117.6, 39.4, 115.4, 41.1), 1000)
    with pytest.raises(ParameterError, match="positive"):
        GridSpec(BEIJING, 0)


def _points(rows):
    df = pd.DataFrame(rows, columns=["object_id", "t", "lon", "lat"])
    df["t"] = pd.to_datetime(df["t"], utc=True)
    return df


def test_segment_splits_on_gap_day_and_object():
    df = _points([
        ("a", "2008-02-02 10:00", 116.4, 39.9), ("a", "2008-02-02 10:10", 116.41, 39.9),
        ("a", "2008-02-02 11:00", 116.42, 39.9),   # 50 min gap: new trajectory
        ("a", "2008-02-02 23:55", 116.42, 39.9), ("a", "2008-02-03 00:05", 116.43, 39.9),  # midnight
        ("b", "2008-02-02 10:05", 116.40, 39.9),
    ])
    out = segment(df, time_gap_s=30 * 60, split_by_day=True)
    assert out.groupby("traj_id").size().tolist() == [2, 1, 1, 1, 1]
    assert out.groupby("traj_id")["seq"].apply(list).tolist() == [[0, 1], [0], [0], [0], [0]]
    assert segment(df, 30 * 60, split_by_day=False)["traj_id"].nunique() == 4


def test_keep_trajectories_min_points_and_first_records_per_object():
    df = segment(_points([(o, f"2008-02-0{d} 10:0{m}", 116.4, 39.9) for o in "ab" for d in (2, 3, 4)
                          for m in (0, 1)] + [("c", "2008-02-02 10:00", 116.4, 39.9)]), 1800, True)
    kept = keep_trajectories(df, min_points=2, max_per_object=2)
    assert kept.groupby("object_id")["traj_id"].nunique().to_dict() == {"a": 2, "b": 2}
    assert kept.loc[kept.object_id == "a", "t"].dt.day.unique().tolist() == [2, 3]  # the first two days


def test_cell_sequences_collapse_repeats_within_a_trajectory_only():
    df = pd.DataFrame({"traj_id": [1, 1, 1, 1, 2, 2], "cell": [5, 5, 6, 5, 5, 5]})
    ids, offsets, cells = cell_sequences(df)
    assert ids.tolist() == [1, 2] and offsets.tolist() == [0, 3, 4] and cells.tolist() == [5, 6, 5, 5]
    grid = GridSpec(BEIJING, 1000.0)
    assert "cell" in to_grid(_points([("a", "2008-02-02", 116.4, 39.9)]), grid)


def test_spec_refuses_non_numeric_timeouts_and_non_utf8_files(tmp_path):
    """Findings F2 and F5 of bench/GOVERNANCE_RESULTS.md: clear errors, no traceback."""
    from trajpub.spec import read_spec_file

    for name in ("approval_timeout_s", "queue_timeout_s", "time_precision_s"):
        with pytest.raises(ParameterError, match=f"{name} must be a positive number of seconds, got 'abc'"):
            ReleaseSpec.from_dict({"dataset": "d", "bbox": [0, 0, 1, 1], name: "abc"})
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"dataset: \xff\xfe\n")
    with pytest.raises(ParameterError, match="not UTF-8"):
        read_spec_file(path)


@pytest.mark.parametrize("gate_policy", [
    {"attacks": {"known_points": {"max_risk": 0.9}}},  # the requester writes the gate
    "/etc/passwd",  # ... or points it at any file
    "nonsense.yaml",
    {"name": "default", "version": 0},
])
def test_a_spec_cannot_set_or_point_at_its_own_gate_policy(gate_policy):
    """A spec may only name a registered policy; refused at parse, before any budget."""
    from tasks.protect import parse_spec

    with pytest.raises(ParameterError, match="gate_policy") as err:
        parse_spec({"dataset": "d", "bbox": [0, 0, 1, 1], "gate_policy": gate_policy, "params": {"epsilon": 1.0}})
    assert "\n" not in str(err.value)


def test_a_spec_may_name_a_registered_policy():
    spec = ReleaseSpec.from_dict({"dataset": "d", "bbox": [0, 0, 1, 1], "gate_policy": "strict_points"})
    assert spec.gate_policy == {"name": "strict_points", "version": None}
    spec = ReleaseSpec.from_dict({"dataset": "d", "bbox": [0, 0, 1, 1],
                                  "gate_policy": {"name": "strict_points", "version": 3}})
    assert spec.to_record()["gate_policy"] == {"name": "strict_points", "version": 3}


def test_an_unusable_time_format_is_a_parameter_error():
    """Finding F1: an unknown strftime directive is refused with the option's name."""
    from trajpub.source_text import parse_times

    with pytest.raises(ParameterError, match="not a usable strftime format"):
        parse_times(pd.Series(["2008-02-02"]), "%Q", "UTC", "option time_format")
