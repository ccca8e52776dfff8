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


def test_the_review_says_from_which_cell_size_a_release_is_useful():
    import numpy as np
    import pandas as pd

    from tasks.report import resolution_rows

    rng = np.random.default_rng(1)
    # 20 hot spots 50 m wide over a 17 x 11 km box
    centres = np.column_stack([rng.uniform(116.3, 116.5, 20), rng.uniform(39.9, 40.0, 20)])
    at = rng.integers(0, 20, 20000)
    raw = pd.DataFrame({"lon": centres[at, 0] + rng.normal(0, 0.0006, 20000),
                        "lat": centres[at, 1] + rng.normal(0, 0.00045, 20000)})
    rows, sentence = resolution_rows(raw, raw)
    assert [r[0] for r in rows] == ["250 m", "500 m", "1000 m", "2000 m"] and "Use at >= 250 m" in sentence
    # positions blurred by ~600 m (sd per axis): far from the raw's density at 250 m, closer at 2 km
    blurred = raw.assign(lon=raw["lon"] + rng.normal(0, 0.007, len(raw)), lat=raw["lat"] + rng.normal(0, 0.0054,
                                                                                                          len(raw)))
    rows, sentence = resolution_rows(raw, blurred)
    jsds = [float(r[1]) for r in rows]
    assert jsds == sorted(jsds, reverse=True) and jsds[0] > 0.1
    assert "Use at >= 250 m" not in sentence and "Use at" in sentence
    assert resolution_rows(raw.iloc[:1], raw) == ([], "")


def test_the_review_page_prints_the_table_by_resolution_and_its_sentence():
    import numpy as np
    import pandas as pd

    from tasks.report import render
    from tests.unit.test_review_record import REVIEW

    rng = np.random.default_rng(2)
    raw = pd.DataFrame({"lon": rng.uniform(116.3, 116.45, 3000), "lat": rng.uniform(39.9, 40.0, 3000),
                        "traj_id": np.arange(3000) // 10, "seq": np.arange(3000) % 10,
                        "t": pd.Timestamp("2008-02-04", tz="UTC") + pd.to_timedelta(np.arange(3000) % 10, "min")})
    page = render(REVIEW, raw, raw, None)
    assert "Utility by resolution" in page and "<td>250 m</td>" in page and "Use at &gt;= 250 m" in page
    assert "Utility by resolution" not in render(REVIEW, raw, None, None)
