"""audits.result.AttackResult: derived numbers agree with the counts; evidence is bounded and JSON-ready."""

import json
import math

import numpy as np
import pytest

from audits.result import MAX_EXAMPLES, AttackResult
from audits.stats import wilson_interval
from trajpub.errors import ParameterError


def test_derived_fields_follow_from_the_counts():
    result = AttackResult(attack="signature_linkage", n_targets=200, n_successes=50, baseline=0.01,
                          evidence={"examples": [{"owner": "7", "similarity": 0.9}]})
    assert result.success_rate == 0.25
    assert (result.ci_low, result.ci_high) == wilson_interval(50, 200)
    assert result.risk == pytest.approx((0.25 - 0.01) / 0.99)
    assert result.risk_ci_low == pytest.approx((result.ci_low - 0.01) / 0.99)
    assert result.risk_ci_high == pytest.approx((result.ci_high - 0.01) / 0.99)
    assert result.risk_ci_low < result.risk < result.risk_ci_high


def test_risk_interval_is_clipped_at_zero_when_the_attack_is_no_better_than_guessing():
    result = AttackResult(attack="signature_linkage", n_targets=100, n_successes=1, baseline=0.01)
    assert result.risk == 0.0
    assert result.risk_ci_low == 0.0
    assert result.risk_ci_high > 0.0  # the interval still admits some risk


def test_to_dict_is_json_and_complete():
    result = AttackResult(attack="a", n_targets=10, n_successes=2.5, baseline=0.1, evidence={"k": [1, 2]})
    d = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert d["attack"] == "a" and d["n_successes"] == 2.5 and d["evidence"] == {"k": [1, 2]}
    assert {"success_rate", "ci_low", "ci_high", "baseline", "risk", "risk_ci_low", "risk_ci_high",
            "confidence"} <= d.keys()


def test_evidence_is_copied_not_shared():
    evidence = {"examples": [{"owner": "1"}]}
    result = AttackResult(attack="a", n_targets=1, n_successes=1, baseline=0.5, evidence=evidence)
    evidence["examples"].append({"owner": "2"})
    assert result.evidence == {"examples": [{"owner": "1"}]}


@pytest.mark.parametrize("evidence", [
    {"examples": [{"i": i} for i in range(MAX_EXAMPLES + 1)]},
    {"count": np.int64(3)},
    {"rate": math.nan},
    {"ids": {1, 2}},
])
def test_evidence_must_be_small_and_json(evidence):
    with pytest.raises(ParameterError):
        AttackResult(attack="a", n_targets=10, n_successes=1, baseline=0.1, evidence=evidence)


@pytest.mark.parametrize(("n_targets", "n_successes", "baseline"), [
    (0, 0, 0.1), (10, 11, 0.1), (10, -1, 0.1), (10, math.nan, 0.1), (10, 1, 1.5), (10.0, 1, 0.1),
])
def test_counts_are_validated(n_targets, n_successes, baseline):
    with pytest.raises(ParameterError):
        AttackResult(attack="a", n_targets=n_targets, n_successes=n_successes, baseline=baseline)


def test_results_are_frozen():
    result = AttackResult(attack="a", n_targets=10, n_successes=1, baseline=0.1)
    with pytest.raises(AttributeError):
        result.risk = 0.0


def test_numpy_counts_are_accepted_as_plain_numbers():
    result = AttackResult(attack="a", n_targets=np.int64(10), n_successes=np.int64(4), baseline=np.float64(0.1))
    assert type(result.n_targets) is int and type(result.n_successes) is float and type(result.baseline) is float
    assert json.dumps(result.to_dict())
