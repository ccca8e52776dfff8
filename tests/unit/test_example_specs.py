"""Every registered mechanism has an example spec in flows/specs/ (``<data>_<mechanism>.yaml``), every example is a
valid release spec whose mechanism's parameters parse without a database (the road networks and points of
interest they name are read later, by tasks.public_inputs, in the integration tests), and ``trajpub release run --mechanism X`` starts from X's
example parameters."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.cli.release import spec_dict
from mechanisms import registry
from mechanisms.registry import example_spec_file
from trajpub.config import PROJECT_ROOT
from trajpub.errors import ParameterError
from trajpub.spec import EXAMPLES_DIR, ReleaseSpec, read_spec_file

SPECS = sorted(EXAMPLES_DIR.glob("*.yaml"))

def test_the_demo_publishes_the_per_object_synthesizer():
    spec = ReleaseSpec.from_dict(read_spec_file(PROJECT_ROOT / "flows" / "specs" / "tdrive_demo.yaml"))
    assert spec.mechanism == "objtrace"
    objtrace = registry.mechanism("objtrace")
    assert objtrace.guarantee(objtrace.parse_params(spec.params)).privacy_unit == "one object"


@pytest.mark.parametrize("mechanism", sorted(registry.REGISTRY))
def test_every_mechanism_has_an_example_spec_that_names_it(mechanism: str):
    path = example_spec_file(mechanism)
    assert ReleaseSpec.from_dict(read_spec_file(path)).mechanism == mechanism


def test_a_mechanism_without_an_example_is_named():
    with pytest.raises(ParameterError, match="'no_such' has no example spec"):
        example_spec_file("no_such")
    with pytest.raises(ParameterError, match="'tree' has no example spec"):  # tdrive_prefix_tree.yaml is not its
        example_spec_file("tree")


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_example_spec_parses(path: Path):
    spec = ReleaseSpec.from_dict(read_spec_file(path))
    assert spec.mechanism in registry.REGISTRY
    registry.mechanism(spec.mechanism).parse_params(spec.params)  # pure: a named network or POI set is read later


def test_the_mechanism_option_starts_from_that_mechanisms_example(tmp_path: Path):
    spec = tmp_path / "mine.yaml"
    spec.write_text(yaml.safe_dump({"dataset": "mine", "bbox": [1.0, 2.0, 3.0, 4.0], "mechanism": "prefix_tree",
                                    "params": {"epsilon": 1.0, "height": 8}}))
    glove = read_spec_file(example_spec_file("glove"))
    data = spec_dict(spec, "glove", {"dataset": None})
    assert (data["mechanism"], data["params"], data["dataset"], data["bbox"]) == \
        ("glove", glove["params"], "mine", [1.0, 2.0, 3.0, 4.0])  # the spec's data, the example's parameters
    assert spec_dict(spec, "prefix_tree", {})["params"] == {"epsilon": 1.0, "height": 8}  # same mechanism: kept
    assert spec_dict(None, "glove", {"dataset": "mine"}) == {**glove, "dataset": "mine"}  # no spec: the example
    with pytest.raises(ParameterError, match="unknown mechanism 'nope'"):
        spec_dict(spec, "nope", {})
