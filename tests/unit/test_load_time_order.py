"""tasks.load.time_order: objects listed newest-first are put in time order at load; real regressions are kept."""

from __future__ import annotations

import pandas as pd

from tasks.load import time_order


def _points(rows: list[tuple[int, str, str]]) -> pd.DataFrame:
    """(source_line, object_id, time) rows; the position is a function of the line, so rows stay recognisable."""
    df = pd.DataFrame(rows, columns=["source_line", "object_id", "t"])
    df["t"] = pd.to_datetime(df["t"], utc=True)
    df["lon"] = 116.0 + df["source_line"] / 1000
    df["lat"] = 39.0 + df["source_line"] / 1000
    return df


def test_a_newest_first_object_is_put_in_time_order_in_its_own_slots():
    points = _points([
        (1, "rev", "2008-02-02 10:30"), (2, "asc", "2008-02-02 09:00"), (3, "rev", "2008-02-02 10:20"),
        (4, "asc", "2008-02-02 09:05"), (5, "rev", "2008-02-02 10:10"), (6, "rev", "2008-02-02 10:00"),
    ])
    ordered = time_order(points.sample(frac=1.0, random_state=3))  # the reader's row order does not matter
    out = ordered.points
    assert (ordered.n_reordered_objects, ordered.n_unordered_objects) == (1, 0)
    assert out["object_id"].tolist() == ["rev", "asc", "rev", "asc", "rev", "rev"]  # the file's slots
    rev = out[out["object_id"] == "rev"]
    assert rev["t"].is_monotonic_increasing and rev["source_line"].tolist() == [6, 5, 3, 1]
    assert out[out["object_id"] == "asc"]["source_line"].tolist() == [2, 4]
    # every row moves whole: its line still names its own time and position
    merged = out.merge(points, on="source_line", suffixes=("", "_file"))
    assert len(merged) == len(points)
    assert (merged["t"] == merged["t_file"]).all() and (merged["lon"] == merged["lon_file"]).all()


def test_points_at_the_same_time_keep_their_file_order():
    points = _points([(1, "a", "2008-02-02 10:10"), (2, "a", "2008-02-02 10:00"), (3, "a", "2008-02-02 10:00")])
    out = time_order(points).points
    assert out["source_line"].tolist() == [2, 3, 1]


def test_an_object_going_back_and_forth_is_kept_in_file_order_for_validation_to_quarantine():
    rows = [(1, "jump", "2008-02-02 10:00"), (2, "jump", "2008-02-02 10:05"), (3, "jump", "2008-02-02 09:00"),
            (4, "jump", "2008-02-02 10:10"), (5, "flat", "2008-02-02 11:00"), (6, "flat", "2008-02-02 11:00")]
    ordered = time_order(_points(rows))
    assert (ordered.n_reordered_objects, ordered.n_unordered_objects) == (0, 1)
    assert ordered.points["source_line"].tolist() == [1, 2, 3, 4, 5, 6]
