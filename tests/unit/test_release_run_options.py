"""`trajpub release run --bbox ... --window ...`: the spec's bbox and window, given on the command line instead,
validated as the spec's own fields are."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from flows.cli.release import release_spec_data
from trajpub.errors import ParameterError
from trajpub.spec import ReleaseSpec

SPEC = "dataset: taxis\nbbox: [115.4, 39.4, 117.6, 41.1]\nwindow_start: 2008-02-01\nwindow_end: 2008-02-09\n"


def _spec(tmp_path, bbox: str | None = None, window: str | None = None) -> ReleaseSpec:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return ReleaseSpec.from_dict(release_spec_data(path, None, {}, (), bbox, window))


def test_without_the_options_the_spec_file_decides(tmp_path):
    spec = _spec(tmp_path)
    assert spec.bbox == (115.4, 39.4, 117.6, 41.1)
    assert (spec.window_start, spec.window_end) == (datetime(2008, 2, 1, tzinfo=UTC), datetime(2008, 2, 9, tzinfo=UTC))


def test_bbox_and_window_replace_the_specs(tmp_path):
    spec = _spec(tmp_path, bbox="116.2, 39.7,116.6,40.1", window="2008-02-02/2008-02-03T12:00+08:00")
    assert spec.bbox == (116.2, 39.7, 116.6, 40.1)
    assert spec.window_start == datetime(2008, 2, 2, tzinfo=UTC)
    assert spec.window_end == datetime(2008, 2, 3, 4, tzinfo=UTC)  # 12:00 at UTC+8


def test_an_empty_side_of_the_window_is_open(tmp_path):
    spec = _spec(tmp_path, window="2008-02-04/")
    assert (spec.window_start, spec.window_end) == (datetime(2008, 2, 4, tzinfo=UTC), None)


@pytest.mark.parametrize(("bbox", "window", "says", "where"), [
    ("116.2,39.7,116.6", None, "--bbox must be four comma-separated numbers", "--bbox"),
    ("116.2,39.7,east,40.1", None, "bbox must be four numbers", "bbox"),
    ("116.6,39.7,116.2,40.1", None, "is not (min_lon, min_lat, max_lon, max_lat)", "grid.bbox"),
    (None, "2008-02-02", "--window must look like START/END", "--window"),
    (None, "2008-02-30/", "'2008-02-30' is not an ISO date or time", "window_start"),
    (None, "2008-02-05/2008-02-01", "window_start must be before window_end", "window"),
])
def test_bad_values_are_one_sentence_naming_the_option(tmp_path, bbox, window, says, where):
    with pytest.raises(ParameterError) as raised:
        _spec(tmp_path, bbox=bbox, window=window)
    assert says in raised.value.message and raised.value.where == where
