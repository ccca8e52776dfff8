"""GLOVE parameters and guarantee: survey defaults, refusals naming the field, the guarantee's key facts."""

from __future__ import annotations

import pytest

from mechanisms.glove import GloveParams, guarantee
from trajpub.errors import ParameterError


def test_defaults_are_the_survey_settings():
    p = GloveParams()
    assert p.k == 5
    assert p.space_scale_m == 20_000.0 and p.time_scale_s == 24 * 3600.0 and p.space_weight == 0.5
    assert GloveParams.from_dict(p.to_dict()) == p


@pytest.mark.parametrize(("mapping", "where"), [
    ({"kk": 5}, "glove.kk"),
    ({"k": 1}, "glove.k"),
    ({"k": 2.5}, "glove.k"),
    ({"unit": "day"}, "glove.unit"),
    ({"space_weight": 1.5}, "glove.space_weight"),
    ({"time_scale_s": 0}, "glove.time_scale_s"),
    ({"candidates": 3}, "glove.candidates"),
    ({"on_leftover": "publish"}, "glove.on_leftover"),
])
def test_refusals_name_the_field(mapping, where):
    with pytest.raises(ParameterError) as err:
        GloveParams.from_dict(mapping)
    assert err.value.where == where


def test_candidates_may_be_exhaustive():
    assert GloveParams(candidates=None).candidates is None


def test_guarantee_is_heuristic_k_anonymity():
    g = guarantee(GloveParams(k=7))
    assert g.proven is False and g.epsilon is None
    assert "k = 7" in g.statement and "not differential privacy" in g.statement
    assert g.privacy_unit.startswith("one trajectory")
    assert any("several groups" in c for c in g.caveats)
    assert any("Homogeneity" in c for c in g.caveats)
    obj = guarantee(GloveParams(unit="object"))
    assert "whole fingerprint" in obj.privacy_unit
    assert not any("several groups" in c for c in obj.caveats)
    assert any("Suppressed" in c for c in guarantee(GloveParams(on_leftover="suppress")).caveats)
