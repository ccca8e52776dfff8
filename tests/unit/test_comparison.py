"""The comparison spec: grid expansion, refusals of the parser, and the recommendation rule."""

from __future__ import annotations

import math

import pytest

from tasks import compare
from trajpub.comparison import (
    MAX_CANDIDATES,
    expand_grid,
    indistinguishable,
    parse_comparison,
    recommend,
    too_close,
    utility_load,
)
from trajpub.errors import ParameterError

SHARED = {"dataset": "tdrive_demo", "bbox": [115.4, 39.4, 117.6, 41.1]}


def test_a_grid_expands_to_every_combination_first_key_slowest():
    out = expand_grid({"mechanism": "glove", "params": {"unit": "trajectory"},
                       "grid": {"k": [5, 10, 20], "space_weight": [0.25, 0.75]}}, "candidates[0]")
    assert [(c.params["k"], c.params["space_weight"]) for c in out] == [
        (5, 0.25), (5, 0.75), (10, 0.25), (10, 0.75), (20, 0.25), (20, 0.75)]
    assert all(c.params["unit"] == "trajectory" for c in out)
    assert out[0].label == "glove k=5 space_weight=0.25"  # the grid's values name it, not the fixed parameters
    (single,) = expand_grid({"mechanism": "w4m"}, "candidates[1]")
    assert single.params == {} and single.label == "w4m"


@pytest.mark.parametrize(("entry", "says"), [
    ({"mechanism": "glove", "grid": {"k": []}}, "non-empty list"),
    ({"mechanism": "glove", "grid": {"k": 5}}, "non-empty list"),
    ({"mechanism": "glove", "grid": {"k": [5, 5]}}, "repeat a value"),
    ({"mechanism": "glove", "params": {"k": 5}, "grid": {"k": [10]}}, "both fixed in 'params' and varied"),
    ({"mechanism": "glove", "grids": {"k": [5]}}, "unknown key(s) grids"),
    ({"params": {"k": 5}}, "needs 'mechanism'"),
    ("glove", "a candidate is a mapping"),
])
def test_a_malformed_candidate_is_refused_naming_it(entry, says):
    with pytest.raises(ParameterError) as err:
        parse_comparison({**SHARED, "candidates": [{"mechanism": "w4m"}, entry]})
    assert says in err.value.message and err.value.where.startswith("candidates[1]")


@pytest.mark.parametrize(("data", "says"), [
    ({**SHARED, "candidates": []}, "needs 'candidates'"),
    ({**SHARED, "mechanism": "glove", "candidates": [{"mechanism": "w4m"}]}, "belong to each candidate"),
    ({**SHARED, "candidates": [{"mechanism": "w4m"}, {"mechanism": "w4m", "params": {}}]}, "listed twice: w4m"),
    ({**SHARED, "candidates": [{"mechanism": "glove", "grid": {"k": list(range(2, MAX_CANDIDATES + 3))}}]},
     f"at most {MAX_CANDIDATES}"),
    ({**SHARED, "name": "Not A Name", "candidates": [{"mechanism": "w4m"}]}, "name must match"),
    ({"bbox": SHARED["bbox"], "candidates": [{"mechanism": "w4m"}]}, "must match"),  # no dataset, no name
    ({**SHARED, "bbox": [1, 2, 3], "candidates": [{"mechanism": "w4m"}]}, "bbox must be four numbers"),
])
def test_a_malformed_comparison_is_refused(data, says):
    with pytest.raises(ParameterError) as err:
        parse_comparison(data)
    assert says in err.value.message


def test_each_candidate_is_checked_as_a_release_naming_the_candidate():
    with pytest.raises(ParameterError) as err:
        compare.parse({**SHARED, "candidates": [{"mechanism": "glove", "grid": {"k": [5, 1]}}]})
    assert err.value.where.startswith("candidate glove k=1")
    with pytest.raises(ParameterError, match="unknown mechanism 'nope'"):
        compare.parse({**SHARED, "candidates": [{"mechanism": "nope"}]})
    comparison, planned = compare.parse({**SHARED, "candidates": [{"mechanism": "glove", "grid": {"k": [5, 10]}}]})
    assert [p.params.k for p in planned] == [5, 10] and comparison.name == "tdrive_demo"


def test_a_comparison_with_a_relative_window_is_refused():
    """Candidates share one fixed snapshot; a relative window would be resolved per run."""
    shared = {k: v for k, v in SHARED.items() if k not in ("window_start", "window_end")}
    with pytest.raises(ParameterError, match="one fixed snapshot") as err:
        compare.parse({**shared, "window": {"last": "7d", "align": "local_week"}, "candidates": [{"mechanism": "w4m"}]})
    assert err.value.where == "window"


