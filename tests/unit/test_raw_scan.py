"""The raw-statistic scan finds an exact statistic wherever a consumer reads it: a JSON leaf or a number in a
text; it passes identifiers and the release's own id, and other numbers."""

from __future__ import annotations

import pytest

from tests.raw_scan import assert_none_readable

FORBIDDEN = {"points": 1234.0, "lon_min": 116.123456}


@pytest.mark.parametrize("readable", [{"card": {"n": 1234}}, {"card": ["kept 1234 points"]},
                                      {"event": {"facets": {"bbox": [116.123456, 39.9]}}}])
def test_a_raw_statistic_is_found_in_a_leaf_or_a_text(readable):
    with pytest.raises(AssertionError, match="is readable in"):
        assert_none_readable(FORBIDDEN, readable)


def test_identifiers_the_release_id_and_other_numbers_pass():
    assert_none_readable(FORBIDDEN, {"card": {"release_id": 1234, "text": "release 1234 of pub_1234", "n": 1235,
                                              "lon": 116.1234}}, release_id=1234)
