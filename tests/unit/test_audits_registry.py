"""audits.registry: every attack by its gate-policy name, the release kinds it applies to, and how it is built."""

import pytest

from audits import ATTACKS, attacks_for, build_attack
from audits.registry import RELEASE_KINDS
from audits.reidentification import KINDS
from trajpub.errors import ParameterError


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_every_registered_attack_builds_under_its_own_name(name):
    attack = build_attack(name)
    assert attack.name == name
    assert isinstance(attack, ATTACKS[name].attack) and isinstance(attack.params, ATTACKS[name].params)
    assert ATTACKS[name].release_kinds and ATTACKS[name].release_kinds <= set(RELEASE_KINDS)


def test_release_kinds_pick_the_applicable_attacks():
    truthful = attacks_for("truthful")
    assert {"signature_linkage", "known_points", "ap_attack", "home_work"} <= set(truthful)
    assert {f"reidentification_{kind}" for kind in KINDS} <= set(truthful)
    assert attacks_for("synthetic") == ["membership_dcr", "membership_shadow", "membership_shape", "membership_time",
                                        "signature_linkage_synthetic"]
    assert attacks_for("aggregate") == ["membership"]
    assert sorted(truthful + attacks_for("synthetic") + attacks_for("aggregate")) == sorted(ATTACKS)
    with pytest.raises(ParameterError):
        attacks_for("noisy")


def test_parameters_are_passed_and_checked():
    attack = build_attack("known_points", {"n_points": 2, "temporal_tolerance_s": None})
    assert attack.params.n_points == 2 and attack.params.temporal_tolerance_s is None
    assert build_attack("ap_attack", {"top_k": [1, 10]}).params.top_k == (1, 10)
    assert build_attack("reidentification_location_time", {"kind": "location_time"}).params.kind == "location_time"
    with pytest.raises(ParameterError, match="fixed"):
        build_attack("reidentification_location", {"kind": "home_work"})
    with pytest.raises(ParameterError, match="fixed"):
        build_attack("signature_linkage", {"mode": "synthetic"})
    with pytest.raises(ParameterError, match="n_point"):
        build_attack("known_points", {"n_point": 2})
    with pytest.raises(ParameterError, match="top_m"):
        build_attack("signature_linkage", {"top_m": 0})
    with pytest.raises(ParameterError, match="unknown attack"):
        build_attack("linkage")
