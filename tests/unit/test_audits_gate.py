"""audits.gate: policy loading refuses unknown keys; the gate blocks on risk or on the utility floor of the
release's kind, and fails closed."""

import math

import pytest

from audits.gate import GatePolicy, evaluate_gate, worst_per_attack
from audits.result import AttackResult
from trajpub.errors import ParameterError

POLICY = GatePolicy.from_dict({"attacks": {"signature_linkage": {"max_risk": 0.2}}})


def result(n_successes: float, n_targets: int = 100, baseline: float = 0.01,
           attack: str = "signature_linkage") -> AttackResult:
    return AttackResult(attack=attack, n_targets=n_targets, n_successes=n_successes, baseline=baseline)


def test_default_policy_ships_with_the_package():
    policy = GatePolicy.default()
    assert policy.max_risk["signature_linkage"] == 0.2
    assert policy.max_risk["signature_linkage_synthetic"] == 0.2
    assert set(policy.utility) == {"synthetic", "truthful", "aggregate"}
    assert policy.resolutions_m == (250, 500, 1000, 2000)  # the adversary's grids, not the release's


def test_the_gate_decides_on_the_worst_resolution():
    """A truthful release linked 0.195 at 2 km cells and 0.270 at 500 m: blocked at 0.2 (on the point
    estimate here, so that the coarse grid alone passes; the interval rule is tested below)."""
    policy = GatePolicy.from_dict({"resolutions_m": [500, 2000], "decide_on": "point",
                                   "attacks": {"signature_linkage": {"max_risk": 0.2}}})
    coarse, fine = result(19.5, baseline=0.0), result(27.0, baseline=0.0)
    worst = worst_per_attack(policy, [(2000.0, coarse), (500.0, fine)])
    assert worst == [fine]
    assert evaluate_gate(policy, worst, "truthful").blocked and not evaluate_gate(policy, [coarse], "truthful").blocked
    for bad in ([0], [-250], "500", [500, "x"]):
        with pytest.raises(ParameterError, match="resolutions_m"):
            GatePolicy.from_dict({"resolutions_m": bad, "attacks": {"signature_linkage": {"max_risk": 0.2}}})


