"""Every registered mechanism has an example spec in its package (``mechanisms/<name>/example.yaml``), every example
(and the demo's, ``flows/specs/tdrive_demo.yaml``) is a valid release spec whose mechanism's parameters parse without a database (the road networks and points of
interest they name are read later, by tasks.public_inputs, in the integration tests), and ``trajpub release run --mechanism X`` starts from X's
example parameters."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.cli.release import spec_dict
from mechanisms.registry import REGISTRY, example_spec_file, mechanism
from trajpub.errors import ParameterError
from trajpub.spec import EXAMPLES_DIR, ReleaseSpec, read_spec_file

#: every example release spec: the demo's, and each registered mechanism's
SPECS = [EXAMPLES_DIR / "tdrive_demo.yaml", *(example_spec_file(name) for name in sorted(REGISTRY))]


def test_the_demo_publishes_the_per_object_synthesizer():
    spec = ReleaseSpec.from_dict(read_spec_file(EXAMPLES_DIR / "tdrive_demo.yaml"))
    assert spec.mechanism == "citytrace"
    citytrace = mechanism("citytrace")
    assert citytrace.guarantee(citytrace.parse_params(spec.params)).privacy_unit == "one object"


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_mechanism_has_an_example_spec_that_names_it(name: str):
    path = example_spec_file(name)
    assert ReleaseSpec.from_dict(read_spec_file(path)).mechanism == name


def test_a_mechanism_without_an_example_is_named(monkeypatch):
    with pytest.raises(ParameterError, match="unknown mechanism 'no_such'"):
        example_spec_file("no_such")
    monkeypatch.setitem(REGISTRY, "replay_control", "tests.controls.mechanism:Replay")  # a package without one
    with pytest.raises(ParameterError, match="'replay_control' has no example spec: .*tests/controls/example.yaml"):
        example_spec_file("replay_control")


@pytest.mark.parametrize("path", SPECS, ids=[p.parent.name if p.stem == "example" else p.stem for p in SPECS])
def test_example_spec_parses(path: Path):
    spec = ReleaseSpec.from_dict(read_spec_file(path))
    assert spec.mechanism in REGISTRY
    mechanism(spec.mechanism).parse_params(spec.params)  # pure: a named network or POI set is read later


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
