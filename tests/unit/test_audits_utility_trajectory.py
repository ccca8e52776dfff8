"""audits.trajectory_utility, the synthetic-trajectory metrics: hand-checkable cases."""

import math

import numpy as np
import pandas as pd
import pytest

from audits.circles import circle_counts
from audits.trajectory_utility import (
    TRAJECTORY_METRICS,
    circle_query_re,
    city_grid_size,
    duration_jsd,
    outside_bbox_share,
    segment_speeds,
    speed_jsd,
    start_hour_jsd,
    trajectory_metrics,
    transition_jsd,
)

LN2 = math.log(2)
BBOX = (116.0, 39.0, 117.0, 40.0)


def frame(trajs: dict[int, list[tuple[float, float]]], start_hour: int = 8, step_min: int = 1) -> pd.DataFrame:
    t0 = pd.Timestamp("2008-02-02", tz="UTC") + pd.Timedelta(hours=start_hour)
    rows = [(k, i, lon, lat, t0 + pd.Timedelta(minutes=i * step_min))
            for k, pts in trajs.items() for i, (lon, lat) in enumerate(pts)]
    return pd.DataFrame(rows, columns=["traj_id", "seq", "lon", "lat", "t"])


# raw box lon 116.0-116.32, lat 39.0-39.32: on the 32 x 32 grid a cell is 0.01 degree wide
RAW = frame({0: [(116.0, 39.0), (116.005, 39.0), (116.015, 39.0), (116.32, 39.32)],
             1: [(116.015, 39.0), (116.005, 39.0)]})


def test_transition_jsd_counts_moves_between_cells_only():
    assert transition_jsd(RAW, RAW) == 0.0
    # RAW moves: 0->1, 1->1023 and 1->0 (the repeat in cell 0 collapsed); this release has 0->1 and 1->0 only
    release = frame({5: [(116.0, 39.0), (116.015, 39.0)], 6: [(116.015, 39.0), (116.001, 39.0)]})
    p, q = np.array([1, 1, 1]) / 3, np.array([1, 0, 1]) / 2
    m = (p + q) / 2
    expected = 0.5 * np.sum(p * np.log(p / m)) + 0.5 * np.sum(q[q > 0] * np.log(q[q > 0] / m[q > 0]))
    assert transition_jsd(RAW, release) == pytest.approx(expected)
    assert transition_jsd(frame({0: [(116.0, 39.0), (116.015, 39.0)], 1: [(116.32, 39.32), (116.0, 39.0)]}),
                          frame({0: [(116.015, 39.0), (116.0, 39.0)]})) == pytest.approx(LN2)  # no shared move


def test_circle_counts_a_crossing_segment_and_each_trajectory_once():
    xy = np.array([[-1000.0, 500.0], [1000.0, 500.0],  # trajectory 0 crosses the circle, no vertex inside
                   [10.0, 0.0], [20.0, 0.0], [30.0, 0.0],  # trajectory 1: three points inside, counted once
                   [2000.0, 2000.0], [3000.0, 3000.0]])  # trajectory 2: outside
    codes = np.array([0, 0, 1, 1, 1, 2, 2])
    assert circle_counts(xy, codes, np.array([[0.0, 0.0]]), np.array([600.0])).tolist() == [2]
    assert circle_counts(xy, codes, np.array([[0.0, 0.0]]), np.array([400.0])).tolist() == [1]
    # the last point of trajectory 0 and the first of 1 are not a segment
    assert circle_counts(xy[[1, 2]], np.array([0, 1]), np.array([[500.0, 250.0]]), np.array([100.0])).tolist() == [0]


def test_circle_counts_agree_with_every_segment_measured_one_by_one():
    """The compiled loop (trajectory boxes skipped, first hit ends a trajectory) against the definition: the
    distance from the centre to every segment, the projection clamped, on random walks with repeated points."""
    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 40, 60)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    xy = np.cumsum(rng.normal(0, 300, (len(codes), 2)), axis=0) % 20_000
    xy[rng.random(len(xy)) < 0.1] = xy[0]  # repeats: zero-length segments
    centres, radii = rng.uniform(0, 20_000, (50, 2)), rng.uniform(100, 3000, 50)
    expected = []
    for c, r in zip(centres, radii, strict=True):
        hit = set()
        for j in range(len(xy)):
            b = xy[j + 1] if j + 1 < len(xy) and codes[j + 1] == codes[j] else xy[j]
            ab = b - xy[j]
            s = min(max(float((c - xy[j]) @ ab) / max(float(ab @ ab), np.finfo(float).tiny), 0.0), 1.0)
            if math.hypot(*(xy[j] + s * ab - c)) <= r:
                hit.add(codes[j])
        expected.append(len(hit))
    assert circle_counts(xy, codes, centres, radii).tolist() == expected
    assert 0 < sum(expected) < len(sizes) * len(centres)  # the case has circles that hit and ones that miss


