"""The steward's guarantee text and the lineage metadata (Thm 4; G8, G14, G15 of docs/design.md, FGS-Pufferfish)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mechanisms.fgs_pufferfish import (
    FgsParams,
    analytic_epsilon,
    correlation_stats,
    empirical_epsilon,
    guarantee,
    noisy_correlations,
    object_correlation,
    release_object,
)

N = 32


def some_days(seed):
    return np.random.default_rng(seed).normal(0, 300, size=(4, N, 2)).cumsum(axis=1)


def test_fgs_guarantee_before_and_after_the_run():
    params = FgsParams(n_slots=N, location_std_m=150.0)
    before = guarantee(params)
    assert before.model.startswith("epsilon-Pufferfish") and not before.proven
    assert before.epsilon is None and "computed after the run" in before.statement
    text = before.plain_text()
    assert "data-dependent" in text and "not differential privacy" in text
    assert "WITHOUT noise" in text and "home and work" in text
    assert "150 m" in text
    corr = np.stack([object_correlation(some_days(s), params) for s in range(3)])
    eps = analytic_epsilon(corr, params)
    after = guarantee(params, eps)
    assert after.epsilon == pytest.approx(eps.total)
    assert f"{eps.total:.4g} in total" in after.statement
    json.dumps(after.to_dict())


def test_target_epsilon_guarantee_states_the_target_and_the_leak():
    g = guarantee(FgsParams(n_slots=N, epsilon=2.0))
    assert g.epsilon == 2.0 and "set to 2" in g.statement
    assert "calibrated from the data" in g.statement


@pytest.mark.parametrize(("option", "phrase"), [("withhold", "withheld"), ("perturb", "Laplace noise of scale 25 m")])
def test_mean_trajectory_options_change_the_caveat(option, phrase):
    extra = {"mean_noise_m": 25.0} if option == "perturb" else {}
    text = guarantee(FgsParams(n_slots=N, location_std_m=10.0, mean_trajectory=option, **extra)).plain_text()
    assert phrase in text and "WITHOUT noise" not in text


@pytest.mark.parametrize("method", ["cts", "fpa"])
def test_baselines_are_labelled_heuristic_and_not_from_the_paper(method):
    extra = {"fpa_k": 3} if method == "fpa" else {}
    params = FgsParams(method=method, n_slots=N, location_std_m=40.0, **extra)
    stats = [correlation_stats(noisy_correlations(some_days(s), params, np.random.default_rng(s),
                                                  n_realizations=200)) for s in range(3)]
    g = guarantee(params, empirical=empirical_epsilon(stats))
    assert g.model == "heuristic" and not g.proven and g.epsilon is None
    assert "not from the paper" in g.statement and "No formal privacy guarantee" in g.statement
    assert "empirical" in g.statement


def test_lineage_metadata_is_json_safe_and_never_holds_the_seed():
    seed = 918273645
    params = FgsParams(n_slots=N, location_std_m=150.0)
    _, info = release_object(some_days(1), params, np.random.default_rng(seed))
    corr = np.stack([object_correlation(some_days(s), params) for s in range(3)])
    blob = json.dumps({"info": info, "epsilon": analytic_epsilon(corr, params).to_dict(),
                       "params": params.to_dict(), "guarantee": guarantee(params).to_dict()})
    assert str(seed) not in blob and "seed" not in blob.lower()
