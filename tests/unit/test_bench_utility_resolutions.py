"""bench.utility_resolutions' command line: the seeds of a run or a tuning are a span or a list."""

import pytest

from bench.utility_resolutions import seed_list


def test_the_seeds_are_a_span_or_a_list_and_nothing_else():
    assert seed_list("12-15") == [12, 13, 14, 15] and seed_list("0,1,2") == [0, 1, 2] and seed_list("7") == [7]
    for bad in ("a-b", "1,x", "", "3-"):
        with pytest.raises(SystemExit, match="--seeds"):
            seed_list(bad)
