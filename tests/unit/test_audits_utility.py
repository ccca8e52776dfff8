"""audits.utility: JSD properties, histogram metrics on hand-built trajectories, Chen et al.'s count queries."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon, pdist

from audits.point_utility import moved_share, retained_share
from audits.utility import (
    _diameters,
    count_query_re,
    density_jsd,
    diameter_error,
    jsd,
    length_jsd,
    random_count_queries,
    trip_error,
)
from trajpub.errors import InputError, ParameterError

# JSD([1/2, 1/2] || [1, 0]) = 1/2 (1/2 ln(2/3) + 1/2 ln 2) + 1/2 ln(4/3), worked out once and reused by the
# hand-built cases below, which all reduce to these two histograms.
HALF_VS_ONE = 0.5 * (0.5 * math.log(2 / 3) + 0.5 * math.log(2)) + 0.5 * math.log(4 / 3)


def trajectories(coords: dict[int, list[tuple[float, float]]], columns: tuple[str, str] = ("x", "y")):
    """A frame with one trajectory per key; points in the given order get seq 0, 1, ..."""
    rows = [{"object_id": f"o{k}", "traj_id": k, "seq": i, columns[0]: a, columns[1]: b}
            for k, pts in coords.items() for i, (a, b) in enumerate(pts)]
    frame = pd.DataFrame(rows)
    frame["t"] = pd.NaT
    if columns == ("x", "y"):
        frame["lon"], frame["lat"] = 0.0, 0.0
    return frame


# --- jsd ------------------------------------------------------------------------------------------------------


def test_jsd_properties():
    rng = np.random.default_rng(0)
    p, q = rng.random(12), rng.random(12)
    assert jsd(p, p) == 0.0
    assert jsd([1, 0, 0], [0, 1, 1]) == pytest.approx(math.log(2), abs=1e-15)
    assert jsd(p, q) == pytest.approx(jsd(q, p), abs=1e-15)
    assert jsd(p, q) == pytest.approx(jsd(3 * p, q / 7), abs=1e-15)  # weights are normalised
    assert jsd(p, q) == pytest.approx(jensenshannon(p, q) ** 2, abs=1e-12)  # scipy gives the square root
    assert jsd([0.5, 0.5], [1, 0]) == pytest.approx(HALF_VS_ONE, abs=1e-15)


@pytest.mark.parametrize(("p", "q"), [([1, 2], [1, 2, 3]), ([0, 0], [1, 1]), ([-1, 2], [1, 1]),
                                      ([math.nan, 1], [1, 1]), ([[1]], [[1]])])
def test_jsd_refuses_non_histograms(p, q):
    with pytest.raises(ParameterError):
        jsd(p, q)


# --- density, length, diameter, trips -------------------------------------------------------------------------


def test_density_jsd():
    raw = pd.DataFrame({"cell": [1, 1, 2, 3]})
    assert density_jsd(raw, raw.sample(frac=1.0, random_state=0)) == 0.0
    assert density_jsd(raw, pd.DataFrame({"cell": [7, 8]})) == pytest.approx(math.log(2))
    # Points off the grid (-1) form their own bin rather than vanishing.
    assert density_jsd(raw, pd.DataFrame({"cell": [1, 1, 2, 3, -1, -1, -1, -1]})) > 0.1
    with pytest.raises(InputError):
        density_jsd(raw, pd.DataFrame({"cell": []}))


def test_length_jsd_points_hand_case():
    # Raw lengths 1 and 4 points, 4 buckets of width 1 over [0, 4]: buckets 1 and 3 (4 is the last).
    # Release lengths 1 and 1: bucket 1 twice.  JSD([1/2, 1/2] || [1, 0]).
    raw = trajectories({0: [(0, 0)], 1: [(0, 0)] * 4})
    release = trajectories({0: [(0, 0)], 1: [(5, 5)]})
    assert length_jsd(raw, release, "points", n_buckets=4) == pytest.approx(HALF_VS_ONE)
    assert length_jsd(raw, raw, "points") == 0.0


def test_length_jsd_distance_uses_seq_order_and_raw_buckets():
    # Travelled distances: raw 9 m ((0,0)-(3,4)-(3,8)) and 20 m; 2 buckets of 10 m -> buckets 0 and 1.
    raw = trajectories({0: [(0, 0), (3, 4), (3, 8)], 1: [(0, 0), (20, 0)]})
    # Release: 9 m and 9 m -> bucket 0 twice.  Rows are shuffled: only seq gives the order.
    release = trajectories({0: [(0, 0), (3, 4), (3, 8)], 1: [(1, 0), (1, 9)]}).sample(frac=1.0, random_state=1)
    assert length_jsd(raw, release, "distance", n_buckets=2) == pytest.approx(HALF_VS_ONE)
    # A release trajectory longer than any raw one lands in the last bucket: 9 m and 500 m -> like raw.
    longer = trajectories({0: [(0, 0), (3, 4), (3, 8)], 1: [(0, 0), (500, 0)]})
    assert length_jsd(raw, longer, "distance", n_buckets=2) == 0.0


def test_length_jsd_distance_in_degrees_uses_metres():
    # Without x/y, lengths are in metres: at latitude 60 a degree of longitude is half a degree of latitude,
    # so 0.002 deg east equals 0.001 deg north (~111 m) and 0.008 deg east equals 0.004 deg north (~445 m).
    raw = trajectories({0: [(0.0, 60.0), (0.0, 60.001)], 1: [(0.0, 60.0), (0.0, 60.004)]}, ("lon", "lat"))
    release = trajectories({0: [(0.0, 60.0), (0.002, 60.0)], 1: [(0.0, 60.0), (0.008, 60.0)]}, ("lon", "lat"))
    assert length_jsd(raw, release, "distance", n_buckets=3) == 0.0  # buckets 0 and 2 on both sides
    degrees_apart = release.assign(lon=release["lon"] / 2)  # the same degrees as raw, half the metres
    assert length_jsd(raw, degrees_apart, "distance", n_buckets=3) > 0.1


def test_diameter_error_hand_case():
    # Raw diameters 2 and 10, 2 buckets of 5: buckets 0 and 1.  Release diameters 2 and 3: bucket 0 twice.
    raw = trajectories({0: [(0, 0), (1, 0), (2, 0)], 1: [(0, 0), (6, 8), (3, 4)]})
    release = trajectories({0: [(0, 0), (0, 2)], 1: [(1, 1), (1, 4), (1, 2)]})
    assert diameter_error(raw, release, n_buckets=2) == pytest.approx(HALF_VS_ONE)
    assert diameter_error(raw, raw) == 0.0


def test_hull_diameter_equals_brute_force():
    rng = np.random.default_rng(5)
    sizes = [1, 2, 3, 64, 65, 300, 1000]
    xy = np.vstack([rng.normal(size=(n, 2)) * rng.uniform(1, 100) for n in sizes])
    xy[-10:] = xy[-11]  # repeated points
    codes = np.repeat(np.arange(len(sizes)), sizes)
    expected = [pdist(xy[codes == i]).max() if n > 1 else 0.0 for i, n in enumerate(sizes)]
    np.testing.assert_allclose(_diameters(xy, codes), expected, rtol=1e-9)
    line = np.column_stack([np.linspace(0, 10, 200), np.linspace(0, 10, 200)])  # collinear: no 2-d hull
    assert _diameters(line, np.zeros(200, dtype=np.int64))[0] == pytest.approx(10 * math.sqrt(2))


def test_batched_brute_force_diameters_are_pdist_bit_for_bit():
    # trajectories of the brute-force sizes, of several lengths (each length is one batch), interleaved with
    # single points: every diameter equals pdist's maximum exactly, not only to a tolerance
    rng = np.random.default_rng(11)
    sizes = [2, 7, 1, 64, 7, 33, 2, 64, 1]
    xy = rng.normal(size=(sum(sizes), 2)) * 1000.0
    codes = np.repeat(np.arange(len(sizes)), sizes)
    expected = [pdist(xy[codes == i]).max() if n > 1 else 0.0 for i, n in enumerate(sizes)]
    assert _diameters(xy, codes).tolist() == expected


def test_trip_error_hand_case():
    # 2 x 2 grid over the raw box [0, 1]^2.  Raw trips: cell 0 -> 3 and cell 1 -> 2.
    raw = trajectories({0: [(0.1, 0.1), (0.5, 0.5), (0.9, 0.9)], 1: [(0.9, 0.1), (0.1, 0.9)]}, ("lon", "lat"))
    # Release trips: 0 -> 3 twice; the second ends outside the box and is clipped into cell 3.
    release = trajectories({0: [(0.1, 0.1), (0.9, 0.9)], 1: [(0.2, 0.1), (5.0, 5.0)]}, ("lon", "lat"))
    assert trip_error(raw, release, grid_size=2) == pytest.approx(HALF_VS_ONE)
    assert trip_error(raw, raw.sample(frac=1.0, random_state=2), grid_size=2) == 0.0
    reversed_trips = raw.assign(seq=-raw["seq"])  # same points, start and end swapped: 3 -> 0 and 2 -> 1
    assert trip_error(raw, reversed_trips, grid_size=2) == pytest.approx(math.log(2))


# --- count queries --------------------------------------------------------------------------------------------

RAW_SEQS = [[1, 2, 3], [1, 2], [2, 3], [4]]
RELEASE_SEQS = [[1, 2], [1], [4], [4], [4]]
QUERIES = [[2, 1, 1], [4], [1, 3]]  # as sets: {1,2}, {4}, {1,3}


def test_count_query_re_zero_for_an_identical_release():
    assert count_query_re(RAW_SEQS, [list(reversed(s)) for s in RAW_SEQS], QUERIES) == 0.0


def test_count_query_re_hand_case_with_the_sanity_bound_active():
    # Q(D):  {1,2} -> 2, {4} -> 1, {1,3} -> 1.   Q(D*): {1,2} -> 1, {4} -> 3, {1,3} -> 0.
    # sanity 0.5: s = 0.5 * |D| = 2 > Q(D) for the last two queries.
    # RE = |1-2|/max(2,2) = 0.5, |3-1|/max(1,2) = 1.0, |0-1|/max(1,2) = 0.5; mean 2/3.
    assert count_query_re(RAW_SEQS, RELEASE_SEQS, QUERIES, sanity=0.5) == pytest.approx(2 / 3)
    # The default s = 0.001 * 4 is below every Q(D): RE = 0.5, 2.0, 1.0; mean 7/6.
    assert count_query_re(RAW_SEQS, RELEASE_SEQS, QUERIES) == pytest.approx(7 / 6)


def test_count_query_re_refuses_empty_input():
    with pytest.raises(ParameterError):
        count_query_re(RAW_SEQS, RELEASE_SEQS, [[1], []])
    with pytest.raises(ParameterError):
        count_query_re(RAW_SEQS, RELEASE_SEQS, QUERIES, sanity=0.0)
    with pytest.raises(InputError):
        count_query_re([], RELEASE_SEQS, QUERIES)


def test_random_count_queries():
    queries = random_count_queries(50, 2000, 6, np.random.default_rng(11))
    assert len(queries) == 2000
    assert all(len(set(q.tolist())) == len(q) and 0 <= q.min() and q.max() < 50 for q in queries)
    # Lengths uniform on 1..6: each length is missed with probability (5/6)^2000, i.e. never.
    assert {len(q) for q in queries} == set(range(1, 7))
    again = random_count_queries(50, 2000, 6, np.random.default_rng(11))
    assert all(np.array_equal(a, b) for a, b in zip(queries, again, strict=True))
    with pytest.raises(ParameterError):
        random_count_queries(5, 10, 6, np.random.default_rng(0))


# --- the gate's utility floor for truthful releases: moved_share, retained_share ---------------------------


def test_moved_share_measures_each_point_against_its_own_raw_trajectory():
    raw = trajectories({1: [(0, 0), (100, 0), (200, 0)], 2: [(5000, 0), (5100, 0)]})
    # record 1: one point 999 m and one 1,001 m off its trajectory; record 2's first point lies on record 1's raw
    # trajectory, 5 km from its own, and counts as moved (a point is compared with its own raw trajectory only)
    release = trajectories({1: [(0, 999), (200, 1001), (100, 0)], 2: [(0, 0), (5000, 0)]})
    assert moved_share(raw, release) == pytest.approx(2 / 5)
    assert moved_share(raw, release, radius_m=2000) == pytest.approx(1 / 5)
    assert moved_share(raw, release, radius_m=5000) == 0.0
    with pytest.raises(InputError, match="no released record"):
        moved_share(raw, release.assign(traj_id=release["traj_id"] + 10))


def test_retained_share_is_released_points_of_real_records_per_raw_point():
    raw = trajectories({1: [(0, 0), (1, 0), (2, 0)], 2: [(5, 0)]})
    release = trajectories({1: [(0, 0), (2, 0)], 7: [(9, 9), (9, 8)]})  # record 7 pairs with nothing
    assert retained_share(raw, release) == pytest.approx(2 / 4)
    assert retained_share(raw, release.iloc[:0]) == 0.0
