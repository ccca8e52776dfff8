"""Verdicts that hold (docs/design.md, "Audits and the gate"): the risk's interval maps through the baseline
correction, each attack's verdict is passes / too close to call / blocked, and the policy's decide_on says what a
release too close to call gets (upper_bound, the default, blocks it; point lets the point estimate decide)."""

from __future__ import annotations

import numpy as np
import pytest

from audits.gate import GatePolicy, evaluate_gate, verdict, worst_per_attack
from audits.result import AttackResult
from audits.stats import baseline_corrected_risk, wilson_interval
from tasks.policies import weakenings
from trajpub.errors import ParameterError
from trajpub.guarantee import GATE_DECISION_CAVEAT, Guarantee, PrivacyMap

ATTACK = "signature_linkage"


def policy(decide_on: str | None = None, **extra) -> GatePolicy:
    return GatePolicy.from_dict({"attacks": {ATTACK: {"max_risk": 0.2}}, **extra,
                                 **({"decide_on": decide_on} if decide_on else {})})


def measured(successes: float, n: int, baseline: float = 0.0, **interval) -> AttackResult:
    return AttackResult(attack=ATTACK, n_targets=n, n_successes=successes, baseline=baseline, **interval)


def test_the_risk_interval_is_the_rate_interval_mapped_through_the_correction():
    rng = np.random.default_rng(25)
    for _ in range(200):
        n = int(rng.integers(1, 500))
        successes, baseline = float(rng.integers(0, n + 1)), float(rng.uniform(0, 0.99))
        r = measured(successes, n, baseline)
        low, high = wilson_interval(successes, n)
        assert (r.risk_ci_low, r.risk_ci_high) == (baseline_corrected_risk(low, baseline),
                                                   baseline_corrected_risk(high, baseline))
        assert r.risk_ci_low <= r.risk <= r.risk_ci_high  # the map is monotone: the estimate stays inside


def test_an_attack_with_a_measured_baseline_gives_its_own_interval_which_must_hold_the_risk():
    # e.g. members vs control objects: the interval is on the difference, wider than the members' rate alone
    r = measured(30, 100, baseline=0.1, risk_ci_low=0.05, risk_ci_high=0.4)
    assert (r.risk_ci_low, r.risk_ci_high) == (0.05, 0.4) and r.risk == pytest.approx(0.2 / 0.9)
    assert r.to_dict()["risk_ci_high"] == 0.4
    for bad in ({"risk_ci_low": 0.3, "risk_ci_high": 0.4},  # does not contain the risk 0.222
                {"risk_ci_low": -0.1, "risk_ci_high": 0.4}, {"risk_ci_low": 0.1, "risk_ci_high": 1.2},
                {"risk_ci_low": 0.1}, {"risk_ci_low": float("nan"), "risk_ci_high": 0.4}):
        with pytest.raises(ParameterError, match="interval"):
            measured(30, 100, baseline=0.1, **bad)


@pytest.mark.parametrize(("low", "high", "said"), [
    (0.0, 0.2, "passes"), (0.1, 0.19, "passes"), (0.15, 0.25, "too close to call"), (0.2, 0.3, "too close to call"),
    (0.21, 0.3, "blocked"),
])
def test_the_three_way_verdict_reads_the_interval_against_the_threshold(low, high, said):
    r = AttackResult(attack=ATTACK, n_targets=1000, n_successes=1000 * (low + high) / 2, baseline=0.0,
                     risk_ci_low=low, risk_ci_high=high)
    assert verdict(r, 0.2) == said


def test_a_point_estimate_under_the_threshold_with_an_upper_bound_over_it_blocks_only_under_upper_bound():
    """36 of 200 linked, baseline 0: risk 0.18 under 0.2, Wilson interval [0.133, 0.239] across it."""
    r = measured(36, 200)
    assert r.risk == pytest.approx(0.18) and r.risk_ci_low < 0.2 < r.risk_ci_high
    strict, lenient = evaluate_gate(policy(), [r], "truthful"), evaluate_gate(policy("point"), [r], "truthful")
    assert policy().decide_on == "upper_bound"  # the default
    assert strict.blocked and strict.per_attack[ATTACK] | {"status": "blocked", "verdict": "too close to call"} \
        == strict.per_attack[ATTACK]
    (reason,) = strict.reasons
    assert "too close to call" in reason and "the policy decides on the upper bound" in reason
    assert "95% CI [0.133, 0.239]" in reason
    assert not lenient.blocked and lenient.reasons == []
    assert (lenient.per_attack[ATTACK]["status"], lenient.per_attack[ATTACK]["verdict"]) == ("passed",
                                                                                            "too close to call")


def test_under_point_a_crossing_interval_with_the_estimate_over_blocks_and_says_so():
    r = measured(44, 200)  # 0.22, interval [0.168, 0.282]
    decision = evaluate_gate(policy("point"), [r], "truthful")
    assert decision.blocked and decision.per_attack[ATTACK]["verdict"] == "too close to call"
    assert "the point estimate, which the policy decides on, is above it" in decision.reasons[0]


def test_the_worst_resolution_is_the_worst_verdict_not_the_largest_point_estimate():
    """At 2 km 1,900 of 10,000 linked (0.19, upper 0.198: passes); at 500 m 7.5 of 50 (0.15, upper 0.274: too
    close to call). The larger point estimate passes; the attack must block on the other."""
    sure, unsure = measured(1900, 10_000), measured(7.5, 50)
    assert verdict(sure, 0.2) == "passes" and verdict(unsure, 0.2) == "too close to call"
    assert sure.risk > unsure.risk
    by_resolution = [(2000.0, sure), (500.0, unsure)]
    assert worst_per_attack(policy(), by_resolution) == [unsure]
    assert evaluate_gate(policy(), worst_per_attack(policy(), by_resolution), "truthful").blocked
    # on the point estimate both are under 0.2: the review still shows the worse verdict, and the release passes
    assert worst_per_attack(policy("point"), by_resolution) == [unsure]
    assert not evaluate_gate(policy("point"), [unsure], "truthful").blocked


def test_decide_on_is_validated_round_trips_and_point_is_a_weakening():
    with pytest.raises(ParameterError, match="decide_on must be one of upper_bound, point"):
        policy("mean")
    assert GatePolicy.from_dict(policy("point").to_dict()) == policy("point")
    assert GatePolicy.default().decide_on == "upper_bound"
    assert weakenings(policy("point"), policy()) == [
        "it decides on the point estimate of each risk, where the floor decides on its upper bound"]
    assert weakenings(policy(), policy("point")) == []


def test_every_guarantee_states_what_the_gate_decision_can_reveal():
    g = Guarantee(model="epsilon-DP", privacy_unit="one object", statement="s", proven=True,
                  privacy_map=PrivacyMap("epsilon-DP", "per_object"), epsilon=1.0, caveats=("mechanism's own",))
    assert g.to_dict()["caveats"] == ["mechanism's own", GATE_DECISION_CAVEAT]
    assert g.plain_text().endswith(f"Caveat: {GATE_DECISION_CAVEAT}")
    assert "outside the epsilon" in GATE_DECISION_CAVEAT and "one bit per run" in GATE_DECISION_CAVEAT
