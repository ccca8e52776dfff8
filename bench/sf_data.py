"""The shipped San Francisco sample (Cabspotting, ``cabspotting_sf_odd_cabs_3days.csv.gz``: 255 cabs, 18-20 May
2008, fixes about 60 s apart, times in America/Los_Angeles local time) as the benchmarks read it: UTC, cleaned by the
flow's validation rules (:func:`bench.tdrive.validated`) in :data:`SF_BBOX`.

:data:`SF_BBOX` (lon -122.55 to -121.95, lat 37.3 to 38.0) is a public rectangle of the Bay Area around San Francisco
(the city, SFO, Oakland and the Peninsula to San Jose's edge), chosen from the map, not from the data; the
window is the sample's three local days.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from bench.tdrive import validated
from trajpub.config import SHARED_DATA_DIR
from trajpub.window import ReleaseWindow

SF_SAMPLE = SHARED_DATA_DIR / "cabspotting_sf_odd_cabs_3days.csv.gz"
SF_TZ = "America/Los_Angeles"
SF_BBOX = (-122.55, 37.3, -121.95, 38.0)
SF_WINDOW = ReleaseWindow(datetime(2008, 5, 18, 7, tzinfo=UTC), datetime(2008, 5, 21, 7, tzinfo=UTC), SF_TZ)
"""18-20 May 2008, local days (PDT, UTC-7)."""


def load_sf() -> pd.DataFrame:
    """The sample as ``object_id, t (UTC), lon, lat``."""
    d = pd.read_csv(SF_SAMPLE)
    t = pd.to_datetime(d["datetime"]).dt.tz_localize(SF_TZ).dt.tz_convert("UTC")
    return pd.DataFrame({"object_id": d["taxi_id"].astype(str), "t": t, "lon": d["longitude"],
                         "lat": d["latitude"]})


def load_clean_sf() -> tuple[pd.DataFrame, dict]:
    """The sample without the points the flow's validation quarantines in :data:`SF_BBOX`."""
    return validated(load_sf(), SF_BBOX)
