"""KLT parameters, guarantee and the adapter's refusals (before any data is read)."""

from __future__ import annotations

import pytest

from mechanisms.glove import GloveParams
from mechanisms.klt import KltParams, guarantee
from mechanisms.klt.adapter import Klt
from trajpub.errors import ParameterError


def test_defaults_are_the_survey_settings():
    p = KltParams()
    assert (p.k, p.l, p.t, p.poi_cell_deg) == (5, 3, 0.1, 0.001)
    assert KltParams.from_dict({**p.to_dict(), "pois": {"pbf": "helsinki_pbf"}}) == p  # resolved by the adapter
    assert p.glove() == GloveParams(k=5)


@pytest.mark.parametrize(("mapping", "where"), [
    ({"m": 1}, "klt.m"),
    ({"k": 1}, "klt.k"),
    ({"l": 0}, "klt.l"),
    ({"t": -0.1}, "klt.t"),
    ({"poi_cell_deg": 0}, "klt.poi_cell_deg"),
    ({"max_expand_cells": -1}, "klt.max_expand_cells"),
    ({"candidates": 2}, "klt.candidates"),
    ({"grow_regions": "never"}, "klt.grow_regions"),
])
def test_refusals_name_the_field(mapping, where):
    with pytest.raises(ParameterError) as err:
        KltParams.from_dict(mapping)
    assert err.value.where == where


@pytest.mark.parametrize("pois", [None, {}, {"csv": "x.csv"}, {"pbf": "beijing_pbf"}, {"pbf": 3},
                                  {"synthetic": {"n": 0}}, {"synthetic": {"n": 10, "colour": 2}},
                                  {"pbf": "helsinki_pbf", "synthetic": {"n": 5}}])
def test_adapter_refuses_missing_or_bad_pois(pois):
    spec = {"k": 5} if pois is None else {"k": 5, "pois": pois}
    with pytest.raises(ParameterError) as err:
        Klt().parse_params(spec)
    assert err.value.where == "klt.pois"


def test_adapter_refuses_unknown_parameters_first():
    with pytest.raises(ParameterError) as err:
        Klt().parse_params({"kk": 5, "pois": {"pbf": "helsinki_pbf"}})
    assert err.value.where == "klt.kk"


def test_guarantee_states_l_t_and_the_poi_source():
    a = Klt()
    real = a.guarantee(a.parse_params({"l": 4, "t": 0.2, "pois": {"pbf": "helsinki_pbf"}}))
    assert real.proven is False and real.epsilon is None
    assert "l = 4" in real.statement and "t = 0.2" in real.statement and "helsinki_pbf" in real.statement
    assert "SYNTHETIC" not in real.statement
    assert "lies inside one of its group's published samples" not in real.statement  # regions may be suppressed
    synth = a.guarantee(a.parse_params({"pois": {"synthetic": {"n": 100, "categories": 5}}}))
    assert "SYNTHETIC POIs" in synth.statement and synth.caveats[0].startswith("SYNTHETIC")
    assert guarantee(KltParams(), "synthetic x").statement.count("SYNTHETIC") == 1
