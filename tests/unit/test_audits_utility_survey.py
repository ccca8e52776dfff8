"""Survey metrics (audits.point_utility, audits.patterns): INF, FFP and support error, point errors (aligned,
Hausdorff, DTW), the exact pattern codes they rest on; hand-computed small cases."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import directed_hausdorff

from audits.patterns import frequent_patterns, pattern_codes
from audits.planar import planar_coordinates
from audits.point_utility import dtw_distance, information_loss, point_error, point_errors
from trajpub.errors import InputError, ParameterError

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def points(rows: list[tuple], columns=("object_id", "traj_id", "seq", "x", "y", "s")) -> pd.DataFrame:
    """Rows (object, traj, seq, x, y, seconds after T0); lon/lat present but unused (x, y take precedence)."""
    frame = pd.DataFrame(rows, columns=list(columns))
    frame["t"] = T0 + pd.to_timedelta(frame.pop("s"), unit="s")
    frame["lon"], frame["lat"] = 0.0, 0.0
    return frame


# --- pattern codes --------------------------------------------------------------------------------------------


def test_pattern_codes_are_equal_exactly_for_equal_windows():
    rng = np.random.default_rng(4)
    seqs = [rng.integers(0, 3, rng.integers(1, 9)).tolist() for _ in range(60)]
    offsets = np.r_[0, np.cumsum([len(s) for s in seqs])]
    codes = pattern_codes(np.concatenate(seqs), offsets, [1, 2, 4])
    for length, (seq_index, code) in codes.items():
        windows = [tuple(s[i:i + length]) for s in seqs for i in range(len(s) - length + 1)]
        assert len(windows) == len(code)
        assert [seqs[j] for j in seq_index] == [s for s in seqs for _ in range(len(s) - length + 1)]
        by_window, by_code = {}, {}
        for w, c in zip(windows, code, strict=True):
            assert by_window.setdefault(w, c) == c and by_code.setdefault(c, w) == w  # a bijection


# --- INF ------------------------------------------------------------------------------------------------------

RAW_INF = points([("A", 0, 0, 0.0, 0.0, 0), ("A", 0, 1, 100.0, 0.0, 60), ("A", 0, 2, 200.0, 0.0, 120),
                  ("A", 0, 3, 300.0, 0.0, 180), ("A", 1, 0, 0.0, 500.0, 600), ("A", 1, 1, 0.0, 600.0, 660),
                  ("B", 2, 0, 900.0, 900.0, 0), ("B", 2, 1, 950.0, 900.0, 60)])
# A's trajectory 0: two points released unchanged, two moved 3 m; trajectory 1 suppressed; B's points released
# unchanged but under owner A.
RELEASE_INF = points([("A", 0, 0, 0.0, 0.0, 0), ("A", 0, 1, 100.0, 0.0, 60), ("A", 0, 2, 203.0, 0.0, 120),
                      ("A", 0, 3, 300.0, 3.0, 180), ("A", 5, 0, 900.0, 900.0, 0), ("A", 5, 1, 950.0, 900.0, 60)])


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({}, 1 - (2 / 4 + 0 + 0) / 3),  # exact: traj 0 keeps 2 of 4, traj 1 nothing, B's points are not B's
    ({"tolerance_m": 5.0}, 1 - (1 + 0 + 0) / 3),  # the 3 m moves are within tolerance
    ({"match": "any"}, 1 - (2 / 4 + 0 + 1) / 3),  # synthetic convention: any released point counts
    ({"tolerance_m": 5.0, "match": "any"}, 1 - (1 + 0 + 1) / 3),
])
def test_information_loss_hand_cases(kwargs, expected):
    assert information_loss(RAW_INF, RELEASE_INF, **kwargs) == pytest.approx(expected)


def test_information_loss_tolerance_is_a_disc_even_when_a_box_corner_is_nearer():
    # the point at (95, 95) is nearest in the box metric (95 m) but 134 m away; the one at (99, 0) is 99 m away
    raw = points([("A", 0, 0, 0.0, 0.0, 0), ("A", 0, 1, 1000.0, 0.0, 60)])
    release = points([("A", 0, 0, 95.0, 95.0, 0), ("A", 0, 1, 99.0, 0.0, 0)])
    assert information_loss(raw, release, tolerance_m=100.0, tolerance_s=None) == pytest.approx(0.5)
    assert information_loss(raw, release.iloc[:1], tolerance_m=100.0, tolerance_s=None) == 1.0
    # and in time: (0, 0) 200 s late is out of a 100 s window, (60, 0) 90 s late is in
    late = points([("A", 0, 0, 0.0, 0.0, 200), ("A", 0, 1, 60.0, 0.0, 90)])
    assert information_loss(raw, late, tolerance_m=100.0, tolerance_s=100.0) == pytest.approx(0.5)


def test_information_loss_time_tolerance():
    late = RELEASE_INF.assign(t=RELEASE_INF["t"] + pd.Timedelta(seconds=10))  # every released time 10 s late
    assert information_loss(RAW_INF, late) == 1.0
    assert information_loss(RAW_INF, late, tolerance_s=20.0) == pytest.approx(1 - (2 / 4) / 3)
    assert information_loss(RAW_INF, late.assign(t=pd.NaT), tolerance_s=None) == pytest.approx(1 - (2 / 4) / 3)
    assert information_loss(RAW_INF, late.assign(t=pd.NaT)) == 1.0  # no timestamp: never the same time
    assert information_loss(RAW_INF, RAW_INF) == 0.0


def test_information_loss_refuses_bad_input():
    with pytest.raises(InputError, match="object_id"):
        information_loss(RAW_INF, RELEASE_INF.drop(columns="object_id"))
    assert information_loss(RAW_INF, RELEASE_INF.drop(columns="object_id"), match="any") < 1
    with pytest.raises(ParameterError):
        information_loss(RAW_INF, RELEASE_INF, tolerance_m=-1.0)
    with pytest.raises(ParameterError):
        information_loss(RAW_INF, RELEASE_INF, match="owners")


# --- FFP ------------------------------------------------------------------------------------------------------

CENTRES = {0: (0.25, 0.25), 1: (0.75, 0.25), 2: (0.25, 0.75), 3: (0.75, 0.75)}  # 2 x 2 grid cells over [0.25, 0.75]


def cell_tracks(tracks: dict[int, list[int]]) -> pd.DataFrame:
    rows = [{"object_id": f"o{k}", "traj_id": k, "seq": i, "lon": CENTRES[c][0], "lat": CENTRES[c][1]}
            for k, cells in tracks.items() for i, c in enumerate(cells)]
    return pd.DataFrame(rows)


def test_frequent_patterns_hand_case():
    # Raw cell sequences 0-0-1-3 (repeat collapsed: 0-1-3), 0-1, 2-3. Patterns of length 2-3 and their
    # occurrences: (0,1) 2, (1,3) 1, (2,3) 1, (0,1,3) 1. Top 2: (0,1), then the tie at 1 goes to the shorter
    # pattern seen first: (1,3). Release 0-1, 2-3, 2-3: (2,3) 2, (0,1) 1; top 2: (2,3), (0,1).
    # F1 = 2 * 1 / (2 + 2) = 1/2; support error over raw's top 2: (|2-1|/2 + |1-0|/1) / 2 = 3/4.
    raw = cell_tracks({0: [0, 0, 1, 3], 1: [0, 1], 2: [2, 3]})
    release = cell_tracks({0: [0, 1], 1: [2, 3], 2: [2, 3]})
    out = frequent_patterns(raw, release, grid_size=2, min_length=2, max_length=3, top_k=2)
    assert out == {"ffp": 0.5, "support_error": 0.75}
    assert frequent_patterns(raw, raw, grid_size=2, max_length=3, top_k=2) == {"ffp": 1.0, "support_error": 0.0}


def test_frequent_patterns_of_a_disjoint_release():
    raw = cell_tracks({0: [0, 1], 1: [0, 1]})
    release = cell_tracks({0: [2, 3], 1: [3, 2]})
    assert frequent_patterns(raw, release, grid_size=2) == {"ffp": 0.0, "support_error": 1.0}
    too_short = cell_tracks({0: [2], 1: [3, 3]})  # no pattern of length >= 2 after collapsing repeats
    assert frequent_patterns(raw, too_short, grid_size=2)["ffp"] == 0.0


def test_frequent_patterns_refuse_bad_parameters():
    raw = cell_tracks({0: [0, 1]})
    for kwargs in ({"grid_size": 0}, {"min_length": 3, "max_length": 2}, {"top_k": 0}):
        with pytest.raises(ParameterError):
            frequent_patterns(raw, raw, **kwargs)


# --- point errors ---------------------------------------------------------------------------------------------


def test_point_errors_hand_cases():
    raw = points([("A", 0, 0, 0.0, 0.0, 0), ("A", 0, 1, 10.0, 0.0, 60), ("B", 1, 0, 50.0, 50.0, 0)])
    shifted = raw.assign(x=raw["x"] + 3.0, y=raw["y"] + 4.0)
    assert point_errors(raw, shifted, "aligned").to_dict() == {0: 5.0, 1: 5.0}
    assert point_error(raw, shifted, "hausdorff") == pytest.approx(5.0)
    # Hausdorff: the released extra point (10, 6) is 6 m from raw; every raw point is on the release.
    extra = pd.concat([raw[raw["traj_id"] == 0], points([("A", 0, 2, 10.0, 6.0, 120)])], ignore_index=True)
    assert point_errors(raw, extra, "hausdorff").to_dict() == {0: 6.0}


def test_records_without_their_raw_trajectory_are_left_out():
    raw = points([("A", 0, 0, 0.0, 0.0, 0), ("A", 0, 1, 10.0, 0.0, 60)])
    release = pd.concat([raw, points([("A", 7, 0, 0.0, 0.0, 0), ("dummy", 0, 0, 1.0, 1.0, 0)])])
    assert point_errors(raw, release, "aligned").to_dict() == {0: 0.0}
    with pytest.raises(InputError, match="traj_id"):
        point_errors(raw, raw.assign(traj_id=9))
    with pytest.raises(ParameterError):
        point_errors(raw, raw, "frechet")


def test_dtw_hand_case():
    # Cost d(a_i, b_j): a = (0,0), (1,0), (2,0); b = (0,0), (2,0). Best path (a0,b0), (a1,b0) or (a1,b1),
    # (a2,b1): 0 + 1 + 0 = 1.
    assert dtw_distance(np.array([[0, 0], [1, 0], [2, 0]]), np.array([[0, 0], [2, 0]])) == 1.0


def test_dtw_equals_the_textbook_recursion():
    def reference(a, b):
        acc = np.full((len(a) + 1, len(b) + 1), math.inf)
        acc[0, 0] = 0.0
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                acc[i, j] = math.dist(a[i - 1], b[j - 1]) + min(acc[i - 1, j], acc[i, j - 1], acc[i - 1, j - 1])
        return acc[-1, -1]

    rng = np.random.default_rng(9)
    for n, m in [(1, 1), (1, 5), (7, 3), (12, 12), (20, 9)]:
        a, b = rng.normal(size=(n, 2)), rng.normal(size=(m, 2))
        assert dtw_distance(a, b) == pytest.approx(reference(a, b), rel=1e-12)
        assert dtw_distance(a, b) == pytest.approx(dtw_distance(b, a), rel=1e-12)
    walk = np.cumsum(rng.normal(size=(30, 2)), axis=0)
    assert dtw_distance(walk, walk) == 0.0
    # The diagonal path costs 5 m per point; warping can only do better, and never reaches 0 (every pair of
    # points is at least the shortest distance between the two sets apart).
    shifted = walk + [3.0, 4.0]
    closest = min(math.dist(p, q) for p in walk for q in shifted)
    assert 30 * closest <= dtw_distance(walk, shifted) <= 30 * 5.0


def test_planar_coordinates_prefer_x_y_and_scale_longitude():
    with_xy = points([("A", 0, 0, 7.0, 8.0, 0)])
    raw_xy, _ = planar_coordinates(with_xy, with_xy)
    assert raw_xy.tolist() == [[7.0, 8.0]]
    at_60 = pd.DataFrame({"lon": [0.0, 0.002], "lat": [60.0, 60.0]})
    xy, _ = planar_coordinates(at_60, at_60)
    north = pd.DataFrame({"lon": [0.0, 0.0], "lat": [60.0, 60.001]})
    _, xy_n = planar_coordinates(at_60, north)
    # 0.002 degrees of longitude at latitude 60 are 0.001 degrees of latitude: about 111 m either way.
    assert xy[1, 0] - xy[0, 0] == pytest.approx(xy_n[1, 1] - xy_n[0, 1], rel=1e-3)


def test_hausdorff_equals_scipy_and_records_can_be_sampled():
    rng = np.random.default_rng(12)
    rows_raw, rows_rel = [], []
    for k in range(6):
        a, b = rng.normal(size=(25, 2)) * 100, rng.normal(size=(18, 2)) * 100
        rows_raw += [("o", k, i, x, y, 0) for i, (x, y) in enumerate(a)]
        rows_rel += [("o", k, i, x, y, 0) for i, (x, y) in enumerate(b)]
        expected = max(directed_hausdorff(a, b)[0], directed_hausdorff(b, a)[0])
        got = point_errors(points(rows_raw[-25:]), points(rows_rel[-18:]), "hausdorff").iloc[0]
        assert got == pytest.approx(expected, rel=1e-12)
    raw, release = points(rows_raw), points(rows_rel)
    full = point_errors(raw, release, "dtw")
    some = point_errors(raw, release, "dtw", max_records=3, rng=np.random.default_rng(0))
    assert len(full) == 6 and len(some) == 3 and some.to_dict().items() <= full.to_dict().items()
    with pytest.raises(ParameterError):
        point_errors(raw, release, "dtw", max_records=3)  # sampling needs an explicit generator


def test_diameters_and_neighbours_in_blocks_equal_the_whole_computation(monkeypatch):
    """A city's frame is processed in blocks of points (long trajectories' hulls, k-d tree queries): blocks of a
    few points, cutting between and after trajectories, give exactly what one block gives."""
    from audits import neighbours, utility

    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 200, 40)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    xy = rng.normal(0, 1000, (len(codes), 2))
    xy[rng.random(len(xy)) < 0.2] = xy[0]  # repeated points
    other = rng.normal(0, 1000, (500, 2))
    args = (xy, np.zeros(len(xy)), np.zeros(len(xy), np.int64), other, np.zeros(len(other)),
            np.zeros(len(other), np.int64), 60.0, None)
    whole, near = utility._diameters(xy, codes), neighbours.has_neighbour(*args)
    assert (sizes > 64).any() and 0 < near.sum() < len(near)
    monkeypatch.setattr(utility, "_DIAMETER_POINTS_PER_BLOCK", 150)
    monkeypatch.setattr(neighbours, "_NEIGHBOUR_QUERY_BLOCK", 77)
    assert np.array_equal(utility._diameters(xy, codes), whole)
    assert np.array_equal(neighbours.has_neighbour(*args), near)
