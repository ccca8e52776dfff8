"""Every example spec in flows/specs/ is a valid release spec, and its mechanism's parameters parse (except the
public inputs read from PostGIS, road networks and points of interest, which the integration tests resolve)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks import protect
from trajpub.config import PROJECT_ROOT
from trajpub.spec import ReleaseSpec, read_spec_file

SPECS = sorted((PROJECT_ROOT / "flows" / "specs").glob("*.yaml"))
FROM_POSTGIS = ("road_network", "pois")


def test_the_demo_publishes_the_per_object_synthesizer():
    spec = ReleaseSpec.from_dict(read_spec_file(PROJECT_ROOT / "flows" / "specs" / "tdrive_demo.yaml"))
    assert spec.mechanism == "objtrace"
    objtrace = protect.adapter("objtrace")
    assert objtrace.guarantee(objtrace.parse_params(spec.params)).privacy_unit == "one object"


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_example_spec_parses(path: Path):
    spec = ReleaseSpec.from_dict(read_spec_file(path))
    assert spec.mechanism in protect.MECHANISMS
    if not any(key in spec.params for key in FROM_POSTGIS):
        protect.adapter(spec.mechanism).parse_params(spec.params)
