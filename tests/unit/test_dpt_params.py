"""DPT parameters: refusals, budget split, sensitivities and Laplace scales, and the guarantee's key facts."""

from __future__ import annotations

import math

import pytest

from mechanisms.dpt import DptParams, guarantee
from trajpub.errors import ParameterError


def test_defaults_follow_the_survey_and_round_trip() -> None:
    p = DptParams()
    assert p.epsilon == 5.0
    assert DptParams.from_dict(p.to_dict()) == p


@pytest.mark.parametrize(
    ("mapping", "where"),
    [
        ({"epsilon": 0}, "dpt.epsilon"),
        ({"epsilon": float("inf")}, "dpt.epsilon"),
        ({"n_levels": 0}, "dpt.n_levels"),
        ({"max_order": 0}, "dpt.max_order"),
        ({"max_order": 7}, "dpt.max_order"),
        ({"max_transitions": 2, "max_order": 3}, "dpt.max_transitions"),
        ({"jump_tolerance": 1.5}, "dpt.jump_tolerance"),
        ({"select_fraction": 0.0}, "dpt.select_fraction"),
        ({"select_fraction": 0.4, "length_fraction": 0.3, "start_fraction": 0.3}, "dpt.start_fraction"),
        ({"direction_decay": 0.0}, "dpt.direction_decay"),
        ({"direction_decay": 1.2}, "dpt.direction_decay"),
        ({"n_synthetic": -1}, "dpt.n_synthetic"),
        ({"weight_order1_only": "yes"}, "dpt.weight_order1_only"),
        ({"max_records_per_object": 0}, "dpt.max_records_per_object"),
        ({"max_records_per_object": True}, "dpt.max_records_per_object"),
        ({"height": 3}, "dpt.height"),
    ],
)
def test_refusals_name_the_field(mapping: dict, where: str) -> None:
    with pytest.raises(ParameterError) as err:
        DptParams.from_dict(mapping)
    assert err.value.where == where


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0, 7.3])
def test_budget_parts_sum_to_epsilon(eps: float) -> None:
    p = DptParams(epsilon=eps, select_fraction=0.07, length_fraction=0.11, start_fraction=0.13)
    b = p.budget()
    assert set(b) == {"select", "length", "start", "tree"}
    assert math.isclose(math.fsum(b.values()), eps, rel_tol=1e-12)
    assert all(v > 0 for v in b.values())
    assert b["select"] == pytest.approx(0.07 * eps) and b["tree"] == pytest.approx(0.69 * eps)
    # within a tree of any height the depth budgets sum to the tree part
    for h in range(2, p.max_height + 1):
        parts = p.depth_budgets(h)
        assert sorted(parts) == list(range(2, h + 1))
        assert math.isclose(math.fsum(parts.values()), b["tree"], rel_tol=1e-12)


def test_noise_scales_are_sensitivity_over_epsilon_part() -> None:
    p = DptParams(epsilon=5.0, max_transitions=30, max_order=3)
    b = p.budget()
    # depth D holds n−D+1 ≤ m+2−D windows of a record with n ≤ m+1 cells
    assert [p.depth_sensitivity(d) for d in (2, 3, 4)] == [30, 29, 28]
    assert p.select_sensitivity() == 30 + 29 + 28
    assert p.select_scale() == pytest.approx(87 / b["select"])
    assert p.length_scale() == pytest.approx(1 / b["length"])
    assert p.start_scale() == pytest.approx(1 / b["start"])
    for h in (2, 3, 4):
        scale = p.tree_scale(h)
        assert scale == pytest.approx(sum(30 + 2 - d for d in range(2, h + 1)) / b["tree"])
        for d, eps_d in p.depth_budgets(h).items():
            assert p.depth_sensitivity(d) / eps_d == pytest.approx(scale)


def test_guarantee_states_record_level_dp_and_group_privacy() -> None:
    g = guarantee(DptParams(epsilon=2.0, max_records_per_object=4))
    assert g.model == "epsilon-DP" and g.proven and g.epsilon == 2.0
    assert g.privacy_unit == "one trajectory record"
    assert g.neighbouring == "add/remove one trajectory record"
    assert any("epsilon = 8" in c for c in g.caveats)  # 4 records x 2.0 by group privacy
    assert any("exact discrete samplers" in c and "does not apply" in c for c in g.caveats)  # hardened noise
    assert any("truncated" in c for c in g.caveats)
    unbounded = guarantee(DptParams())
    assert any("unbounded" in c for c in unbounded.caveats)
