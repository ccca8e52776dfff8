"""The time sweep of :mod:`mechanisms.glove.nearest` gives the stretch matrix's row and column minima and argmins
exactly (same values, lowest index on ties), on degenerate fixes and on generalised samples of any span."""

import numpy as np
import pytest

from mechanisms.glove import GloveParams, stretch_matrix
from mechanisms.glove.nearest import column_minima, row_minima
from mechanisms.glove.stretch import T0, T1, X0, X1, Y0, Y1

P = GloveParams()


def samples(rng: np.random.Generator, n: int, spread_m: float, span_s: float) -> np.ndarray:
    """``n`` samples: rectangles of up to ``spread_m`` a side and spans of up to ``span_s`` within a week,
    in start order (as fingerprints are kept); 0 gives fixes."""
    s = np.zeros((n, 10))
    x, y, t = rng.uniform(0, 30_000, n), rng.uniform(0, 30_000, n), np.sort(rng.uniform(0, 7 * 86_400, n))
    s[:, X0], s[:, Y0], s[:, T0] = x, y, t
    s[:, X1] = x + rng.uniform(0, spread_m, n)
    s[:, Y1] = y + rng.uniform(0, spread_m, n)
    s[:, T1] = t + rng.uniform(0, span_s, n)
    return s


@pytest.mark.parametrize("spread_m, span_s", [(0.0, 0.0), (2_000.0, 3_600.0), (20_000.0, 3 * 86_400.0)])
@pytest.mark.parametrize("n_a, n_b", [(1, 1), (3, 1), (2, 7)])
def test_minima_equal_the_matrix(spread_m, span_s, n_a, n_b):
    rng = np.random.default_rng(7)
    for _ in range(20):
        a = samples(rng, int(rng.integers(1, 60)), spread_m, span_s)
        b = samples(rng, int(rng.integers(1, 60)), spread_m, span_s)
        m = stretch_matrix(a, b, n_a, n_b, P)
        cost, best = row_minima(a, b, n_a, n_b, P)
        np.testing.assert_array_equal(cost, m.min(axis=1))
        np.testing.assert_array_equal(best, m.argmin(axis=1))
        cost, best = column_minima(a, b, n_a, n_b, P)
        np.testing.assert_array_equal(cost, m.min(axis=0))
        np.testing.assert_array_equal(best, m.argmin(axis=0))


def test_ties_go_to_the_lowest_index():
    rng = np.random.default_rng(3)
    b = samples(rng, 5, 0.0, 0.0)
    b = np.vstack([b, b, b])[np.argsort(np.tile(b[:, T0], 3), kind="stable")]  # every sample three times
    a = samples(rng, 30, 0.0, 0.0)
    m = stretch_matrix(a, b, 1, 1, P)
    cost, best = row_minima(a, b, 1, 1, P)
    np.testing.assert_array_equal(cost, m.min(axis=1))
    np.testing.assert_array_equal(best, m.argmin(axis=1))
    assert (np.isin(best, [0, 3, 6, 9, 12])).all()  # the first of each triple


def test_unsorted_targets_and_a_time_only_weight():
    rng = np.random.default_rng(11)
    params = GloveParams(space_weight=1.0)  # no temporal term: no bound, every sample is visited
    a, b = samples(rng, 40, 500.0, 600.0), samples(rng, 40, 500.0, 600.0)[::-1].copy()
    for p in (P, params):
        m = stretch_matrix(a, b, 1, 1, p)
        cost, best = row_minima(a, b, 1, 1, p)
        np.testing.assert_array_equal(cost, m.min(axis=1))
        np.testing.assert_array_equal(best, m.argmin(axis=1))
