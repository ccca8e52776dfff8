"""bench.utility_resolutions' command line: the seeds of a run or a tuning are a span or a list."""

import pytest

from bench.utility_resolutions import seed_list


def test_the_seeds_are_a_span_or_a_list_and_nothing_else():
    assert seed_list("12-15") == [12, 13, 14, 15] and seed_list("0,1,2") == [0, 1, 2] and seed_list("7") == [7]
    for bad in ("a-b", "1,x", "", "3-"):
        with pytest.raises(SystemExit, match="--seeds"):
            seed_list(bad)


def test_square_cells_score_a_release_against_its_raw():
    import numpy as np
    import pandas as pd

    from bench.utility_resolutions import square_cells

    core = (116.2, 39.75, 116.55, 40.05)
    rng = np.random.default_rng(0)
    raw = pd.DataFrame({"lon": rng.uniform(116.3, 116.4, 5000), "lat": rng.uniform(39.9, 39.95, 5000)})
    same = square_cells(raw, raw, core)
    assert same["hot_500m"] == 10 and same["empty_500m"] == 0.0
    assert all(same[f"jsd_{m}m"] == 0.0 for m in (250, 500, 1000, 2000))
    # a release moved 10 km east lies where the raw has nothing: no hot spot kept, all its mass on empty cells
    moved = square_cells(raw, raw.assign(lon=raw["lon"] + 0.12), core)
    assert moved["hot_500m"] == 0 and moved["empty_500m"] == 1.0 and moved["jsd_500m"] > 0.6
