"""The comparison flow's spec parameter is typed (trajpub.comparison.Comparison), as the release flow's is: its
parameter schema, what the Prefect UI draws its run form from, is the comparison spec's layout, and Prefect parses a
mapping with parse_comparison."""

import pickle
from dataclasses import fields

import cloudpickle
import pytest
import yaml
from prefect.exceptions import ParameterTypeError
from prefect.utilities.callables import parameter_schema
from prefect.utilities.schema_tools.validation import validate
from pydantic_core import to_jsonable_python

from flows.compare import compare_flow
from trajpub import config
from trajpub.comparison import SHARED_ONLY, parse_comparison
from trajpub.spec import EXAMPLES_DIR, ReleaseSpec, read_spec_file

SPEC = {"name": "first_look", "dataset": "tdrive", "bbox": [116.0, 39.6, 116.8, 40.2], "window_start": "2008-02-02",
        "candidates": [{"mechanism": "objtrace", "grid": {"epsilon": [1, 5]}}, {"mechanism": "glove"}]}


def test_the_parameter_schema_is_the_release_spec_without_mechanism_and_params_plus_name_and_candidates():
    schema = parameter_schema(compare_flow).model_dump()["properties"]["spec"]
    assert set(schema["properties"]) == ({f.name for f in fields(ReleaseSpec)} - SHARED_ONLY - {"seed"}
                                         | {"name", "candidates"})
    assert set(schema["required"]) == {"dataset", "bbox", "candidates"}
    assert schema["additionalProperties"] is False
    candidate = schema["properties"]["candidates"]["items"]
    assert set(candidate["properties"]) == {"mechanism", "params", "grid"} and candidate["required"] == ["mechanism"]


def deployed_comparisons() -> list[dict]:
    """Every comparison spec a user starts from: the examples and the parameters of prefect.yaml's deployments."""
    deployments = yaml.safe_load((config.PROJECT_ROOT / "prefect.yaml").read_text())["deployments"]
    found = [d["parameters"]["spec"] for d in deployments if d["entrypoint"].endswith(":compare_flow")]
    assert found, "prefect.yaml deploys the comparison flow"
    return found + [read_spec_file(p) for p in sorted((EXAMPLES_DIR / "compare").glob("*.yaml"))]


@pytest.mark.parametrize("spec", deployed_comparisons(), ids=lambda s: s["name"])
def test_every_deployed_and_example_comparison_passes_the_schema_the_prefect_server_checks(spec):
    validate({"spec": to_jsonable_python(spec)}, parameter_schema(compare_flow).model_dump(), raise_on_error=True,
             ignore_required=False)


def test_prefect_parses_a_mapping_as_the_yaml_comparison_is_parsed():
    parsed = compare_flow.validate_parameters({"spec": SPEC})["spec"]
    assert parsed == parse_comparison(SPEC) and len(parsed.candidates) == 3
    assert compare_flow.validate_parameters({"spec": parsed})["spec"] is parsed  # taken as it is


@pytest.mark.parametrize(("change", "names"), [({"candidates": []}, "a comparison needs 'candidates'"),
                                                ({"candidates": [{"mechanism": "glove", "colour": "red"}]},
                                                 "unknown key(s) colour"),
                                                ({"mechanism": "glove"}, "belong to each candidate")])
def test_a_bad_comparison_is_refused_in_one_sentence_naming_what_is_wrong(change, names):
    with pytest.raises(ParameterTypeError) as refused:
        compare_flow.validate_parameters({"spec": {**SPEC, **change}})
    assert names in str(refused.value) and "Traceback" not in str(refused.value)


def test_a_comparison_flow_shipped_by_value_still_parses_its_spec():
    """A served deployment hands its run the flow pickled by value (cloudpickle): the annotation must resolve."""
    import flows.compare

    cloudpickle.register_pickle_by_value(flows.compare)
    try:
        shipped = pickle.loads(cloudpickle.dumps(compare_flow))
    finally:
        cloudpickle.unregister_pickle_by_value(flows.compare)
    assert shipped.validate_parameters({"spec": SPEC})["spec"] == parse_comparison(SPEC)


def test_a_comparison_run_cannot_carry_a_seed_even_in_test_mode(monkeypatch):
    from prefect.exceptions import ParameterTypeError

    monkeypatch.setenv("TRAJPUB_TEST_MODE", "1")
    with pytest.raises(ParameterTypeError, match="cannot carry a random seed"):
        compare_flow.validate_parameters({"spec": {**SPEC, "seed": 7}})
    parsed = parse_comparison({**SPEC, "seed": 7})  # what `release compare` hands the flow in a test
    assert compare_flow.validate_parameters({"spec": parsed})["spec"] is parsed
