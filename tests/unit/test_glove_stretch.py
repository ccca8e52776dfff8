"""The stretch effort and the merge of two fingerprints, on hand-checked cases (paper Eq. 1-10, [S-code])."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.glove import GloveParams, merge_cost, merge_samples, point_samples, stretch_matrix
from mechanisms.glove.stretch import T0, T1, X0, X1

P = GloveParams()


def pts(x, y=None, t=None):
    x = np.asarray(x, dtype=float)
    y = np.zeros_like(x) if y is None else np.asarray(y, dtype=float)
    t = np.zeros_like(x) if t is None else np.asarray(t, dtype=float)
    return point_samples(x, y, t, 116 + x / 85_000, 40 + y / 111_000)


def test_point_cost_is_the_weighted_l1_stretch():
    # 3 km + 4 km apart and 2 h apart: 0.5 * 7000/20000 + 0.5 * 7200/86400
    c = stretch_matrix(pts([0]), pts([3000], [4000], [7200]), 1, 1, P)
    assert c[0, 0] == pytest.approx(0.175 + 0.5 * 7200 / 86400)


def test_each_term_is_capped_at_one():
    c = stretch_matrix(pts([0], [0], [0]), pts([50_000], [0], [3 * 86400]), 1, 1, P)
    assert c[0, 0] == pytest.approx(1.0)


def test_stretch_of_a_point_inside_a_rectangle_is_the_weighted_growth():
    rect = pts([0])
    rect[0, X1] = 1000.0  # x in [0, 1000]
    inside = pts([500])
    # the rectangle needs no growth, the point grows by 1000 m: weighted (1*0 + 1*1000)/2 = 500 m
    assert stretch_matrix(rect, inside, 1, 1, P)[0, 0] == pytest.approx(0.5 * 500 / 20_000)
    # with the rectangle standing for 3 fingerprints: (3*0 + 1*1000)/4 = 250 m
    assert stretch_matrix(rect, inside, 3, 1, P)[0, 0] == pytest.approx(0.5 * 250 / 20_000)


def test_merge_cost_averages_over_the_longer_fingerprint():
    a, b = pts([0, 100, 10_000]), pts([50, 9000])
    expected = 0.5 * np.mean([50, 50, 1000]) / 20_000
    assert merge_cost(a, b, 1, 1, P) == pytest.approx(expected)
    assert merge_cost(b, a, 1, 1, P) == pytest.approx(expected)


def test_merge_matches_longer_samples_to_their_cheapest_shorter_sample():
    out = merge_samples(pts([0, 100, 10_000]), pts([50, 9000]), 1, 1, P)
    assert out[:, [X0, X1]].tolist() == [[0.0, 100.0], [9000.0, 10_000.0]]


def test_unmatched_shorter_samples_are_absorbed_in_a_second_pass():
    out = merge_samples(pts([0, 1, 2]), pts([0, 100]), 1, 1, P)
    assert out[:, [X0, X1]].tolist() == [[0.0, 100.0]]


def test_merged_samples_cover_both_sides_and_time_spans_are_unions():
    rng = np.random.default_rng(3)
    a = pts(rng.uniform(0, 5000, 30), rng.uniform(0, 5000, 30), np.sort(rng.uniform(0, 3600, 30)))
    b = pts(rng.uniform(0, 5000, 12), rng.uniform(0, 5000, 12), np.sort(rng.uniform(0, 3600, 12)))
    out = merge_samples(a, b, 1, 1, P)
    assert len(out) <= len(b)
    assert np.all(np.diff(out[:, T0]) >= 0)
    for side in (a, b):
        inside = ((out[None, :, X0] <= side[:, None, X0]) & (side[:, None, X0] <= out[None, :, X1])
                  & (out[None, :, T0] <= side[:, None, T0]) & (side[:, None, T0] <= out[None, :, T1]))
        assert inside.any(axis=1).all()  # every original sample is inside some merged sample
        assert inside.any(axis=0).all()  # every merged sample contains a sample of this side
