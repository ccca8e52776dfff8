"""FASTPub parameters (Wang et al. 2022, §6.1, Thm 2), η and the budget, Thm 4's helper,
and the guarantee text."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from mechanisms.fastpub import FastPubParams, guarantee, noise_factor, theorem4_bound
from trajpub.errors import ParameterError


def test_defaults_are_the_papers():
    # §6.1: ε = 10, ξ = 0.01, ρ = 0.2, C = 5, λ = 0.8; k has no default.
    p = FastPubParams(k=100_000)
    assert (p.epsilon, p.xi, p.rho, p.max_candidates, p.lam) == (10.0, 0.01, 0.2, 5, 0.8)
    assert p.method == "fastpub"
    with pytest.raises(ParameterError, match="k"):
        FastPubParams()
    with pytest.raises(ParameterError, match="k"):
        FastPubParams.from_dict({"epsilon": 1.0})


def test_round_trip_and_unknown_keys():
    p = FastPubParams(k=5, l_max=4, method="triehh", triehh_rounds=5)
    d = json.loads(json.dumps(p.to_dict()))
    assert FastPubParams.from_dict(d) == p
    with pytest.raises(ParameterError, match="lambda"):
        FastPubParams.from_dict({"k": 5, "lambda": 0.8})


@pytest.mark.parametrize(
    ("field", "value"),
    [("epsilon", 0.0), ("epsilon", math.inf), ("xi", 0.0), ("xi", 1.0), ("rho", 0.0), ("rho", 1.5),
     ("max_candidates", 0), ("lam", -0.1), ("k", 0), ("k", 2.5), ("l_max", 0), ("method", "apple"),
     ("sfp_columns", 1000), ("sfp_word_share", 1.0)],
)
def test_invalid_values_are_refused(field, value):
    with pytest.raises(ParameterError):
        FastPubParams(**{"k": 10, field: value})


def test_one_participation_precondition():
    # ρ·l_max > 1 raises for FASTPub (each client answers at most once); ρ·l_max = 1 is fine.
    FastPubParams(k=1, rho=0.2, l_max=5)
    FastPubParams(k=1, rho=0.1, l_max=10)  # 0.1·10 = 1.0000000000000002 in floating point
    with pytest.raises(ParameterError, match="rho"):
        FastPubParams(k=1, rho=0.2, l_max=6)
    # TrieHH samples each round independently: no such precondition.
    FastPubParams(k=1, rho=0.2, l_max=6, method="triehh")


def test_participants_per_round_is_floor_rho_n():
    assert FastPubParams(k=1, rho=0.29, l_max=3).participants_per_round(100) == 29  # 0.29·100 = 28.999…
    assert FastPubParams(k=1, rho=0.2, l_max=5).participants_per_round(1003) == 200
    assert FastPubParams(k=1, method="sfp").participants_per_round(1000) == 800


@pytest.mark.parametrize(
    ("eps", "n", "eta"),
    # η = 1/(1+e^{ε/n}) (Thm 2 with equality) at a few (ε, n)
    [(10, 1, 4.540e-5), (10, 2, 0.006693), (10, 3, 0.034445), (10, 5, 0.119203), (10, 10, 0.268941),
     (10, 20, 0.377541), (5, 5, 0.268941), (2, 1, 0.119203), (2, 3, 0.339244), (2, 20, 0.475021)],
)
def test_noise_factor_matches_the_table_and_spends_exactly_epsilon(eps, n, eta):
    got = noise_factor(eps, n)
    assert got == pytest.approx(eta, rel=1e-3)
    assert 0 <= got < 0.5
    assert n * math.log((1 - got) / got) == pytest.approx(eps, abs=1e-9)  # Thm 2 with equality


def test_theorem4_bound():
    # bound(1, ξ) = 1, bound(3, 0.01) = 1.0001000001, decreasing as ξ falls.
    assert theorem4_bound(1, 0.3) == 1.0
    assert theorem4_bound(3, 0.01) == pytest.approx(1.0001000001, abs=1e-13)
    values = [theorem4_bound(4, xi) for xi in (0.5, 0.1, 0.01, 0.001)]
    assert all(a > b for a, b in itertools.pairwise(values))
    with pytest.raises(ParameterError):
        theorem4_bound(0, 0.01)


def test_guarantee_states_ldp_per_trajectory_and_reports_theorem4():
    p = FastPubParams(k=300_000, l_max=4)
    g = guarantee(p)
    assert g.model == "epsilon-LDP" and g.proven and g.epsilon == 10.0
    assert "one trajectory" in g.privacy_unit
    assert "1.0001" in g.statement and "not enforced" in g.statement
    text = g.plain_text()
    assert "r x epsilon" in text  # a person with several trajectories
    assert "independent" in text  # Thm 4's unproven assumption
    assert guarantee(FastPubParams(k=5, method="triehh")).proven is False
    assert guarantee(FastPubParams(k=5, method="sfp")).epsilon == 10.0
    json.dumps(g.to_dict())
