"""Each shape of a candidate release declares its columns once and holds a candidate to them."""

import re
from pathlib import Path

import pandas as pd
import pytest

from mechanisms.registry import REGISTRY, mechanism
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import TrajpubError

POINTS = pd.DataFrame({"traj_id": [1, 1], "seq": [0, 1], "cell": [3, 4], "t": pd.NaT, "lon": [116.3, 116.4],
                       "lat": [39.9, 39.9]})
OWNERS = pd.DataFrame({"traj_id": [1], "object_id": ["a"], "source_traj_id": [7]})


def test_shapes_say_what_they_publish_and_how_they_are_attacked():
    assert [s.audit_kind for s in Shape] == ["synthetic", "truthful", "truthful", "truthful", "aggregate"]
    assert [s.product for s in Shape].count("fragments") == 1 and Shape.FRAGMENTS.product == "fragments"
    assert "set_id" in Shape.ANONYMITY_SETS.published and "set_id" not in Shape.TRUTHFUL.published
    assert {"t_end", "lon_min"} <= set(Shape.GENERALISED.published)
    assert "object_id" in Shape.TRUTHFUL.required and "object_id" not in Shape.TRUTHFUL.published


def test_a_candidate_with_its_shape_s_columns_passes():
    assert CandidateRelease(Shape.SYNTHETIC, POINTS.assign(x=0.0, y=0.0), {}).check()
    assert CandidateRelease(Shape.TRUTHFUL, POINTS.assign(object_id="a"), {}, owners=OWNERS).check()
    assert CandidateRelease(Shape.ANONYMITY_SETS, POINTS.assign(set_id=1), {}, owners=OWNERS).check()
    assert CandidateRelease(Shape.SYNTHETIC, POINTS.iloc[:0], {}).check().released_nothing


@pytest.mark.parametrize(("shape", "points", "owners", "says"), [
    (Shape.TRUTHFUL, POINTS, None, "missing column.*object_id"),
    (Shape.SYNTHETIC, POINTS.assign(object_id="a"), None, "belongs to nobody"),
    (Shape.SYNTHETIC, POINTS, OWNERS, "belongs to nobody"),
    (Shape.SYNTHETIC, POINTS.assign(set_id=1), None, "set_id are not part of the shape"),
    (Shape.ANONYMITY_SETS, POINTS.assign(set_id=1), None, "name their real members"),
    (Shape.GENERALISED, POINTS.assign(set_id=1, object_id="a"), None, "missing column.*lon_min"),
    (Shape.TRUTHFUL, POINTS.assign(object_id="a"), OWNERS.drop(columns="source_traj_id"), "source_traj_id"),
])
def test_a_candidate_off_its_shape_is_refused(shape, points, owners, says):
    with pytest.raises(TrajpubError, match=says):
        CandidateRelease(shape, points, {}, owners=owners).check()


def test_fragments_have_a_fragment_table_and_no_points():
    fragments = pd.DataFrame({"fragment_id": [1], "cells": [[3, 4]], "estimated_count": [2.0], "round": [1],
                              "lon": [[116.3, 116.4]], "lat": [[39.9, 39.9]]})
    assert not CandidateRelease(Shape.FRAGMENTS, pd.DataFrame(), {}, fragments=fragments).check().released_nothing
    with pytest.raises(TrajpubError, match="fragment table and no points"):
        CandidateRelease(Shape.FRAGMENTS, POINTS, {}, fragments=fragments).check()
    with pytest.raises(TrajpubError, match="no fragment table"):
        CandidateRelease(Shape.SYNTHETIC, POINTS, {}, fragments=fragments).check()


#: sql/023's map from mechanism to shape, as applied (an applied migration is never edited); its ELSE is synthetic.
SQL_023 = ({"fastpub": "fragments", "glove": "generalised", "klt": "generalised", "dummy": "anonymity_sets",
            "kpsi_anonymity": "anonymity_sets", "w4m": "anonymity_sets", "fgs_pufferfish": "truthful",
            "mixzone": "truthful"}, "synthetic")
#: the mechanisms registered when sql/023 was written: only their releases can predate the recorded shape
BEFORE_023 = ("adatrace", "citytrace", "dpt", "dummy", "fastpub", "fgs_pufferfish", "glove", "klt", "kpsi_anonymity",
              "mixzone", "objtrace", "prefix_tree", "w4m")


def sql_023_map() -> tuple[dict[str, str], str]:
    """sql/023's CASE map (mechanism -> shape) and its ELSE."""
    sql = (Path(__file__).parents[2] / "sql" / "023_release_shape.sql").read_text()
    return dict(re.findall(r"WHEN '(\w+)' THEN '(\w+)'", sql)), re.search(r"ELSE '(\w+)'", sql).group(1)


def test_the_applied_migration_that_backfills_shapes_is_unchanged():
    assert sql_023_map() == SQL_023


def test_the_migration_gives_each_mechanism_it_backfilled_the_shape_the_registry_declares():
    """sql/023 names the shape of releases staged before the summary recorded it, from their mechanism; a
    mechanism registered since records its shape from its first release, so only the earlier ones are held to it."""
    named, default = sql_023_map()
    registered = [name for name in BEFORE_023 if name in REGISTRY]
    assert {name: named.get(name, default) for name in registered} == {
        name: mechanism(name).shape.value for name in registered}
