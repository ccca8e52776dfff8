"""A spec may name a registered gate policy only if it is at least as strict as its dataset's, attack by attack
and utility limit by utility limit of each release kind: tasks.policies.weakenings."""

from __future__ import annotations

import pytest

from audits.gate import GatePolicy
from tasks.policies import weakenings

FLOOR = GatePolicy.from_dict({
    "attacks": {"known_points": {"max_risk": 0.2}, "signature_linkage": {"max_risk": 0.2},
                "home_work": {"max_risk": 0.3, "params": {"timezone": "Asia/Shanghai"}, "products": ["truthful"]}},
    "utility": {"synthetic": {"density_jsd": {"max": 0.3}, "pattern_f1": {"min": 0.2}}}})


def variant(**changes) -> GatePolicy:
    d = FLOOR.to_dict()
    for path, value in changes.items():
        *section, name, key = path.split("__")
        entries = d
        for part in section:
            entries = entries.setdefault(part, {})
        if value is None:
            del entries[name]
        else:
            entries.setdefault(name, {})[key] = value
    return GatePolicy.from_dict(d)


def test_the_same_policy_and_a_stricter_one_are_accepted():
    assert weakenings(FLOOR, FLOOR) == []
    stricter = variant(attacks__known_points__max_risk=0.05, attacks__ap_attack__max_risk=0.2,
                       utility__synthetic__density_jsd__max=0.1, utility__synthetic__pattern_f1__min=0.5,
                       utility__synthetic__trip_error__max=0.5, utility__aggregate__fragments__min=1)
    assert weakenings(stricter, FLOOR) == []
    lenient = variant(attacks__home_work__when_not_applicable="pass")
    assert weakenings(variant(attacks__home_work__when_not_applicable="block"), lenient) == []  # blocks: stricter


@pytest.mark.parametrize(("changes", "says"), [
    ({"attacks__known_points__max_risk": 0.9}, "raises known_points max_risk from 0.2 to 0.9"),  # finding 1
    ({"attacks__known_points__max_risk": None}, "drops attack known_points"),
    ({"attacks__home_work__params": {"timezone": "UTC"}}, "changes the parameters of home_work"),
    ({"attacks__home_work__when_not_applicable": "pass"}, "passes releases that home_work cannot measure"),
    ({"utility__synthetic__density_jsd__max": 0.31}, "raises the utility max on density_jsd for synthetic"),
    ({"utility__synthetic__density_jsd__max": None}, "drops the utility max on density_jsd for synthetic"),
    ({"utility__synthetic__pattern_f1__min": 0.1}, "lowers the utility min on pattern_f1 for synthetic"),
    ({"utility__synthetic__pattern_f1__min": None}, "drops the utility min on pattern_f1 for synthetic"),
])
def test_every_weakening_is_named(changes, says):
    found = weakenings(variant(**changes), FLOOR)
    assert len(found) == 1 and says in found[0], found


def test_running_an_attack_on_fewer_release_kinds_is_a_weakening():
    d = FLOOR.to_dict()
    d["attacks"]["known_points"]["products"] = ["truthful"]  # the floor runs it on every kind it applies to
    assert weakenings(GatePolicy.from_dict(d), FLOOR) == ["it runs known_points on fewer release kinds"]
    d = FLOOR.to_dict()
    del d["attacks"]["home_work"]["products"]  # on every kind: at least the floor's
    assert weakenings(GatePolicy.from_dict(d), FLOOR) == []


def test_fewer_objects_or_wider_intervals_against_controls_are_weakenings_and_another_share_a_change():
    """Members against controls (audits.controls): a policy that measures on fewer objects or accepts a wider
    interval says "too few objects to measure" less often, i.e. gates releases its floor would not; another share
    is another measurement."""
    from dataclasses import replace

    def with_controls(**kw) -> GatePolicy:
        return replace(FLOOR, controls=replace(FLOOR.controls, **kw))

    assert weakenings(with_controls(min_objects=60, max_risk_ci_width=0.2), FLOOR) == []
    assert weakenings(with_controls(min_objects=10), FLOOR) == [
        "it measures members against controls on fewer objects or wider intervals than the floor"]
    assert weakenings(with_controls(max_risk_ci_width=0.9), FLOOR) == [
        "it measures members against controls on fewer objects or wider intervals than the floor"]
    assert weakenings(with_controls(share=0.5), FLOOR) == ["it changes the control share from 0.3 to 0.5"]
