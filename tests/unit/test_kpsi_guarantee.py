"""The steward's guarantee text (Chen, Li, Zhang 2020, §4.1, §6; docs/design.md, (k-Ψ)-anonymity): what holds, what
does not, under which options."""

from __future__ import annotations

import pytest

from mechanisms.kpsi_anonymity import KPsiParams, guarantee
from trajpub.errors import ParameterError


def test_the_papers_data_dependent_scale_is_declared_not_differentially_private():
    g = guarantee(KPsiParams(epsilon=1.0), "public")
    assert g.proven is False and g.epsilon is None and g.privacy_unit == "one trajectory"
    assert "exactly 8 trajectories" in g.statement
    # 2 eps per location, 2 n eps per trajectory
    assert "exp(2)" in g.statement and "exp(2n x 1)" in g.statement
    assert "1/k is a heuristic" in g.statement
    text = g.plain_text()
    assert "NOT differential privacy" in text and "from the locations themselves" in text
    assert "centroid" in text and "not snapped" in text


def test_the_data_independent_scale_states_its_metric_bound_instead():
    g = guarantee(KPsiParams(noise_scale="data_independent", epsilon=0.5, epsilon_semantics="per_location"))
    text = g.plain_text()
    assert "NOT differential privacy" not in text and "does not depend on the data" in text
    assert "2 x delta_max = 500 m" in text and "exp(0.5) for a location" in g.statement
    diameter = guarantee(KPsiParams(noise_scale="diameter")).plain_text()
    assert "NOT differential privacy" in diameter and "from delta_i" in diameter


def test_road_ignoring_and_untrusted_networks_carry_their_caveats():
    blind = guarantee(KPsiParams(road_aware=False, psi_mode="constant", delta_m=200.0), "none")
    assert "off-road" in blind.plain_text() and "below k" in blind.plain_text()
    assert "(k, delta)-anonymity" in blind.statement
    leaky = guarantee(KPsiParams(), "derived_from_private_data")
    assert "derived from the private trajectories" in leaky.plain_text()
    assert "synthetic" in guarantee(KPsiParams(snap_real=True), "synthetic").plain_text()
    assert "snapped onto their nearest road" in guarantee(KPsiParams(snap_real=True)).plain_text()
    suppress = guarantee(KPsiParams(on_infeasible="suppress_trajectory")).plain_text()
    assert "left out" in suppress and "left out" not in guarantee(KPsiParams()).plain_text()


def test_impossible_combinations_are_refused():
    with pytest.raises(ParameterError, match="road network"):
        guarantee(KPsiParams(), "none")
    with pytest.raises(ParameterError, match="constant"):
        guarantee(KPsiParams(road_aware=False), "none")
    with pytest.raises(ParameterError, match="road_network_source"):
        guarantee(KPsiParams(), "osm")
