"""Mix-zone parameters (refusals name ``mixzone.<field>``) and the guarantee's key facts."""

from __future__ import annotations

import pytest

from mechanisms.mixzone import MixzoneParams, guarantee
from mechanisms.mixzone.adapter import Mixzone
from trajpub.candidate import Shape
from trajpub.errors import ParameterError


def test_defaults_are_the_survey_settings_with_suppression():
    p = MixzoneParams()
    assert (p.radius_m, p.n_zones, p.min_length, p.suppress_in_zone) == (500.0, 1000, 10, True)
    assert MixzoneParams.from_dict({**p.to_dict(), "road_network": "beijing"}) == p  # resolved by the adapter


@pytest.mark.parametrize(("field", "value"), [("radius_m", 0.0), ("radius_m", float("nan")), ("n_zones", 0),
                                              ("n_zones", 2.5), ("min_length", 0), ("suppress_in_zone", "yes"),
                                              ("min_fragment_points", 0)])
def test_out_of_range_values_are_refused_with_their_field(field, value):
    with pytest.raises(ParameterError) as err:
        MixzoneParams.from_dict({field: value})
    assert err.value.where == f"mixzone.{field}"


def test_adapter_refuses_unknown_keys_and_a_missing_network_before_reading_data():
    adapter = Mixzone()
    with pytest.raises(ParameterError, match="unknown parameter.*; required: road_network; optional: radius_m") as err:
        adapter.parse_params({"radius": 500})  # the error names the required network, not only the typo
    assert err.value.where == "mixzone.radius"
    with pytest.raises(ParameterError, match="missing required parameter.*road_network") as err:
        adapter.parse_params({"radius_m": 300.0})
    assert err.value.where == "mixzone.road_network"
    with pytest.raises(ParameterError, match="need a road network") as err:
        adapter.parse_params({"road_network": 3})
    assert err.value.where == "mixzone.road_network"
    assert adapter.shape is Shape.TRUTHFUL


def test_guarantee_is_a_heuristic_and_names_its_attacks():
    g = guarantee(MixzoneParams(), "public")
    assert g.proven is False and g.epsilon is None
    text = g.plain_text()
    assert "500 m" in text and "1000" in text and "removed" in g.statement
    assert "FIFO" in text and "trusted third party" in text and "KLT" in text
    assert not any("synthetic" in c for c in g.caveats)


def test_guarantee_flags_the_survey_mode_and_a_synthetic_network():
    g = guarantee(MixzoneParams(suppress_in_zone=False), "synthetic")
    assert "NOT removed" in g.caveats[0] and "trivially re-linked" in g.caveats[0]
    assert any("synthetic" in c for c in g.caveats)
    with pytest.raises(ParameterError) as err:
        guarantee(MixzoneParams(), "none")
    assert err.value.where == "mixzone.road_network_source"
