"""Prefix-tree parameters (Sec. IV-A; G1, G3 of docs/design.md), budget split, p_θ and the guarantee text."""

from __future__ import annotations

import json
import math

import pytest

from mechanisms.prefix_tree import PrefixTreeParams, guarantee
from trajpub.errors import ParameterError


@pytest.mark.parametrize("epsilon", [0.5, 0.75, 1.0, 1.25, 1.5, 1e9])
@pytest.mark.parametrize("height", [1, 6, 12, 20])
def test_uniform_budget_adds_up_to_epsilon(epsilon, height):
    # ε̄·h == ε (uniform allocation, Sec. IV-A).
    params = PrefixTreeParams(epsilon=epsilon, height=height)
    assert params.epsilon_bar * height == pytest.approx(epsilon, rel=1e-15)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 1.5, 1e9])
@pytest.mark.parametrize("height", [1, 12, 20])
@pytest.mark.parametrize("neighbouring", ["add_remove", "replace"])
def test_p_theta_is_the_same_for_every_epsilon_and_height(epsilon, height, neighbouring):
    # p_θ = ½·exp(−2√2) ≈ 0.0295529 whatever ε, h and the sensitivity.
    params = PrefixTreeParams(epsilon=epsilon, height=height, neighbouring=neighbouring)
    assert params.p_theta == pytest.approx(0.5 * math.exp(-2 * math.sqrt(2)), rel=1e-12)
    assert params.p_theta == pytest.approx(0.0295529, abs=5e-8)


def test_theta_matches_the_closed_form():
    # θ = 2√2/ε̄ = 2√2·h/ε (Sec. IV-A) at ε = 1 for h = 6..20 and at h = 12 for ε = 0.5..1.5.
    by_height = [PrefixTreeParams(epsilon=1.0, height=h).theta for h in (6, 8, 10, 12, 14, 16, 18, 20)]
    assert by_height == pytest.approx([16.97, 22.63, 28.28, 33.94, 39.60, 45.25, 50.91, 56.57], abs=0.006)
    by_eps = [PrefixTreeParams(epsilon=e, height=12).theta for e in (0.5, 0.75, 1.0, 1.25, 1.5)]
    assert by_eps == pytest.approx([67.88, 45.25, 33.94, 27.15, 22.63], abs=0.006)
    assert PrefixTreeParams(epsilon=1.0, height=12).laplace_scale == pytest.approx(12.0)


def test_the_default_height_is_three_levels_of_a_third_of_epsilon_each():
    # h = 12 released noise on the T-Drive sample (bench/DEFAULTS_RESULTS.md); h = 3 is the default
    params = PrefixTreeParams(epsilon=1.5)
    assert params.height == 3 and params.epsilon_bar == pytest.approx(0.5) and params.laplace_scale == 2.0


def test_replace_neighbouring_doubles_scale_and_threshold():
    # G3: replace-one changes two counts per level, sensitivity 2.
    add_remove = PrefixTreeParams(epsilon=1.0, height=12)
    replace = PrefixTreeParams(epsilon=1.0, height=12, neighbouring="replace")
    assert replace.sensitivity == 2 and add_remove.sensitivity == 1
    assert replace.laplace_scale == pytest.approx(2 * add_remove.laplace_scale)
    assert replace.theta == pytest.approx(2 * add_remove.theta)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("epsilon", 0.0),
        ("epsilon", -1.0),
        ("epsilon", math.inf),
        ("epsilon", math.nan),
        ("epsilon", "1"),
        ("height", 0),
        ("height", 2.5),
        ("height", True),
        ("expansion_policy", "adaptive"),
        ("max_nodes", 0),
        ("consistency", "hay"),
        ("rounding", "banker"),
        ("neighbouring", "bounded"),
        ("max_records_per_object", 0),
        ("max_records_per_object", 1.5),
    ],
)
def test_bad_values_raise_a_parameter_error_naming_the_field(field, value):
    with pytest.raises(ParameterError) as err:
        PrefixTreeParams(**{field: value})
    assert err.value.where == f"prefix_tree.{field}"


