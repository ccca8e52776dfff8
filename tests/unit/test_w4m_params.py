"""W4M parameters and guarantee: survey defaults, refusals naming ``w4m.<field>``, the steward's statement."""

from __future__ import annotations

import pytest

from mechanisms.w4m import W4MParams, guarantee
from mechanisms.w4m.adapter import W4M
from trajpub.candidate import Shape
from trajpub.errors import ParameterError


def test_defaults_are_the_survey_settings_and_round_trip():
    p = W4MParams()
    assert (p.k, p.delta_m, p.radius_m) == (5, 500.0, 250.0)
    assert W4MParams.from_dict(p.to_dict()) == p


@pytest.mark.parametrize(("field", "value"), [
    ("k", 1), ("k", 2.5), ("k", True), ("delta_m", 0.0), ("delta_m", float("inf")), ("match_m", -1.0),
    ("time_tolerance_s", 0.0), ("time_tolerance_s", float("nan")), ("trash_max", -0.1), ("trash_max", 1.0),
    ("outlier_edr", 0.0), ("outlier_edr", 1.5), ("centre", "median"), ("distinct_objects", "yes"),
])
def test_out_of_range_values_are_refused_with_their_field(field, value):
    with pytest.raises(ParameterError) as err:
        W4MParams.from_dict({field: value})
    assert err.value.where == f"w4m.{field}"


def test_the_adapter_refuses_unknown_keys_before_reading_data():
    with pytest.raises(ParameterError, match="unknown parameter") as err:
        W4M().parse_params({"k": 5, "dleta_m": 500.0})
    assert err.value.where == "w4m.dleta_m"
    assert W4M().parse_params({"k": 7}).k == 7


def test_guarantee_is_heuristic_k_delta_anonymity_with_the_surveys_warning():
    g = guarantee(W4MParams())
    assert g.model.startswith("(k,delta)-anonymity") and not g.proven and g.epsilon is None
    assert "k = 5" in g.statement and "500 m" in g.statement and "250 m" in g.statement
    assert "not differential privacy" in g.statement
    text = " ".join(g.caveats)
    assert "0.847" in text and "pivot's trajectory is published exactly" in text
    assert "distinct objects" in g.privacy_unit
    mean = guarantee(W4MParams(centre="mean", distinct_objects=False))
    assert "pivot's trajectory is published exactly" not in " ".join(mean.caveats)
    assert "possibly of fewer objects" in mean.statement


def test_adapter_promises():
    a = W4M()
    p = a.parse_params({})
    assert a.shape is Shape.ANONYMITY_SETS and a.max_records_per_object(p) is None
    assert a.guarantee(p) == guarantee(p)
