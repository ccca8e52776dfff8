"""DTPP dummy parameters (refusals name ``dummy.<field>``) and the guarantee's key facts."""

from __future__ import annotations

import pytest

from mechanisms.dummy import DummyParams, guarantee
from mechanisms.dummy.adapter import Dummy
from trajpub.candidate import Shape
from trajpub.errors import ParameterError


def test_defaults_are_the_survey_settings():
    p = DummyParams()
    assert (p.k, p.l, p.exposure_ratio, p.exposure, p.cell_deg) == (5, 3, 0.2, "random", 0.001)
    assert DummyParams.from_dict(p.to_dict()) == p


@pytest.mark.parametrize(("field", "value"), [("k", 1), ("l", 1), ("l", 6), ("exposure_ratio", 0.0),
                                              ("exposure_ratio", 1.0), ("exposure", "first"), ("cell_deg", 0.0),
                                              ("subcells", 1), ("candidate_spacing_m", -1.0), ("k", True)])
def test_out_of_range_values_are_refused_with_their_field(field, value):
    with pytest.raises(ParameterError) as err:
        DummyParams.from_dict({field: value})
    assert err.value.where == f"dummy.{field}"


def test_adapter_refuses_bad_parameters_before_reading_data():
    adapter = Dummy()
    with pytest.raises(ParameterError, match="unknown parameter") as err:
        adapter.parse_params({"k": 5, "ratio": 0.2})
    assert err.value.where == "dummy.ratio"
    with pytest.raises(ParameterError) as err:
        adapter.parse_params({"road_network": 3})
    assert err.value.where == "dummy.road_network"
    setup = adapter.parse_params({"k": 4})  # no network: sub-cell candidates, no database needed
    assert setup.network_source == "none" and setup.params.k == 4
    assert adapter.shape is Shape.ANONYMITY_SETS and adapter.max_records_per_object(setup) is None


def test_guarantee_is_a_heuristic_with_the_survey_caveats():
    g = guarantee(DummyParams(), "none")
    assert g.proven is False and g.epsilon is None
    assert "exactly 5 trajectories" in g.statement and "at least 2 different" in g.statement
    text = g.plain_text()
    assert "0.957" in text and "off-road" in text and "exposed" in text
    g = guarantee(DummyParams(), "synthetic")
    assert any("synthetic" in c for c in g.caveats) and not any("off-road" in c for c in g.caveats)
    with pytest.raises(ParameterError) as err:
        guarantee(DummyParams(), "osm")
    assert err.value.where == "dummy.road_network_source"
