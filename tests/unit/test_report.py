"""The review report's plots: an attack whose interval touches its rate (rounding) still draws."""

from tasks.report import attack_plot


def test_attack_plot_accepts_an_interval_that_rounds_past_the_rate():
    rows = [{"attack": "a", "success_rate": 0.0, "ci_low": 1e-17, "ci_high": 0.01, "baseline": 0.0, "passed": True},
            {"attack": "b", "success_rate": 1.0, "ci_low": 0.9, "ci_high": 1.0 - 1e-16, "baseline": 0.1,
             "passed": False},
            {"attack": "c", "success_rate": None, "passed": False}]
    assert attack_plot(rows).startswith("data:image/png;base64,")


def test_the_review_states_the_control_protocol_and_size_and_lineage_only_the_share():
    """Members against controls (audits.controls): the steward reads how many objects were held out and what the
    table's figures then mean; lineage carries the protocol and the policy's share, never the count."""
    import json

    from tasks.lineage import controls_facet
    from tasks.report import controls_words

    summary = {"controls": {"protocol": "held_out", "share": 0.3, "n_controls": 86, "n_members": 202}}
    words = controls_words(summary)
    assert "86 of the 288 objects (30%" in words and "made from the other 202" in words
    assert "never read the controls' data" in words
    facet = controls_facet(summary)
    assert facet == {"controls": {"protocol": "held_out", "share": 0.3}}
    assert "86" not in json.dumps(facet) and "202" not in json.dumps(facet)
    assert controls_words({}) is None and controls_facet({}) == {}
