"""The review report: its plots (an attack whose interval touches its rate still draws), the controls in words, and
why a per-object release with too few objects was blocked."""

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


def test_the_review_says_in_words_when_a_per_object_release_has_too_few_objects_for_its_figures():
    """A per-object ε-DP release blocked by the utility floor on the figures of its spatial signal: the review says
    why (each object moves a statistic by at most one unit against noise of scale 1/ε) and what would help; not for
    a release that passed, one blocked only by points outside the bbox, or one protecting records, not objects."""
    from tasks.report import support_words
    from tasks.review import Review

    def review(guarantee: dict, per_utility: dict) -> Review:
        summary = {"gate": {"per_utility": per_utility},
                   "controls": {"protocol": "held_out", "share": 0.3, "n_controls": 12, "n_members": 28}}
        return Review(release={"release_id": 1, "guarantee": guarantee, "summary": summary}, budget=[], audits=[])

    per_object = {"model": "epsilon-DP", "privacy_unit": "one object", "epsilon": 5.0}
    blocked = {"pattern_f1": {"value": 0.14, "min": 0.2, "status": "blocked"},
               "density_jsd": {"value": 0.52, "max": 0.5, "status": "blocked"},
               "outside_bbox_share": {"value": 0.0, "max": 0.05, "status": "passed"}}
    words = support_words(review(per_object, blocked))
    assert words.startswith("What the blocked figures say (density_jsd, pattern_f1)")
    assert "each of the 28 objects it was made from moves every released statistic by at most one unit" in words
    assert "epsilon 5" in words and "a longer window adds no signal" in words
    passed = {name: {**v, "status": "passed"} for name, v in blocked.items()}
    assert support_words(review(per_object, passed)) is None
    outside = {**passed, "outside_bbox_share": {"value": 0.8, "max": 0.05, "status": "blocked"}}
    assert support_words(review(per_object, outside)) is None
    per_record = {"model": "epsilon-DP", "privacy_unit": "one trajectory record", "epsilon": 5.0}
    assert support_words(review(per_record, blocked)) is None
