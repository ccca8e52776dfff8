"""FGS parameters: validation, from_dict, and the feasibility guard (Eq. 11 needs S < 6: G4 of
docs/design.md, FGS-Pufferfish)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mechanisms.fgs_pufferfish import FgsParams
from trajpub.errors import ParameterError


def test_defaults_follow_the_spec_recommendations():
    params = FgsParams(location_std_m=100.0)
    assert (params.n_slots, params.p, params.w, params.lags) == (48, 0.2, 0.9, 48)
    assert params.k_max == 25
    assert params.survival == pytest.approx(0.8 ** np.arange(25))
    assert params.mean_trajectory == "publish" and params.allocation == "paper"


def test_from_dict_round_trips_and_refuses_unknown_keys():
    params = FgsParams(method="fpa", fpa_k=4, location_std_m=50.0, day_timezone="Asia/Shanghai")
    again = FgsParams.from_dict(json.loads(json.dumps(params.to_dict())))
    assert again == params
    with pytest.raises(ParameterError) as err:
        FgsParams.from_dict({"location_std_m": 1.0, "sigma": 2.0})
    assert err.value.where == "fgs_pufferfish.sigma"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"method": "dct"}, "method"),
        ({"n_slots": 3}, "n_slots"),
        ({"n_slots": 48.0}, "n_slots"),
        ({"day_timezone": "Mars/Olympus"}, "day_timezone"),
        ({"min_fixes_per_day": 1}, "min_fixes_per_day"),
        ({"max_gap_minutes": 0.0}, "max_gap_minutes"),
        ({"min_days": 0}, "min_days"),
        ({"p": 0.0}, "p"),
        ({"p": 1.5}, "p"),
        ({"w": -0.1}, "w"),
        ({"correlation_length": 49}, "correlation_length"),
        ({"correlation_estimator": "biased"}, "correlation_estimator"),
        ({"allocation": "optimal"}, "allocation"),
        ({"reconstruction": "dct"}, "reconstruction"),
        ({"share_k": 1}, "share_k"),
        ({"mean_trajectory": "perturb"}, "mean_noise_m"),
        ({"mean_noise_m": 10.0}, "mean_noise_m"),
        ({"centre": False, "mean_trajectory": "withhold"}, "mean_trajectory"),
        ({"location_std_m": -1.0}, "location_std_m"),
        ({"location_std_m": float("nan")}, "location_std_m"),
        ({"fpa_k": 3}, "fpa_k"),
    ],
)
def test_bad_values_raise_a_parameter_error_naming_the_field(overrides, field):
    kwargs = {"location_std_m": 100.0} | overrides
    with pytest.raises(ParameterError) as err:
        FgsParams(**kwargs)
    assert err.value.where == f"fgs_pufferfish.{field}"


def test_exactly_one_noise_level():
    with pytest.raises(ParameterError, match="exactly one"):
        FgsParams()
    with pytest.raises(ParameterError, match="got b_c0, location_std_m"):
        FgsParams(b_c0=1.0, location_std_m=1.0)
    for kwargs in ({"b_c0": 1.0}, {"epsilon": 1.0}, {"location_std_m": 1.0}):
        FgsParams(**kwargs)


@pytest.mark.parametrize("method", ["cts", "fpa"])
def test_baselines_take_a_noise_level_not_a_budget(method):
    extra = {"fpa_k": 3} if method == "fpa" else {}
    for name in ("b_c0", "epsilon"):
        with pytest.raises(ParameterError) as err:
            FgsParams(method=method, **{name: 1.0}, **extra)
        assert err.value.where == f"fgs_pufferfish.{name}"
    FgsParams(method=method, location_std_m=10.0, **extra)


def test_fpa_k_is_required_and_bounded_by_k_max():
    with pytest.raises(ParameterError, match="needs fpa_k"):
        FgsParams(method="fpa", location_std_m=1.0)
    with pytest.raises(ParameterError, match="K_max = 17"):
        FgsParams(method="fpa", fpa_k=18, n_slots=32, location_std_m=1.0)
    assert FgsParams(method="fpa", fpa_k=17, n_slots=32, location_std_m=1.0).fpa_k == 17


def test_feasibility_guard_refuses_s_at_least_six():
    # p = 0.1, N = 32 (K_max = 17) gives S = (1 − 0.9^17)/0.1 = 8.33 >= 6.
    with pytest.raises(ParameterError, match=r"S = .* >= 6") as err:
        FgsParams(n_slots=32, p=0.1, b_c0=1.0)
    assert err.value.where == "fgs_pufferfish.p"
    # S < 6 (Eq. 11, G4) holds for p > 0.1576 (N = 32) and p > 0.1648 (N = 48).
    FgsParams(n_slots=32, p=0.158, b_c0=1.0)
    with pytest.raises(ParameterError):
        FgsParams(n_slots=32, p=0.157, b_c0=1.0)
    FgsParams(n_slots=48, p=0.165, b_c0=1.0)
    with pytest.raises(ParameterError):
        FgsParams(n_slots=48, p=0.164, b_c0=1.0)
    # The baselines do not use Eq. 11.
    FgsParams(method="cts", n_slots=32, p=0.1, location_std_m=1.0)


def test_feasibility_guard_refuses_a_non_positive_utility_weight():
    # I = 2, w = 0 gives W'_16 = 1 + cos(π) = 0 for N = 32.
    with pytest.raises(ParameterError, match="W'_16") as err:
        FgsParams(n_slots=32, correlation_length=2, w=0.0, b_c0=1.0)
    assert err.value.where == "fgs_pufferfish.w"
    # The uniform allocation does not use W'.
    FgsParams(n_slots=32, correlation_length=2, w=0.0, b_c0=1.0, allocation="uniform")


def test_utility_weights_with_i_equal_n():
    # Def. 9 with I = N: W'_0 = 2 and W'_k = 2w for k >= 1.
    params = FgsParams(n_slots=32, w=0.9, b_c0=1.0)
    assert params.utility_weights == pytest.approx(np.r_[2.0, np.full(16, 1.8)], abs=1e-12)
