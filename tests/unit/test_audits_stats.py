"""audits.stats: the Wilson interval against the closed form and scipy, and Anonymeter's risk correction."""

import math

import pytest
from scipy.stats import binomtest, norm

from audits.stats import baseline_corrected_risk, wilson_interval
from trajpub.errors import ParameterError


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (7, 300), (262, 294), (1, 1)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_matches_scipy(k, n, confidence):
    expected = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    low, high = wilson_interval(k, n, confidence)
    assert low == pytest.approx(expected.low, abs=1e-12)
    assert high == pytest.approx(expected.high, abs=1e-12)


def test_wilson_closed_form_at_zero_and_all_successes():
    # p = 0: the interval is [0, z^2 / (n + z^2)]; p = 1 mirrors it.
    z2 = norm.ppf(0.975) ** 2
    assert wilson_interval(0, 10) == pytest.approx((0.0, z2 / (10 + z2)), abs=1e-15)
    assert wilson_interval(10, 10) == pytest.approx((10 / (10 + z2), 1.0), abs=1e-15)


def test_wilson_hand_value():
    # k=3, n=10, z=1.959964: centre (0.3 + z^2/20) / (1 + z^2/10) = 0.3506,
    # half-width z/(1+z^2/10) * sqrt(0.021 + z^2/400) = 0.2198 -> [0.1078, 0.6032]
    low, high = wilson_interval(3, 10)
    assert (round(low, 4), round(high, 4)) == (0.1078, 0.6032)


def test_wilson_fractional_successes_lie_between_integer_neighbours():
    low2, high2 = wilson_interval(2, 10)
    low3, high3 = wilson_interval(3, 10)
    low, high = wilson_interval(2.5, 10)
    assert low2 < low < low3 and high2 < high < high3


@pytest.mark.parametrize(("k", "n", "confidence"), [(-1, 10, 0.95), (11, 10, 0.95), (1, 0, 0.95), (1, 10, 1.0)])
def test_wilson_refuses_bad_input(k, n, confidence):
    with pytest.raises(ParameterError):
        wilson_interval(k, n, confidence)


@pytest.mark.parametrize(("rate", "baseline", "risk"), [
    (0.5, 0.25, 1 / 3),     # (0.5 - 0.25) / 0.75
    (0.1, 0.25, 0.0),       # worse than guessing: clipped to 0
    (0.25, 0.25, 0.0),
    (1.0, 0.25, 1.0),
    (0.5, 0.0, 0.5),
    (1.0, 1.0, 0.0),        # a guess that always succeeds leaves nothing to add
])
def test_baseline_corrected_risk(rate, baseline, risk):
    assert baseline_corrected_risk(rate, baseline) == pytest.approx(risk, abs=1e-15)


def test_risk_refuses_out_of_range():
    with pytest.raises(ParameterError):
        baseline_corrected_risk(1.2, 0.1)
    with pytest.raises(ParameterError):
        baseline_corrected_risk(0.5, math.nan)
