"""AdaTrace parameters, budget split, noise scales and guarantee (Gursoy et al. CCS 2018)."""

from __future__ import annotations

import json
import math

import pytest

from mechanisms.adatrace import AdaTraceParams, guarantee
from trajpub.errors import ParameterError


def test_survey_and_code_defaults():
    p = AdaTraceParams()
    assert p.epsilon == 5.0  # survey setting (the Java default is 1.0)
    assert p.budget_split == (0.05, 0.35, 0.50, 0.10)  # [Ada-code]
    assert p.top_level == 6 and p.bayes_threshold == 0.1 and p.attack_resilience is False
    assert (p.sensitive_zone_rank, p.sniff_region_rank, p.sniff_shared_cells) == (10, 12, 5)
    assert (p.outlier_neighbours, p.n_outliers, p.deniability_kappa, p.deniability_beta) == (50, 200, 100, 0.05)
    assert p.length_model == "detour_histogram"


@pytest.mark.parametrize("model", ["median", "detour_histogram"])
@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0, 7.3, 1e6])
def test_budget_parts_sum_to_epsilon_and_follow_the_split(eps, model):
    p = AdaTraceParams(epsilon=eps, length_model=model)
    b = p.budget
    lengths = {"length_global", "length_trip"} if model == "median" else {"length_detour"}
    assert set(b) == {"grid_top", "grid_leaf", "markov", "trip"} | lengths
    assert all(v > 0 for v in b.values())
    assert math.fsum(b.values()) <= eps  # the exact sum of the parts never exceeds the charged ε
    assert math.fsum(b.values()) == pytest.approx(eps, rel=1e-14, abs=0)
    assert b["grid_top"] + b["grid_leaf"] == pytest.approx(0.05 * eps, rel=1e-12)
    assert b["grid_top"] == pytest.approx(0.025 * eps, rel=1e-12)  # α = 0.5
    assert b["markov"] == pytest.approx(0.35 * eps, rel=1e-12)
    assert b["trip"] == pytest.approx(0.50 * eps, rel=1e-12)
    assert sum(b[k] for k in lengths) == pytest.approx(0.10 * eps, rel=1e-12)


@pytest.mark.parametrize(("neighbouring", "factor"), [("add_remove", 1), ("replace", 2)])
@pytest.mark.parametrize("model", ["median", "detour_histogram"])
def test_noise_scale_is_sensitivity_over_epsilon_part(neighbouring, factor, model):
    p = AdaTraceParams(epsilon=2.0, transition_cap=3.0, neighbouring=neighbouring, length_model=model)
    sens = p.sensitivity
    lengths = {"length_global": factor, "length_trip": factor} if model == "median" else {"length_detour": factor}
    assert sens == {"grid_top": factor, "grid_leaf": factor, "markov": 3.0 * factor, "trip": factor, **lengths}
    assert set(p.noise_scale) == set(p.budget) == set(sens)
    for part, eps_part in p.budget.items():
        assert p.noise_scale[part] == pytest.approx(sens[part] / eps_part, rel=1e-12)
    # e.g. the trip counts: Laplace(1/(0.5·2)) = Laplace(1) under add/remove
    assert p.noise_scale["trip"] == pytest.approx(1.0 * factor)


def test_derived_thresholds_use_public_inputs_only():
    p = AdaTraceParams(epsilon=5.0)
    assert p.trip_cut == pytest.approx((1 / 2.5) * math.log(6 ** 4))
    assert AdaTraceParams(trip_threshold=None).trip_cut == 0.0
    assert AdaTraceParams(trip_threshold=3.5).trip_cut == 3.5
    assert AdaTraceParams(length_model="median").confident_trip_count == pytest.approx(2 * math.log(100) / 0.25)


def test_round_trip_through_a_mapping():
    p = AdaTraceParams(epsilon=2.0, budget_split=[0.1, 0.3, 0.4, 0.2], attack_resilience=True, n_synthetic=10)
    d = p.to_dict()
    json.dumps(d)
    assert AdaTraceParams.from_dict(d) == p


@pytest.mark.parametrize(("changes", "field"), [
    ({"epsilon": 0}, "epsilon"),
    ({"epsilon": float("inf")}, "epsilon"),
    ({"budget_split": (0.5, 0.5, 0.5, 0.5)}, "budget_split"),
    ({"budget_split": (0.0, 0.5, 0.4, 0.1)}, "budget_split"),
    ({"budget_split": (0.5, 0.5)}, "budget_split"),
    ({"grid_top_fraction": 1.0}, "grid_top_fraction"),
    ({"top_level": 0}, "top_level"),
    ({"top_level": 2.5}, "top_level"),
    ({"max_subdivision": 0}, "max_subdivision"),
    ({"transition_cap": -1}, "transition_cap"),
    ({"max_length": 1}, "max_length"),
    ({"length_global_fraction": 1.0}, "length_global_fraction"),
    ({"length_model": "mean"}, "length_model"),
    ({"n_synthetic": -1}, "n_synthetic"),
    ({"trip_threshold": -0.5}, "trip_threshold"),
    ({"attack_resilience": "yes"}, "attack_resilience"),
    ({"resilience_reads_raw": 1}, "resilience_reads_raw"),
    ({"bayes_threshold": 0.8}, "bayes_threshold"),
    ({"deniability_beta": 0}, "deniability_beta"),
    ({"neighbouring": "swap"}, "neighbouring"),
    ({"max_records_per_object": 0}, "max_records_per_object"),
])
def test_out_of_range_values_are_refused_with_their_field(changes, field):
    with pytest.raises(ParameterError) as err:
        AdaTraceParams.from_dict(changes)
    assert err.value.where == f"adatrace.{field}"


def test_unknown_key_is_refused():
    with pytest.raises(ParameterError, match="unknown parameter") as err:
        AdaTraceParams.from_dict({"epsilon": 1.0, "attacksON": True})
    assert err.value.where == "adatrace.attacksON"


def test_guarantee_without_resilience_is_proven_dp():
    g = guarantee(AdaTraceParams(epsilon=5.0))
    assert g.model == "epsilon-DP" and g.proven is True and g.epsilon == 5.0 and g.delta == 0.0
    assert g.privacy_unit == "one trajectory record"
    assert g.neighbouring == "add/remove one trajectory record"
    assert "post-processing" in g.statement
    assert any("unbounded" in c for c in g.caveats)  # no per-object cap given
    assert any("exact discrete samplers" in c and "does not apply" in c for c in g.caveats)  # hardened noise


def test_guarantee_with_resilience_is_not_proven_and_says_why():
    g = guarantee(AdaTraceParams(epsilon=5.0, attack_resilience=True, max_records_per_object=3))
    assert g.proven is False and g.epsilon == 5.0  # the ledger still charges ε
    assert "RAW" in g.statement and "NOT covered" in g.statement
    assert any("epsilon = 15 per object" in c for c in g.caveats)
    assert guarantee(AdaTraceParams(neighbouring="replace")).neighbouring == "replace one trajectory record"
    synopsis_only = guarantee(AdaTraceParams(attack_resilience=True, resilience_reads_raw=False))
    assert synopsis_only.proven is True and synopsis_only.model == "epsilon-DP"
