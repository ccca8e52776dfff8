"""The mechanism registry of the release flow: names, parameter refusals, what each adapter promises."""

from __future__ import annotations

import pytest

from tasks.protect import adapter
from trajpub.errors import ParameterError


def test_unknown_mechanism_lists_the_available_ones():
    with pytest.raises(ParameterError, match="unknown mechanism 'nwa'; available: .*fastpub, fgs_pufferfish") as err:
        adapter("nwa")
    assert err.value.where == "mechanism"


def test_fgs_in_a_governed_release_needs_its_epsilon_before_reading_data():
    fgs = adapter("fgs_pufferfish")
    with pytest.raises(ParameterError, match="must know its epsilon") as err:
        fgs.parse_params({"location_std_m": 500.0})
    assert err.value.where == "fgs_pufferfish.epsilon"
    with pytest.raises(ParameterError, match="withhold"):
        fgs.parse_params({"epsilon": 2.0, "mean_trajectory": "withhold"})
    params = fgs.parse_params({"epsilon": 2.0})
    assert fgs.guarantee(params).epsilon == 2.0 and fgs.release_kind == "truthful"


def test_prefix_tree_is_synthetic_and_charges_its_epsilon():
    pt = adapter("prefix_tree")
    params = pt.parse_params({"epsilon": 0.5, "max_records_per_object": 3})
    g = pt.guarantee(params)
    assert (g.epsilon, pt.release_kind, pt.max_records_per_object(params)) == (0.5, "synthetic", 3)
    with pytest.raises(ParameterError, match="unknown parameter"):
        pt.parse_params({"epsilon": 0.5, "hieght": 3})
