"""KPsiParams: defaults (Chen, Li, Zhang 2020, §7, and docs/design.md), validation, round trip."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.kpsi_anonymity import KPsiParams
from trajpub.errors import ParameterError


def test_defaults_are_the_papers_and_the_specs():
    p = KPsiParams()
    assert (p.k, p.epsilon, p.noise_scale, p.epsilon_semantics) == (8, 1.0, "paper", "paper_per_axis")
    assert (p.psi_mode, p.delta_min_m, p.delta_max_m, p.mu, p.growth, p.max_grow) == (
        "segment", 50, 500, 0.1, 1.25, 8)
    assert (p.min_part_m, p.min_separation_m, p.max_tries, p.linking, p.kappa, p.v_floor_mps) == (
        1.0, 1.0, 50, "reachable", 1.5, 5.0)
    assert p.road_aware and not p.snap_real and p.on_infeasible == "raise"


def test_round_trip_and_unknown_keys_are_refused():
    p = KPsiParams(k=4, epsilon=0.5, psi_mode="constant", delta_m=120.0, linking="index", road_aware=False)
    assert KPsiParams.from_dict(p.to_dict()) == p
    with pytest.raises(ParameterError, match="unknown parameter.*delta\\b"):
        KPsiParams.from_dict({"delta": 100})


@pytest.mark.parametrize("bad, field", [
    ({"k": 1}, "k"), ({"k": 8.0}, "k"), ({"epsilon": 0}, "epsilon"),
    ({"noise_scale": "range"}, "noise_scale"),
    ({"delta_m": 100.0}, "delta_m"), ({"delta_min_m": 600.0}, "delta_max_m"), ({"growth": 1.0}, "growth"),
    ({"min_part_m": 0.0}, "min_part_m"), ({"max_tries": 0}, "max_tries"), ({"linking": "tree"}, "linking"),
    ({"road_aware": 1}, "road_aware"), ({"snap_real": True, "road_aware": False}, "snap_real"),
    ({"on_infeasible": "allow_reuse_edges"}, "on_infeasible"),
])
def test_out_of_range_values_name_their_field(bad, field):
    with pytest.raises(ParameterError) as err:
        KPsiParams(**bad)
    assert err.value.where == f"kpsi_anonymity.{field}"


def test_epsilon_per_axis_follows_the_semantics():
    n = np.array([1.0, 13.0])
    assert np.allclose(KPsiParams(epsilon=1.0).epsilon_per_axis(n), [1.0, 1.0])
    per_location = KPsiParams(epsilon=1.0, epsilon_semantics="per_location")
    assert np.allclose(per_location.epsilon_per_axis(n), [0.5, 0.5])
    assert np.allclose(KPsiParams(epsilon=1.0, epsilon_semantics="per_trajectory").epsilon_per_axis(n),
                       [0.5, 1 / 26])