def outcome(rid: int, blocked: bool, per_utility: dict, risk: float = 0.1, epsilon: float | None = 1.0,
            status: str = "awaiting_approval", high: float | None = None) -> dict:
    """A candidate whose one attack has risk ``risk`` with the interval [risk / 2, ``high``] (risk + 0.05 unless
    given) against the threshold 0.2."""
    high = risk + 0.05 if high is None else high
    return {"release_id": rid, "label": f"c{rid}", "status": status, "epsilon": epsilon,
            "gate": {"blocked": blocked, "per_utility": per_utility},
            "attacks": [{"attack": "a", "risk": risk, "risk_ci_low": risk / 2, "risk_ci_high": high,
                         "threshold": 0.2, "verdict": "passes" if high <= 0.2 else "blocked" if risk / 2 > 0.2
                         else "too close to call"}]}


def test_the_recommendation_is_the_passing_candidate_using_least_of_its_floor():
    floor = {"density_jsd": {"value": 0.25, "max": 0.5}, "pattern_f1": {"value": 0.4, "min": 0.2},
             "not_gated": {"value": 9.0}}
    assert utility_load(floor) == pytest.approx((0.25 / 0.5 + 0.2 / 0.4) / 2)
    assert utility_load({**floor, "trip_error": {"value": None, "max": 0.4}}) == math.inf  # missing: gate blocked
    better = {"density_jsd": {"value": 0.1, "max": 0.5}, "pattern_f1": {"value": 0.8, "min": 0.2}}
    outcomes = [outcome(1, False, floor), outcome(2, True, better, status="blocked"), outcome(3, False, better),
                outcome(4, False, better, status="failed")]
    rec = recommend(outcomes)
    assert rec.release_id == 3  # 2 is better still but blocked; 4 failed
    assert "release 3" in rec.reason and "of the 2 candidate(s) that pass" in rec.reason
    # equal utility: the lower worst upper bound, then the smaller epsilon, then the earlier candidate
    tie = [outcome(5, False, better, risk=0.05, high=0.19), outcome(6, False, better, risk=0.1, high=0.15)]
    assert recommend(tie).release_id == 6
    tie = [outcome(7, False, better, epsilon=5.0), outcome(8, False, better, epsilon=None)]
    assert recommend(tie).release_id == 8
    assert recommend([outcome(9, False, better), outcome(10, False, better)]).release_id == 9


def test_a_candidate_too_close_to_call_is_never_recommended_even_when_a_point_policy_passed_it():
    """Candidate 1 has the better utility and passed the gate (a policy deciding on the point estimate: 0.18 under
    0.2), but its interval reaches 0.24: another draw may be over. Candidate 2 passes with room to spare."""
    better = {"density_jsd": {"value": 0.1, "max": 0.5}}
    worse = {"density_jsd": {"value": 0.4, "max": 0.5}}
    close, clear = outcome(1, False, better, risk=0.18, high=0.24), outcome(2, False, worse, risk=0.05, high=0.12)
    assert too_close(close["attacks"]) == ["a"] and too_close(clear["attacks"]) == []
    rec = recommend([close, clear])
    assert rec.release_id == 2
    assert "1 passed on the point estimate but are too close to call" in rec.reason
    alone = recommend([close])
    assert alone.release_id is None and "too close to call" in alone.reason
    assert "with every attack's interval under its threshold" in alone.reason


def test_the_recommendation_says_when_the_candidates_risk_intervals_overlap():
    """Two passing candidates whose risk intervals overlap (one draw each: 0.05..0.15 and 0.04..0.12) have no
    winner on privacy; one whose interval lies wholly above the other's does."""
    better = {"density_jsd": {"value": 0.1, "max": 0.5}}
    worse = {"density_jsd": {"value": 0.3, "max": 0.5}}
    rec = recommend([outcome(1, False, better, risk=0.1, high=0.15), outcome(2, False, worse, risk=0.08, high=0.12)])
    assert rec.release_id == 1 and "no winner on one draw" in rec.reason and "overlaps that of c2" in rec.reason
    apart = recommend([outcome(3, False, better, risk=0.02, high=0.03), outcome(4, False, worse, risk=0.12, high=0.16)])
    assert apart.release_id == 3 and "no winner" not in apart.reason  # 0.01..0.03 against 0.06..0.16
    assert indistinguishable([], outcome(5, False, better)["attacks"]) is False


def test_no_recommendation_when_nothing_passes():
    rec = recommend([outcome(1, True, {}, status="blocked"), outcome(2, False, {}, status="failed")])
    assert rec.release_id is None and "none of the 2 candidates passed" in rec.reason