def test_yaml_and_dict_round_trip(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("attacks:\n  signature_linkage:\n    max_risk: 0.1\nutility:\n  synthetic:\n"
                    "    trip_error: {max: 0.3}\n    pattern_f1: {min: 0.2}\n")
    policy = GatePolicy.from_yaml(path)
    assert policy.to_dict() == {"version": 1, "decision": "block_if_any", "decide_on": "upper_bound",
                                "timeout_s": 300.0, "resolutions_m": [],
                                "controls": {"share": 0.3, "min_objects": 30, "max_risk_ci_width": 0.4},
                                "attacks": {"signature_linkage": {"max_risk": 0.1}},
                                "utility": {"synthetic": {"trip_error": {"max": 0.3}, "pattern_f1": {"min": 0.2}}}}
    assert GatePolicy.from_dict(policy.to_dict()) == policy


def test_policy_v2_attack_params_products_and_the_kinds_they_run_on():
    policy = GatePolicy.from_dict({
        "version": 2, "timeout_s": 60,
        "attacks": {"signature_linkage": {"max_risk": 0.2},
                    "signature_linkage_synthetic": {"max_risk": 0.2},
                    "home_work": {"max_risk": 0.3, "params": {"timezone": "Asia/Shanghai"},
                                  "products": ["truthful"]},
                    "membership": {"max_risk": 0.1}}})
    assert policy.attacks_for("truthful") == ["home_work", "signature_linkage"]
    assert policy.attacks_for("synthetic") == ["signature_linkage_synthetic"]
    assert policy.attacks_for("aggregate") == ["membership"]
    assert GatePolicy.from_dict(policy.to_dict()) == policy
    restricted = GatePolicy.from_dict({"attacks": {"signature_linkage": {"max_risk": 0.2, "products": ["synthetic"]}}})
    assert restricted.attacks_for("truthful") == []  # the registry says truthful, the policy says synthetic only


@pytest.mark.parametrize(("policy", "where"), [
    ({"attacks": {"home_work": {"max_risk": 0.3, "params": {"radius": 5}}}}, "home_work"),
    ({"attacks": {"home_work": {"max_risk": 0.3, "products": ["raw"]}}}, "products"),
    ({"attacks": {"home_work": {"max_risk": 0.3}}, "decision": "majority"}, "decision"),
    ({"attacks": {"home_work": {"max_risk": 0.3}}, "timeout_s": 0}, "timeout_s"),
    ({"attacks": {"home_work": {"max_risk": 0.3, "when_not_applicable": "ignore"}}}, "when_not_applicable"),
    ({"attacks": {"home_work": {"max_risk": 0.3}}, "version": "two"}, "version"),
])
def test_policy_v2_refuses_bad_params_products_and_rules(policy, where):
    with pytest.raises(ParameterError) as err:
        GatePolicy.from_dict(policy)
    assert where in str(err.value) or where in err.value.where


def test_a_failed_attack_blocks_and_says_why():
    policy = GatePolicy.from_dict({"attacks": {"signature_linkage": {"max_risk": 0.5},
                                               "home_work": {"max_risk": 0.5}}})
    decision = evaluate_gate(policy, [result(1)], "truthful", failures={"home_work": "timed out after 300 s"})
    assert decision.blocked
    assert decision.reasons == ["home_work: the attack failed (timed out after 300 s); the gate fails closed"]
    assert decision.per_attack["home_work"]["status"] == "failed"
    assert decision.per_attack["signature_linkage"]["status"] == "passed"


@pytest.mark.parametrize("rule", [None, "block", "pass"])
def test_an_attack_not_applicable_blocks_unless_the_policy_passes_it(rule):
    """A "not applicable: why" is its own outcome, and the policy decides (fail closed unless set)."""
    entry = {"max_risk": 0.5} | ({"when_not_applicable": rule} if rule else {})
    policy = GatePolicy.from_dict({"attacks": {"signature_linkage": {"max_risk": 0.5}, "home_work": entry}})
    why = "no released object has a true home in the raw data"
    decision = evaluate_gate(policy, [result(1)], "truthful", not_applicable={"home_work": why})
    assert decision.per_attack["home_work"] == {"status": "not applicable", "threshold": 0.5, "why": why,
                                                "when_not_applicable": rule or "block"}
    assert decision.blocked is (rule != "pass") and decision.privacy == ("passed" if rule == "pass" else "blocked")
    if rule != "pass":
        blocks = "the policy blocks a release this attack cannot measure"
        assert decision.reasons == [f"home_work: not applicable ({why}); {blocks}"]
    assert GatePolicy.from_dict(policy.to_dict()) == policy


def test_an_attack_passed_as_not_applicable_does_not_count_as_gating():
    """Nothing was measured: a release whose only attack is not applicable is still blocked, whatever the rule."""
    policy = GatePolicy.from_dict({"attacks": {"home_work": {"max_risk": 0.5, "when_not_applicable": "pass"}}})
    decision = evaluate_gate(policy, [], "truthful", not_applicable={"home_work": "no timestamps"})
    assert decision.blocked and "nothing was gated" in decision.reasons[0]


@pytest.mark.parametrize(("policy", "named"), [
    ({"attacks": {"signature_linkage": {"max_risk": 0.2}}, "treshold": 1}, "treshold"),
    ({"attacks": {"signature_linkag": {"max_risk": 0.2}}}, "signature_linkag"),
    ({"attacks": {"signature_linkage": {"max_rsk": 0.2}}}, "signature_linkage"),
    ({"attacks": {"signature_linkage": {"max_risk": 0.2, "min_risk": 0}}}, "min_risk"),
    ({"attacks": {"signature_linkage": {"max_risk": 0.2}}, "utility": {"synthetic": {"fun": {"max": 1}}}}, "fun"),
    ({"attacks": {"signature_linkage": {"max_risk": 0.2}}, "utility": {"density_jsd": {"max": 1}}}, "density_jsd"),
    ({"attacks": {"signature_linkage": {"max_risk": 0.2}}, "utility": {"synthetic": {"trip_error": {"ceiling": 1}}}},
     "trip_error"),
    # a floor on an error, or a ceiling on a score, points the wrong way: refused rather than gating nothing
    ({"attacks": {"signature_linkage": {"max_risk": 0.2}}, "utility": {"synthetic": {"trip_error": {"min": 1}}}},
     "trip_error"),
    ({"attacks": {"signature_linkage": {"max_risk": 0.2}}, "utility": {"truthful": {"retained_share": {"max": 1}}}},
     "retained_share"),
])
def test_unknown_keys_are_refused_by_name(policy, named):
    with pytest.raises(ParameterError, match=named):
        GatePolicy.from_dict(policy)


@pytest.mark.parametrize("policy", [
    {}, {"attacks": {}}, {"attacks": None}, {"attacks": {"signature_linkage": {"max_risk": 1.5}}},
    {"attacks": {"signature_linkage": {"max_risk": "low"}}}, {"attacks": {"signature_linkage": 0.2}},
    {"attacks": {"signature_linkage": {"max_risk": 0.2}}, "utility": {"synthetic": {"trip_error": {"max": -1}}}},
    {"attacks": {"signature_linkage": {"max_risk": 0.2}}, "utility": {"synthetic": {"pattern_f1": {"min": "x"}}}},
    {"attacks": {"signature_linkage": {"max_risk": 0.2}}, "utility": {"synthetic": {"pattern_f1": {"min": 0.1,
                                                                                                   "max": 1}}}},
    {"attacks": {"signature_linkage": {"max_risk": 0.2}}, "utility": {"synthetic": ["pattern_f1"]}},
    ["attacks"],
])
def test_malformed_policies_are_refused(policy):
    with pytest.raises(ParameterError):
        GatePolicy.from_dict(policy)


def test_invalid_yaml_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("attacks: [unclosed\n")
    with pytest.raises(ParameterError, match="bad.yaml"):
        GatePolicy.from_yaml(path)


def test_a_result_over_its_threshold_blocks_with_the_numbers():
    # 50/100 successes, baseline 0.01: risk (0.5 - 0.01) / 0.99 = 0.495 > 0.2.
    decision = evaluate_gate(POLICY, [result(50)], "truthful")
    assert decision.blocked
    (reason,) = decision.reasons
    low, high = decision.per_attack["signature_linkage"]["risk_ci"]
    assert reason.startswith(f"signature_linkage: risk 0.495, 95% CI [{low:.3f}, {high:.3f}], against max_risk 0.2: "
                             "blocked, the whole interval is above it")
    assert "success rate 0.500" in reason and "baseline 0.0100" in reason and "100 targets" in reason
    assert decision.per_attack["signature_linkage"]["status"] == "blocked"
    assert decision.per_attack["signature_linkage"]["verdict"] == "blocked"


def test_a_result_at_or_under_its_threshold_passes():
    point = GatePolicy.from_dict({"decide_on": "point", "attacks": {"signature_linkage": {"max_risk": 0.2}}})
    at_limit = evaluate_gate(point, [result(20, baseline=0.0)], "truthful")  # risk exactly 0.2
    assert not at_limit.blocked and at_limit.reasons == []
    assert at_limit.per_attack["signature_linkage"]["status"] == "passed"
    interval_at_limit = AttackResult(attack="signature_linkage", n_targets=100, n_successes=10, baseline=0.0,
                                     risk_ci_low=0.05, risk_ci_high=0.2)  # upper bound exactly 0.2
    assert not evaluate_gate(POLICY, [interval_at_limit], "truthful").blocked
    assert not evaluate_gate(POLICY, [result(1)], "truthful").blocked


def test_fails_closed_when_nothing_was_gated():
    decision = evaluate_gate(POLICY, [result(90, attack="signature_linkage_synthetic")], "synthetic")
    assert decision.blocked and "nothing was gated" in decision.reasons[0]
    assert decision.per_attack["signature_linkage_synthetic"]["status"] == "not gated"
    assert decision.per_attack["signature_linkage"]["status"] == "not run"
    assert evaluate_gate(POLICY, [], "truthful").blocked


def test_duplicate_results_are_refused():
    with pytest.raises(ParameterError, match="signature_linkage"):
        evaluate_gate(POLICY, [result(1), result(2)], "truthful")


FLOOR = GatePolicy.from_dict({"attacks": {"signature_linkage": {"max_risk": 0.2}},
                              "utility": {"synthetic": {"density_jsd": {"max": 0.3}, "pattern_f1": {"min": 0.2}},
                                          "aggregate": {"fragments": {"min": 1}}}})


def test_the_utility_floor_passes_a_useful_release_and_reports_every_figure():
    ok = evaluate_gate(FLOOR, [result(1)], "synthetic", {"density_jsd": 0.1, "pattern_f1": 0.6, "trip_error": 0.6})
    assert not ok.blocked and (ok.privacy, ok.utility) == ("passed", "passed")
    assert ok.per_utility == {"density_jsd": {"value": 0.1, "max": 0.3, "status": "passed"},
                              "pattern_f1": {"value": 0.6, "min": 0.2, "status": "passed"},
                              "trip_error": {"value": 0.6, "status": "not gated"}}
    at_limits = evaluate_gate(FLOOR, [result(1)], "synthetic", {"density_jsd": 0.3, "pattern_f1": 0.2})
    assert not at_limits.blocked


def test_the_utility_floor_blocks_an_error_over_its_max_and_a_score_under_its_min_in_one_sentence_each():
    over = evaluate_gate(FLOOR, [result(1)], "synthetic", {"density_jsd": 0.45, "pattern_f1": 0.6})
    assert over.blocked and (over.privacy, over.utility) == ("passed", "blocked")
    (reason,) = over.reasons
    assert reason.startswith("utility density_jsd = 0.45 is above the policy's max 0.3 for a synthetic release (")
    under = evaluate_gate(FLOOR, [result(1)], "synthetic", {"density_jsd": 0.1, "pattern_f1": 0.0})
    assert under.blocked and under.per_utility["pattern_f1"]["status"] == "blocked"
    assert under.reasons[0].startswith("utility pattern_f1 = 0 is below the policy's min 0.2")


@pytest.mark.parametrize("reported", [{}, None, {"density_jsd": 0.1}, {"density_jsd": 0.1, "pattern_f1": math.nan},
                                      {"density_jsd": 0.1, "pattern_f1": "0.9"}, {"error": "the frame is empty"}])
def test_the_utility_floor_fails_closed_when_a_figure_is_missing(reported):
    decision = evaluate_gate(FLOOR, [result(1)], "synthetic", reported)
    assert decision.blocked and decision.utility == "blocked" and decision.privacy == "passed"
    assert any("could not be computed" in r and "fails closed" in r for r in decision.reasons)


def test_the_floor_is_per_release_kind():
    # the synthetic floor does not apply to a truthful release, for which this policy sets none
    truthful = evaluate_gate(FLOOR, [result(1)], "truthful", {"density_jsd": 0.6, "pattern_f1": 0.0})
    assert not truthful.blocked and truthful.utility == "not gated"
    empty = evaluate_gate(FLOOR, [result(1)], "aggregate", {"fragments": 0})
    assert empty.blocked and empty.reasons[0].startswith("utility fragments = 0 is below the policy's min 1")
    assert not evaluate_gate(FLOOR, [result(1)], "aggregate", {"fragments": 3}).blocked
    with pytest.raises(ParameterError, match="release_kind"):
        evaluate_gate(FLOOR, [result(1)], "fragments", {})


def test_privacy_and_utility_verdicts_are_separate():
    both = evaluate_gate(FLOOR, [result(50)], "synthetic", {"density_jsd": 0.6, "pattern_f1": 0.6})
    assert (both.privacy, both.utility) == ("blocked", "blocked") and len(both.reasons) == 2
    risky = evaluate_gate(FLOOR, [result(50)], "synthetic", {"density_jsd": 0.1, "pattern_f1": 0.6})
    assert (risky.privacy, risky.utility) == ("blocked", "passed")


# The default floor against the figures of real releases of the 300-taxi T-Drive sample (tasks.audit.measure_utility;
# bench/UTILITY_RESULTS.md, "The gate's utility floor"): the controls the issue names.
DEMO_PREFIX_TREE = {"circle_query_re": 0.8712, "density_jsd": 0.6, "trip_error": 0.4314, "pattern_f1": 0.0,
                    "outside_bbox_share": 0.031}
DPT_EPS_5 = {"circle_query_re": 0.3898, "density_jsd": 0.4031, "trip_error": 0.1438, "pattern_f1": 0.8,
             "outside_bbox_share": 0.0}
ADATRACE_EPS_5 = {"circle_query_re": 0.3967, "density_jsd": 0.1731, "trip_error": 0.1097, "pattern_f1": 0.68,
                  "outside_bbox_share": 0.0008}  # the demo's release since the floor
FGS_EPS_2 = {"density_jsd": 0.656, "trip_error": 0.6015, "pattern_f1": 0.0,
             "outside_bbox_share": 0.7805}  # its records are renumbered: no point error can be computed


def test_default_floor_blocks_the_former_demo_prefix_tree_and_fgs_and_passes_dpt_and_adatrace():
    policy = GatePolicy.default()
    synthetic = [result(1, attack="signature_linkage_synthetic")]
    demo = evaluate_gate(policy, synthetic, "synthetic", DEMO_PREFIX_TREE)
    assert demo.utility == "blocked" and demo.privacy == "passed"
    assert {k for k, v in demo.per_utility.items() if v["status"] == "blocked"} == {
        "density_jsd", "trip_error", "pattern_f1"}
    for good in (DPT_EPS_5, ADATRACE_EPS_5):
        assert evaluate_gate(policy, synthetic, "synthetic", good).utility == "passed"
    fgs = evaluate_gate(policy, [result(1)], "truthful", FGS_EPS_2)
    assert fgs.utility == "blocked"
    assert fgs.per_utility["outside_bbox_share"]["status"] == "blocked"
    assert any(r.startswith("utility outside_bbox_share = 0.7805 is above the policy's max 0.05") for r in fgs.reasons)


def test_decision_to_dict_is_plain():
    d = evaluate_gate(POLICY, [result(50)], "truthful").to_dict()
    assert d["blocked"] is True and d["per_attack"]["signature_linkage"]["threshold"] == 0.2


def test_the_datasets_zone_fills_in_only_where_the_policy_sets_none():
    policy = GatePolicy.from_dict({"attacks": {"signature_linkage": {"max_risk": 0.2}, "home_work": {"max_risk": 0.3}}})
    local = policy.in_timezone("Asia/Shanghai")
    assert dict(local.attack_params) == {"home_work": {"timezone": "Asia/Shanghai"}}  # signature linkage has none
    assert local.max_risk == policy.max_risk and policy.in_timezone(None) is policy
    own = GatePolicy.from_dict({"attacks": {"home_work": {"max_risk": 0.3, "params": {"timezone": "UTC"}}}})
    assert own.in_timezone("Asia/Shanghai").attack_params["home_work"]["timezone"] == "UTC"


def test_a_floor_at_city_resolution_blocks_a_release_right_only_at_coarse_resolution():
    policy = GatePolicy.from_dict({"attacks": {"signature_linkage": {"max_risk": 0.2}},
                                   "utility": {"synthetic": {"pattern_f1": {"min": 0.2},
                                                             "pattern_f1_city": {"min": 0.12}}}})
    coarse_only = evaluate_gate(policy, [result(1)], "synthetic", {"pattern_f1": 0.7, "pattern_f1_city": 0.01})
    assert coarse_only.per_utility["pattern_f1_city"]["status"] == "blocked"
    (reason,) = coarse_only.reasons
    assert reason.startswith("utility pattern_f1_city = 0.01 is below the policy's min 0.12") and \
        "at city resolution" in reason
    fine = evaluate_gate(policy, [result(1)], "synthetic", {"pattern_f1": 0.67, "pattern_f1_city": 0.29})
    assert fine.utility == "passed"
    # the default policy reports it without gating it (see its comment in audits/policies/default.yaml)
    shown = evaluate_gate(GatePolicy.default(), [], "synthetic", {**ADATRACE_EPS_5, "pattern_f1_city": 0.01})
    assert shown.per_utility["pattern_f1_city"] == {"value": 0.01, "status": "not gated"}