def test_min_expand_count_rules():
    with pytest.raises(ParameterError, match="needs min_expand_count") as err:
        PrefixTreeParams(expansion_policy="min_expand_count")
    assert err.value.where == "prefix_tree.min_expand_count"
    with pytest.raises(ParameterError, match="literal"):
        PrefixTreeParams(expansion_policy="literal", min_expand_count=50.0)
    with pytest.raises(ParameterError):
        PrefixTreeParams(expansion_policy="min_expand_count", min_expand_count=-1.0)
    assert PrefixTreeParams(min_expand_count=80.0).min_expand_count == 80.0  # parent_bound + θ_exp


def test_from_dict_round_trips_and_rejects_unknown_keys():
    params = PrefixTreeParams(epsilon=0.5, height=8, max_records_per_object=3, rounding="stochastic")
    assert PrefixTreeParams.from_dict(json.loads(json.dumps(params.to_dict()))) == params
    with pytest.raises(ParameterError) as err:
        PrefixTreeParams.from_dict({"epsilon": 1.0, "hieght": 12})
    assert "'hieght'" in str(err.value) and "height" in str(err.value) and "max_nodes" in str(err.value)
    assert err.value.where == "prefix_tree.hieght"


def test_params_are_frozen():
    with pytest.raises(AttributeError):
        PrefixTreeParams().epsilon = 2.0


def test_guarantee_fields():
    g = guarantee(PrefixTreeParams(epsilon=0.75, height=10))
    assert g.model == "epsilon-DP"
    assert g.privacy_unit == "one trajectory record"
    assert g.neighbouring == "add/remove one trajectory record"
    assert g.epsilon == 0.75 and g.delta == 0.0 and g.proven
    assert "0.75" in g.statement and "adding or removing" in g.statement
    json.dumps(g.to_dict())
    replace = guarantee(PrefixTreeParams(neighbouring="replace"))
    assert replace.neighbouring == "replace one trajectory record" and "replacing" in replace.statement


def test_guarantee_object_level_caveat_uses_the_cap_or_says_unbounded():
    uncapped = " ".join(guarantee(PrefixTreeParams(epsilon=0.5)).caveats)
    assert "group privacy" in uncapped and "unbounded" in uncapped
    capped = " ".join(guarantee(PrefixTreeParams(epsilon=0.5, max_records_per_object=7)).caveats)
    assert "at most 7 records per object" in capped and "epsilon = 3.5 per object" in capped
    assert "unbounded" not in capped


def test_guarantee_names_public_parameters_mironov_and_policy_deviation():
    literal = guarantee(PrefixTreeParams(expansion_policy="literal", height=9)).caveats
    text = " ".join(literal)
    assert "location universe" in text and "h = 9" in text and "public" in text
    assert "exact discrete samplers" in text and "does not apply" in text  # hardened noise (trajpub.noise)
    assert not any("Deviation from the paper" in c for c in literal)
    bounded = " ".join(guarantee(PrefixTreeParams(min_expand_count=120.0)).caveats)
    assert "Deviation from the paper" in bounded and "parent_bound" in bounded and "120" in bounded
    thresholded = " ".join(
        guarantee(PrefixTreeParams(expansion_policy="min_expand_count", min_expand_count=60.0)).caveats
    )
    assert "Deviation from the paper" in thresholded and "at least 60" in thresholded


def test_subcritical_expand_count_formula():
    params = PrefixTreeParams(epsilon=1.0, height=20)
    b, theta = params.laplace_scale, params.theta
    expected = theta + b * math.log(params.p_theta * 1000 / 0.5)
    assert params.subcritical_expand_count(1000) == pytest.approx(expected)
    assert params.subcritical_expand_count(1000) / theta == pytest.approx(2.442, abs=1e-3)
    assert params.subcritical_expand_count(10) == theta  # p_θ·|L| < branching: θ itself suffices
