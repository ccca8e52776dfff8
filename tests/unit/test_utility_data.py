"""The benchmarks' cleaning of the shared samples (figures of the T-Drive sample)."""

from __future__ import annotations

import pandas as pd

from bench.utility_data import GEOLIFE_BBOX, clean, geolife_records, tdrive_records


def test_tdrive_records_match_the_issue() -> None:
    d = tdrive_records()
    assert (d["traj_id"].nunique(), len(d), d["object_id"].nunique()) == (4283, 328_376, 287)
    assert str(d["t"].dt.tz) == "UTC"
    assert d.groupby("traj_id")["t"].apply(lambda t: t.dt.floor("D").nunique()).max() == 1


def test_clean_cuts_gaps_midnight_and_drops_repeats_and_singletons() -> None:
    t = pd.to_datetime(["2008-02-02 23:50:00", "2008-02-02 23:55:00", "2008-02-02 23:55:30", "2008-02-03 00:01:00",
                        "2008-02-03 00:02:00", "2008-02-03 01:00:00", "2008-02-03 01:01:00"], utc=True)
    pts = pd.DataFrame({"object_id": "a", "t": t, "lon": [116.0, 116.1, 116.1, 116.2, 116.3, 116.4, 99.0],
                        "lat": 39.9})
    out = clean(pts, (115.4, 39.4, 117.6, 41.1))
    # piece 1: 23:50, 23:55 (the 23:55:30 repeat dropped); piece 2: 00:01, 00:02; 01:00 alone (01:01 outside)
    assert out.groupby("traj_id").size().tolist() == [2, 2]
    assert out["lon"].tolist() == [116.0, 116.1, 116.2, 116.3]


def test_geolife_records_stay_in_their_bbox() -> None:
    g = geolife_records()
    assert g["object_id"].nunique() == 2
    assert g["lon"].between(GEOLIFE_BBOX[0], GEOLIFE_BBOX[2]).all()
    assert (g.groupby("traj_id").size() >= 2).all()
