"""The raw-point GX suite on small frames (real Great Expectations, no database)."""

from __future__ import annotations

import pandas as pd

from tasks.validate import load_suite, validate_partition

PARAMS = {"min_lon": 115.4, "max_lon": 117.6, "min_lat": 39.4, "max_lat": 41.1,
          "window_start": pd.Timestamp("2008-01-01", tz="UTC"), "window_end": pd.Timestamp("2009-01-01", tz="UTC"),
          "max_speed_mps": 60.0}


def frame(rows):
    df = pd.DataFrame(rows, columns=["object_id", "t", "lon", "lat"])
    df["t"] = pd.to_datetime(df["t"], utc=True)
    df.insert(0, "point_id", range(1, len(df) + 1))
    df["source_id"], df["source_line"] = 1, df["point_id"] + 1
    return df


def test_each_bad_row_is_quarantined_with_the_expectation_it_failed():
    df = frame([
        ("a", "2008-02-02 10:00:00", 116.40, 39.90),   # 1 ok
        ("a", "2008-02-02 10:01:00", 116.401, 39.90),  # 2 ok
        ("a", "2008-02-02 10:01:00", 116.401, 39.90),  # 3 exact repeat of 2
        ("a", "2008-02-02 09:59:00", 116.402, 39.90),  # 4 goes back in time
        ("a", "2008-02-02 10:02:00", 116.402, 45.0),   # 5 outside the bbox
        ("a", "2008-02-02 10:03:00", 117.40, 39.90),   # 6 ~85 km in 3 min from 2: implausible speed
        ("b", "2007-02-02 10:00:00", 116.40, 39.90),   # 7 outside the window
    ])
    clean, quarantined, summary = validate_partition(df, load_suite(), PARAMS)
    reasons = dict(zip(quarantined["point_id"], quarantined["reason"], strict=True))
    assert sorted(clean["point_id"]) == [1, 2]
    assert "exact duplicate" in reasons[3]
    assert "time does not increase" in reasons[4]
    assert "latitude outside the release bbox" in reasons[5] and "outside [-90, 90]" not in reasons[5]
    assert "implausible speed" in reasons[6]
    assert "outside the snapshot window" in reasons[7]
    kinds = dict(zip(quarantined["point_id"], quarantined["counts_as"], strict=True))
    assert kinds == {3: "duplicate", 4: "integrity", 5: "integrity", 6: "integrity", 7: "integrity"}
    by_name = {(e["expectation"], e["says"]): e["unexpected_count"] for e in summary}
    assert by_name[("expect_column_values_to_be_between(lat)", "latitude outside the release bbox")] == 1
    assert by_name[("expect_column_values_to_be_between(lat)", "latitude outside [-90, 90]")] == 0
    assert len(clean) + len(quarantined) == len(df)


def test_clean_frame_passes_every_expectation():
    df = frame([("a", f"2008-02-02 10:0{i}:00", 116.40 + i * 1e-3, 39.9) for i in range(5)])
    clean, quarantined, summary = validate_partition(df, load_suite(), PARAMS)
    assert len(clean) == 5 and quarantined.empty and all(e["success"] for e in summary)
