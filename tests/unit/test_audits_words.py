"""The words that say why: an attack set aside is "saturated" when nearly every control links too and
"too few objects to measure" when the objects are few; and the review says in a sentence when a release it passed
still links measurably (an attack's risk interval above 0, under the threshold)."""

from dataclasses import replace

import pandas as pd

from audits.controls import SATURATED, TOO_FEW, ControlPolicy, MemberControl
from tasks.report import linking_words, render
from tasks.review import Review

POLICY = ControlPolicy(share=0.3, min_objects=30, max_risk_ci_width=0.4)


def test_a_saturated_attack_is_not_called_too_few_objects():
    """8,000 members and 3,000 controls that nearly all link (98%): the difference is known to +-0.01, but divided
    by 1 - 0.98 the risk's interval is about 1 wide. That is saturation, not a lack of objects."""
    saturated = MemberControl.rates(7_850, 8_000, 2_940, 3_000)
    why = POLICY.unmeasurable(saturated, max_risk=0.2, upper_bound=True)
    assert why.startswith(SATURATED) and TOO_FEW not in why
    assert "98% of the controls link as well" in why
    assert saturated.difference_ci[1] - saturated.difference_ci[0] < 0.02 < saturated.risk_ci_width


def test_few_objects_are_still_too_few():
    few = MemberControl.rates(20, 60, 10, 32)  # a third of each links: the difference itself is ~0.4 wide
    why = POLICY.unmeasurable(few, max_risk=0.2, upper_bound=True)
    assert why.startswith(TOO_FEW)
    assert POLICY.unmeasurable(MemberControl.rates(5, 20, 1, 9)).startswith(f"{TOO_FEW}: 20 members and 9 controls")


ROW = {"attack": "signature_linkage_synthetic", "resolution_m": 1000.0, "success_rate": 0.3, "ci_low": 0.25,
       "ci_high": 0.36, "baseline": 0.22, "risk": 0.086, "risk_ci_low": 0.014, "risk_ci_high": 0.159,
       "threshold": 0.2, "verdict": "passes", "passed": True, "outcome": "measured", "error": None,
       "evidence": {"controls": {"statistic": "rate"}}}
REVIEW = Review(release={"release_id": 3, "mechanism": "citytrace", "dataset": "tdrive", "requested_by": "pytest",
                         "summary": {"gate": {"blocked": False, "reasons": [], "privacy": "passed",
                                              "policy": {"decide_on": "upper_bound"}}}},
                budget=["epsilon-DP per object", "charged 5", "left 5"], audits=[ROW])


def test_the_review_says_when_a_passed_release_links_its_members_measurably():
    words = linking_words(REVIEW)
    assert words == ("This release links its members measurably more than people it never saw, under the threshold "
                     "(signature_linkage_synthetic at 1000 m: risk 0.086 [0.014, 0.159], threshold 0.200).")
    assert words in render(REVIEW, pd.DataFrame({"lon": [], "lat": []}), None, None)


def test_no_sentence_when_every_interval_reaches_0_or_the_attack_blocked():
    assert linking_words(replace(REVIEW, audits=[{**ROW, "risk_ci_low": 0.0}])) is None
    assert linking_words(replace(REVIEW, audits=[{**ROW, "risk_ci_low": 0.25, "passed": False}])) is None
    truthful = linking_words(replace(REVIEW, audits=[{**ROW, "attack": "known_points", "resolution_m": 0.0,
                                                      "evidence": {}}]))
    assert truthful.startswith("This release links records to their owners measurably better than a guess")
    assert "known_points: risk" in truthful
