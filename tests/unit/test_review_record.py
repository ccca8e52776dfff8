"""One review record (tasks/review.py), three renderers: the HTML report, the approval form's markdown and
`trajpub release show` show the same attacks, verdicts and budget from it."""

import pandas as pd

from flows.cli.release import audit_row
from flows.review import review_markdown
from tasks.report import render
from tasks.review import Review

MEASURED = {"attack": "signature_linkage", "resolution_m": 500.0, "success_rate": 0.123456, "ci_low": 0.1,
            "ci_high": 0.15, "baseline": 0.0123456, "risk": 0.11, "risk_ci_low": 0.088, "risk_ci_high": 0.139,
            "threshold": 0.2, "verdict": "passes", "passed": True, "outcome": "measured", "error": None,
            "evidence": {}}
TOO_CLOSE = {"attack": "known_points", "resolution_m": 0.0, "success_rate": 0.18, "ci_low": 0.133, "ci_high": 0.239,
             "baseline": 0.0, "risk": 0.18, "risk_ci_low": 0.133, "risk_ci_high": 0.239, "threshold": 0.2,
             "verdict": "too close to call", "passed": True, "outcome": "measured", "error": None, "evidence": {}}
NOT_APPLICABLE = {"attack": "home_work", "resolution_m": None, "success_rate": None, "ci_low": None,
                  "ci_high": None, "baseline": None, "risk": None, "risk_ci_low": None, "risk_ci_high": None,
                  "threshold": 0.3, "verdict": None, "passed": False, "outcome": "not applicable",
                  "error": "no night hours in the window", "evidence": {}}
REVIEW = Review(
    release={"release_id": 9, "mechanism": "objtrace", "dataset": "tdrive", "requested_by": "pytest",
             "snapshot_points": 1000, "snapshot_hash": "ab" * 32,
             "guarantee": {"statement": "epsilon-DP per object", "caveats": ["a caveat"]},
             "summary": {"gate_policy": {"name": "strict", "version": 3},
                         "gate": {"blocked": True, "reasons": ["home_work: not applicable"], "privacy": "blocked",
                                  "policy": {"decide_on": "point"},
                                  "utility": "passed", "per_utility": {"circle_query_error": {"max": 1.0,
                                                                                              "status": "passed"}}},
                         "utility": {"circle_query_error": 0.4}, "mechanism": {"released_records": 12}}},
    budget=["epsilon-DP per object", "charged 2", "left 8"], audits=[MEASURED, TOO_CLOSE, NOT_APPLICABLE],
    validation={"n_rows": 1000, "n_quarantined": 7})


def test_the_form_and_the_report_show_every_attack_verdict_and_the_policy_of_the_record():
    markdown = review_markdown(REVIEW)
    page = render(REVIEW, pd.DataFrame({"lon": [], "lat": []}), None, None)
    assert "| home_work | - | not applicable: no night hours in the window | | | | | 0.300 | BLOCK |" in markdown
    assert ("| signature_linkage | 500 m | 0.123 | [0.100, 0.150] | 0.0123 | 0.110 | [0.088, 0.139] | 0.200 | "
            "passes |") in markdown
    # a policy deciding on the point estimate passed it; the verdict still says the interval crosses 0.2
    assert ("| known_points | - | 0.180 | [0.133, 0.239] | 0.0000 | 0.180 | [0.133, 0.239] | 0.200 | too close to "
            "call: pass (point estimate) |") in markdown
    assert "<td>not applicable: no night hours in the window</td>" in page
    assert "<td>signature_linkage</td><td>500 m</td><td>0.123</td>" in page
    assert "<td>[0.133, 0.239]</td><td>0.200</td><td>too close to call: pass (point estimate)</td>" in page
    for text in (markdown, page):
        assert "the policy decides on the point estimate, so too close to call passes" in text
    for text in (markdown, page):
        assert "strict v3" in text and "charged 2" in text and "circle_query_error" in text
    assert "7 of 1000 raw points quarantined" in markdown
    assert "BLOCKED by the audit gate: home_work: not applicable" in page


def test_release_show_lists_the_records_audit_rounded_and_its_outcome():
    assert audit_row(MEASURED) == {"attack": "signature_linkage", "cells_m": 500.0, "success": "0.1235",
                                    "ci_low": "0.1000", "ci_high": "0.1500", "baseline": "0.01235",
                                    "risk": "0.1100", "risk_ci": "[0.0880, 0.1390]", "threshold": 0.2,
                                    "verdict": "passes", "outcome": "measured", "error": None}
    assert audit_row({**TOO_CLOSE, "passed": False})["verdict"] == "too close to call: BLOCK"
    shown = audit_row(NOT_APPLICABLE)
    assert (shown["success"], shown["risk_ci"], shown["outcome"], shown["verdict"]) == (
        None, None, "not applicable", "BLOCK")


def test_an_upper_bound_review_says_too_close_to_call_blocks():
    review = Review(release={**REVIEW.release, "summary": {**REVIEW.summary, "gate": {
        **REVIEW.gate, "policy": {"decide_on": "upper_bound"}}}}, budget=REVIEW.budget,
        audits=[{**TOO_CLOSE, "passed": False}])
    markdown = review_markdown(review)
    assert "| 0.200 | too close to call: BLOCK |" in markdown
    assert "the policy decides on the upper bound, so too close to call blocks" in markdown


def test_the_review_tells_why_points_were_quarantined_which_cell_sizes_were_set_aside_and_what_a_failure_read():
    """Quarantine reasons from the validation's result (most first, with their share), the adversary's cell sizes
    an attack could not measure (recorded in its evidence), and a release that failed before reading data (no
    snapshot; its planned policy says how it would have decided)."""
    from dataclasses import replace

    expectations = [{"says": "implausible speed from the previous point", "unexpected_count": 180},
                    {"says": "longitude outside the release bbox", "unexpected_count": 2},
                    {"says": "time is missing", "unexpected_count": 0}]
    measured = {**MEASURED, "evidence": {"unmeasured_resolutions": {"2000": "too few objects to measure"}}}
    review = replace(REVIEW, audits=[measured, TOO_CLOSE],
                     validation={"n_rows": 1000, "n_quarantined": 182, "result": {"expectations": expectations}})
    assert review.quarantine_words() == ["implausible speed from the previous point: 180 points (18.0%)",
                                         "longitude outside the release bbox: 2 points (0.2%)"]
    assert review.set_aside == [("signature_linkage", "2000", "too few objects to measure")]
    page = render(review, pd.DataFrame({"lon": [], "lat": []}), None, None)
    assert "implausible speed from the previous point: 180 points (18.0%)" in page
    assert "signature_linkage at 2000 m: too few objects to measure" in page
    assert review.snapshot == f"snapshot of 1,000 points, sha256 {'ab' * 32}"
    failed = replace(review, release={**REVIEW.release, "snapshot_points": None, "snapshot_hash": None,
                                      "summary": {"gate_policy": {"name": "default", "version": 1}}},
                     audits=[], planned_decide_on="upper_bound")
    assert failed.snapshot.startswith("no snapshot taken") and failed.decide_on == "upper_bound"
    assert replace(failed, planned_decide_on=None).decide_on is None
    assert "None points" not in render(failed, pd.DataFrame({"lon": [], "lat": []}), None, None)