def test_circle_query_re_is_zero_for_the_raw_data_and_one_for_a_disjoint_release():
    rng = np.random.default_rng
    assert circle_query_re(RAW, RAW, rng(1)) == 0.0
    # every circle (centre a raw point, radius <= 3 km) holds >= 1 raw trajectory >= the sanity bound 0.02: RE = 1
    far = frame({0: [(116.9, 39.9), (116.95, 39.9)]})
    assert circle_query_re(RAW, far, rng(1)) == 1.0


def test_outside_bbox_share_and_time_metrics():
    release = frame({0: [(116.0, 39.0), (118.0, 39.0), (116.5, 41.0), (116.5, 39.5)]})
    assert outside_bbox_share(release, BBOX) == 0.5
    later = frame({0: [(116.0, 39.0)] * 2, 1: [(116.0, 39.0)] * 2}, start_hour=9)
    assert start_hour_jsd(later, later) == 0.0
    assert start_hour_jsd(RAW, later) == pytest.approx(LN2)
    # durations: RAW 3 min and 1 min (20 buckets of 9 s over [0, 180 s]); 3 min lands in the last bucket
    slow = frame({0: [(116.0, 39.0)] * 4}, step_min=10)
    expected = 0.5 * (0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)) + 0.5 * math.log(1.0 / 0.75)
    assert duration_jsd(RAW, slow) == pytest.approx(expected)


def test_trajectory_metrics_of_the_raw_data_are_perfect_and_untimed_releases_have_no_time_metrics():
    out = trajectory_metrics(RAW.drop(columns="seq"), RAW, BBOX, rng_seed=3)
    assert tuple(out) == TRAJECTORY_METRICS
    assert out["pattern_f1"] == 1.0
    assert all(out[k] == 0.0 for k in TRAJECTORY_METRICS if k != "pattern_f1")
    untimed = trajectory_metrics(RAW, RAW.drop(columns="t"), BBOX, rng_seed=3)
    assert untimed["start_hour_jsd"] is None and untimed["duration_jsd"] is None


def test_segment_speeds_are_distance_over_time_per_trajectory_and_skip_zero_time_steps():
    # 0.01 degree of latitude is 1,111.95 m; the raw mean latitude 39.0 only scales longitude
    raw = frame({0: [(116.0, 39.0), (116.0, 39.01), (116.0, 39.03)]}, step_min=1)
    release = raw.assign(t=raw["t"].where(raw["seq"] != 2, raw["t"].iloc[1]))  # its last step takes 0 s
    raw_speeds, rel_speeds = segment_speeds(raw, release)
    metres = 6_371_008.8 * math.radians(0.01)
    np.testing.assert_allclose(raw_speeds, [metres / 60 * 3.6, 2 * metres / 60 * 3.6])
    np.testing.assert_allclose(rel_speeds, [metres / 60 * 3.6])
    assert speed_jsd(raw, raw) == 0.0


def test_the_duration_and_speed_buckets_end_at_a_raw_quantile_so_outliers_do_not_stretch_them():
    # 99 raw records of 10 min and one of 10 h (a glitch); a release of 5 min records
    raw = pd.concat([frame({k: [(116.0, 39.0), (116.01, 39.0)]}, step_min=10) for k in range(99)]
                    + [frame({99: [(116.0, 39.0), (116.01, 39.0)]}, step_min=600)], ignore_index=True)
    release = pd.concat([frame({k: [(116.0, 39.0), (116.01, 39.0)]}, step_min=5) for k in range(100)],
                        ignore_index=True)
    assert duration_jsd(raw, release) == pytest.approx(0.0, abs=0.01)  # [0, 10 h] / 20: 5 and 10 min share a bucket
    assert duration_jsd(raw, release, quantile=0.9) > 0.6  # [0, 10 min] / 20: they do not


def test_trajectory_metrics_at_a_finer_grid_see_moves_the_32_grid_does_not():
    # both trajectories stay in one 32-grid cell; on 128 x 128 the release moves east, the raw data north
    raw = frame({0: [(116.0, 39.0), (116.0, 39.005)], 1: [(116.32, 39.32), (116.3, 39.3)]})
    release = frame({0: [(116.0, 39.0), (116.005, 39.0)], 1: [(116.32, 39.32), (116.3, 39.3)]})
    coarse, fine = (trajectory_metrics(raw, release, BBOX, 0, g) for g in (32, 128))
    assert coarse["transition"] == 0.0 and fine["transition"] > 0.3
    assert coarse["pattern_f1"] == 1.0 and fine["pattern_f1"] == 0.5


def test_city_grid_size_counts_cells_of_about_one_and_a_half_km_across_the_raw_box():
    raw = frame({0: [(116.0, 39.0), (116.0, 39.9)]})  # 100.1 km north-south, nothing east-west
    assert city_grid_size(raw) == 67 and city_grid_size(raw, 1000.0) == 100 and city_grid_size(raw, 1e6) == 6
