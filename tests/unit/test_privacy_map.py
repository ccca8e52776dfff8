"""The privacy map of a guarantee: from a mechanism's own ε, δ to the dataset's unit of protection."""

from __future__ import annotations

import math

import pytest

from mechanisms.registry import mechanism
from trajpub.errors import ParameterError
from trajpub.guarantee import ACCOUNTS, NOT_DP, PrivacyMap


def test_group_privacy_multiplies_by_the_records_per_object():
    m = PrivacyMap("epsilon-DP", "group_privacy", 7)
    charge = m.to_unit(0.5, 0.0, "object")
    assert (charge.account, charge.unit, charge.epsilon, charge.delta) == ("epsilon-DP", "object", 3.5, 0.0)
    # (ε, δ) per record → (kε, k e^{(k−1)ε} δ) per group of k (Vadhan 2017, Lemma 2.2)
    assert m.to_unit(0.5, 1e-7, "object").delta == pytest.approx(7 * math.exp(3.0) * 1e-7)
    assert m.to_unit(0.5, 1e-7, "record").epsilon == 0.5  # the mechanism's own unit


def test_no_cap_on_records_is_unbounded_per_object():
    charge = PrivacyMap("epsilon-LDP", "group_privacy", None).to_unit(2.0, 0.0, "object")
    assert math.isinf(charge.epsilon) and not charge.bounded
    assert PrivacyMap("epsilon-LDP", "group_privacy", None).to_unit(2.0, 0.0, "record").bounded


def test_per_object_and_heuristic_guarantees():
    assert PrivacyMap("Pufferfish", "per_object").to_unit(2.0, 0.0, "object").epsilon == 2.0
    charge = NOT_DP.to_unit(None, 0.0, "object")
    assert (charge.account, charge.epsilon) == ("heuristic", None) and charge.bounded
    with pytest.raises(ValueError):
        PrivacyMap("epsilon-DP", "not_dp")
    with pytest.raises(ParameterError, match="unknown unit of protection"):
        NOT_DP.to_unit(None, 0.0, "taxi")


DP_PARAMS = {"prefix_tree": {"epsilon": 1.0}, "dpt": {"epsilon": 1.0}, "adatrace": {"epsilon": 1.0},
             "fastpub": {"k": 5, "epsilon": 1.0}}


@pytest.mark.parametrize("name", sorted(DP_PARAMS))
def test_per_record_dp_mechanisms_map_by_their_cap(name):
    adapter = mechanism(name)
    capped = adapter.guarantee(adapter.parse_params({**DP_PARAMS[name], "max_records_per_object": 3}))
    assert capped.privacy_map.account in ACCOUNTS and capped.charge("object").epsilon == 3.0
    assert capped.to_dict()["privacy_map"]["records_per_object"] == 3
    assert not adapter.guarantee(adapter.parse_params(DP_PARAMS[name])).charge("object").bounded
