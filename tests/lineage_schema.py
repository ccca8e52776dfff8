"""Validate a lineage event the way an OpenLineage consumer does: the event against the OpenLineage 2-0-2 spec,
then every facet against the schema its ``_schemaURL`` names (the standard facets' specs kept in
tests/openlineage_spec/, trajpub's own in docs/lineage/trajpub-facets.json)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = [*sorted((ROOT / "tests" / "openlineage_spec").glob("*.json")), ROOT / "docs" / "lineage" / "trajpub-facets.json"]
CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


@cache
def registry() -> Registry:
    resources = [Resource.from_contents(json.loads(p.read_text())) for p in SCHEMAS]
    return Registry().with_resources((r.contents["$id"], r) for r in resources)


def _validator(url: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": url}, registry=registry(), format_checker=FormatChecker())


def _facets(event: dict):
    yield from event["run"].get("facets", {}).items()
    yield from event["job"].get("facets", {}).items()
    for dataset in [*event.get("inputs", []), *event.get("outputs", [])]:
        yield from dataset.get("facets", {}).items()


def validate_event(event: dict) -> None:
    """Raise ``jsonschema.ValidationError`` naming the first part of ``event`` that breaks the spec."""
    _validator(CORE).validate(event)
    for name, facet in _facets(event):
        try:
            _validator(facet["_schemaURL"]).validate(facet)
        except Exception as exc:
            raise AssertionError(f"facet {name!r}: {exc}") from exc
