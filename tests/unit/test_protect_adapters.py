"""The mechanism registry of the release flow: names, parameter refusals, what each adapter promises."""

from __future__ import annotations

import pytest

from mechanisms.registry import REGISTRY, mechanism, package_module
from tasks.protect import parse_params
from trajpub.candidate import Shape
from trajpub.errors import ParameterError
from trajpub.spec import ReleaseSpec


def test_unknown_mechanism_lists_the_available_ones():
    with pytest.raises(ParameterError, match="unknown mechanism 'nwa'; available: .*fastpub, fgs_pufferfish") as err:
        mechanism("nwa")
    assert err.value.where == "mechanism"


def test_fgs_in_a_governed_release_needs_its_epsilon_before_reading_data():
    fgs = mechanism("fgs_pufferfish")
    with pytest.raises(ParameterError, match="must know its epsilon") as err:
        fgs.parse_params({"location_std_m": 500.0})
    assert err.value.where == "fgs_pufferfish.epsilon"
    with pytest.raises(ParameterError, match="withhold"):
        fgs.parse_params({"epsilon": 2.0, "mean_trajectory": "withhold"})
    params = fgs.parse_params({"epsilon": 2.0})
    assert fgs.guarantee(params).epsilon == 2.0 and fgs.shape is Shape.TRUTHFUL


def test_fgs_on_a_window_too_short_for_its_days_is_refused_before_the_plan():
    """A quarter of an hour holds no whole day: refused with the reason before any budget is charged (the
    flow parses before it plans); a week passes, and so does an open window (the data decides then)."""
    def spec(**window):
        return ReleaseSpec.from_dict({"dataset": "cabs", "bbox": [-122.6, 37.6, -122.3, 37.9],
                                      "mechanism": "fgs_pufferfish", "params": {"epsilon": 2.0}, **window})

    with pytest.raises(ParameterError, match="needs 2 local days .* can hold 0; widen the window") as err:
        parse_params(spec(window_start="2008-05-20T10:00:00Z", window_end="2008-05-20T10:15:00Z"))
    assert err.value.where == "fgs_pufferfish.window"
    assert parse_params(spec(window_start="2008-05-17", window_end="2008-05-24")).epsilon == 2.0
    assert parse_params(spec()).epsilon == 2.0


def test_prefix_tree_is_synthetic_and_charges_its_epsilon():
    pt = mechanism("prefix_tree")
    params = pt.parse_params({"epsilon": 0.5, "max_records_per_object": 3})
    g = pt.guarantee(params)
    assert (g.epsilon, pt.shape, pt.max_records_per_object(params)) == (0.5, Shape.SYNTHETIC, 3)
    with pytest.raises(ParameterError, match="unknown parameter"):
        pt.parse_params({"epsilon": 0.5, "hieght": 3})


def required(name: str) -> str | None:
    """What a spec must give for the mechanism ``name``, as its package's contract case says (None: nothing, it
    runs on its defaults)."""
    return getattr(package_module(name, "contract"), "REQUIRED", None)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_an_empty_parameter_mapping_runs_on_defaults_or_names_what_is_missing(name):
    if required(name) is None:
        mechanism(name).parse_params({})
        return
    with pytest.raises(ParameterError, match=required(name)) as err:
        mechanism(name).parse_params({})
    assert required(name) in err.value.where or name == "fgs_pufferfish"  # FGS: epsilon is one of three levels


@pytest.mark.parametrize("name", ["mixzone", "klt", "fastpub"])
def test_an_unknown_parameter_error_also_names_the_required_ones(name):
    with pytest.raises(ParameterError, match=f"unknown parameter.*required: {required(name)}; optional: "):
        mechanism(name).parse_params({"colour": 1})
