"""The release flow's spec parameter is typed (trajpub.spec.ReleaseSpec): its parameter schema, what the Prefect UI
draws its run form from, lists the spec's fields, and Prefect parses a mapping with ReleaseSpec.from_dict."""

import pickle
import re
from dataclasses import fields

import cloudpickle
import pytest
from prefect.exceptions import ParameterTypeError
from prefect.utilities.callables import parameter_schema
from prefect.utilities.schema_tools.validation import validate
from pydantic_core import to_jsonable_python

from flows.release import release_flow
from tests.unit.test_example_specs import SPECS
from trajpub.spec import PrepareSpec, ReleaseSpec, ValidationSpec, read_spec_file

SPEC = {"dataset": "tdrive", "bbox": ["116.0", 39.6, 116.8, 40.2], "window_start": "2008-02-02",
        "mechanism": "objtrace", "params": {"epsilon": 5.0}, "gate_policy": "strict_points"}


def test_the_parameter_schema_lists_every_field_of_the_spec_and_its_required_ones():
    everything = parameter_schema(release_flow).model_dump()
    schema = everything["properties"]["spec"]
    assert set(schema["properties"]) == {f.name for f in fields(ReleaseSpec)} - {"seed"}  # never from a form
    assert set(schema["required"]) == {"dataset", "bbox"}
    assert schema["additionalProperties"] is False
    for name, section in (("prepare", PrepareSpec), ("validation", ValidationSpec)):
        ref = schema["properties"][name]["$ref"].rsplit("/", 1)[1]
        assert set(everything["definitions"][ref]["properties"]) == {f.name for f in fields(section)}


def test_the_run_form_reads_as_words_without_markup():
    """What the Prefect UI's custom-run form shows: every field and every alternative of a field titled in words
    (the UI labels untitled alternatives of a choice by their type, `str`), every description plain text (no reST roles or
    double backquotes, which the UI prints as they are)."""
    everything = parameter_schema(release_flow).model_dump()
    texts, untitled = [], []

    def walk(node, path):
        if isinstance(node, dict):
            texts.extend(str(node[k]) for k in ("title", "description") if k in node)
            choices = [alt for alt in node.get("anyOf", []) if alt.get("type") != "null"]
            untitled.extend(f"{path}.anyOf" for alt in choices if len(choices) > 1 and "title" not in alt)
            for key, value in node.items():
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(everything, "")
    assert not untitled
    assert not [t for t in texts if re.search(r":[a-z]+:`|``", t)]
    spec = everything["properties"]["spec"]["properties"]
    assert (spec["window_start"]["title"], spec["window_end"]["title"]) == ("Window start", "Window end")
    assert all(p.get("title") and p.get("description") for p in spec.values() if "$ref" not in p)
    assert spec["window"]["anyOf"][0]["properties"]["week_starts"]["enum"][-1] == "sunday"


def test_a_run_cannot_carry_a_seed_even_in_test_mode(monkeypatch):
    monkeypatch.setenv("TRAJPUB_TEST_MODE", "1")
    with pytest.raises(ParameterTypeError) as refused:
        release_flow.validate_parameters({"spec": {**SPEC, "seed": 7}})
    assert "cannot carry a random seed" in str(refused.value)
    seeded = ReleaseSpec.from_dict({**SPEC, "seed": 7})  # a test hands the flow a parsed spec instead
    assert release_flow.validate_parameters({"spec": seeded})["spec"].seed == 7


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.parent.name if p.stem == "example" else p.stem)
def test_every_example_spec_passes_the_schema_the_prefect_server_checks(path):
    sent = to_jsonable_python(read_spec_file(path))  # what a deployment sends the server (a YAML date: ISO text)
    validate({"spec": sent}, parameter_schema(release_flow).model_dump(), raise_on_error=True,
             ignore_required=False)


def test_prefect_parses_a_mapping_as_the_yaml_spec_is_parsed():
    parsed = release_flow.validate_parameters({"spec": SPEC})["spec"]
    assert parsed == ReleaseSpec.from_dict(SPEC)
    assert parsed.bbox == (116.0, 39.6, 116.8, 40.2) and parsed.window_start.tzinfo is not None
    assert release_flow.validate_parameters({"spec": parsed})["spec"] is parsed  # a parsed spec is taken as it is


@pytest.mark.parametrize(("change", "names"), [({"bbox": [1, 2, 3]}, "bbox must be four numbers"),
                                                ({"colour": "red"}, "unknown parameter(s) colour"),
                                                ({"prepare": {"min_points": 0}}, "prepare.min_points")])
def test_a_bad_spec_is_refused_in_one_sentence_naming_the_field(change, names):
    with pytest.raises(ParameterTypeError) as refused:
        release_flow.validate_parameters({"spec": {**SPEC, **change}})
    assert names in str(refused.value) and "Traceback" not in str(refused.value)


def test_a_flow_shipped_by_value_still_parses_its_spec():
    """A served deployment hands its run the flow pickled by value (cloudpickle), with only the globals the body
    names: the spec's annotation must survive that (it did not while the module postponed its annotations)."""
    import flows.release

    cloudpickle.register_pickle_by_value(flows.release)
    try:
        shipped = pickle.loads(cloudpickle.dumps(release_flow))
    finally:
        cloudpickle.unregister_pickle_by_value(flows.release)
    assert shipped.validate_parameters({"spec": SPEC})["spec"] == ReleaseSpec.from_dict(SPEC)
