"""The utility benchmarks' data: the shared T-Drive and GeoLife samples, cleaned one way.

Cleaning ("Anchors to beat"): points inside a Beijing bbox; local time -> UTC; a trajectory is cut at a
gap > 30 min and at UTC midnight (:func:`trajpub.segment.segment`); consecutive duplicate points (same lon, lat
as the previous point of the piece) dropped; pieces with < 2 points dropped. On the T-Drive sample this gives
4,283 records, 328,376 points, 287 taxis (checked by ``tests/unit/test_utility_data.py``).

- T-Drive (``tdrive_sample_odd_taxis.csv.gz``, Beijing time): bbox :data:`TDRIVE_BBOX` = lon 115.4-117.6,
  lat 39.4-41.1 (the issue's).
- Cabspotting (``cabspotting_sf_odd_cabs_3days.csv.gz``, San Francisco local time): bbox :data:`SF_BBOX` = lon
  -122.6 to -122.0, lat 37.2-38.0 (53 x 89 km: the San Francisco peninsula and the East Bay shore, the extent of
  the outside evaluation's release), its metric cells over :data:`SF_CORE` (32 x 44 km, the city and the airport).
- GeoLife (``skmob_geolife_sample.txt.gz``, 2 users, times in UTC as GeoLife's PLT files): bbox
  :data:`GEOLIFE_BBOX` = lon 116.0-116.8, lat 39.6-40.3, the Beijing urban area inside the 5th/6th ring road
  where GeoLife users mostly move (chosen by us; trips out of Beijing are dropped, as points outside the bbox).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from trajpub.config import SHARED_DATA_DIR as DATA
from trajpub.segment import segment
from trajpub.window import ReleaseWindow

TDRIVE_BBOX = (115.4, 39.4, 117.6, 41.1)
GEOLIFE_BBOX = (116.0, 39.6, 116.8, 40.3)
SF_BBOX = (-122.6, 37.2, -122.0, 38.0)
SF_CORE = (-122.55, 37.55, -122.19, 37.95)
#: The public windows of the samples' releases (where a synthesizer places its timestamps), in Beijing time.
TDRIVE_WINDOW = ReleaseWindow(datetime(2008, 2, 2, tzinfo=UTC), datetime(2008, 2, 9, tzinfo=UTC), "Asia/Shanghai")
GEOLIFE_WINDOW = ReleaseWindow(datetime(2008, 10, 1, tzinfo=UTC), datetime(2009, 4, 1, tzinfo=UTC), "Asia/Shanghai")
MAX_GAP_S = 30 * 60
COLUMNS = ["object_id", "traj_id", "t", "lon", "lat"]


def clean(points: pd.DataFrame, bbox: tuple[float, float, float, float]) -> pd.DataFrame:
    """``object_id, t (UTC), lon, lat`` -> ``object_id, traj_id, t, lon, lat``, cleaned as the module says.

    ``traj_id`` is 0..n-1 in (object_id, t) order; rows are sorted by traj_id, t."""
    inside = points["lon"].between(bbox[0], bbox[2]) & points["lat"].between(bbox[1], bbox[3])
    df = segment(points[inside.to_numpy()], MAX_GAP_S, True)
    same = df["traj_id"].eq(df["traj_id"].shift()) & df["lon"].eq(df["lon"].shift()) & \
        df["lat"].eq(df["lat"].shift())
    df = df[~same.to_numpy()]
    df = df[df.groupby("traj_id")["traj_id"].transform("size").to_numpy() >= 2]
    df = df.assign(traj_id=pd.factorize(df["traj_id"])[0])
    return df[COLUMNS].reset_index(drop=True)


def tdrive_records(path: Path = DATA / "tdrive_sample_odd_taxis.csv.gz") -> pd.DataFrame:
    """T-Drive taxis in the sample's format (``taxi_id,datetime,longitude,latitude``, Beijing time), cleaned; by
    default the sample (300 odd taxis, 2-8 Feb 2008): 4,283 records of 287 taxis."""
    d = pd.read_csv(path)
    t = pd.to_datetime(d["datetime"]).dt.tz_localize("Asia/Shanghai").dt.tz_convert("UTC")
    points = pd.DataFrame({"object_id": d["taxi_id"].astype(str), "t": t, "lon": d["longitude"],
                           "lat": d["latitude"]})
    return clean(points, TDRIVE_BBOX)


def sf_records() -> pd.DataFrame:
    """The Cabspotting sample (255 cabs, 18-20 May 2008; read by :func:`bench.sf_data.load_sf`), cleaned in
    SF_BBOX (the gate's bench, :mod:`bench.sf_data`, uses a Bay Area box further east; this one is the extent of
    the outside evaluation's measurement)."""
    from bench.sf_data import load_sf

    return clean(load_sf(), SF_BBOX)


def geolife_records() -> pd.DataFrame:
    """The scikit-mobility GeoLife sample (users 001 and 005, Oct 2008 - Mar 2009), cleaned in GEOLIFE_BBOX."""
    g = pd.read_csv(DATA / "skmob_geolife_sample.txt.gz")
    points = pd.DataFrame({"object_id": g["uid"].astype(str), "t": pd.to_datetime(g["datetime"], utc=True),
                           "lon": g["lng"], "lat": g["lat"]})
    return clean(points, GEOLIFE_BBOX)


def taxi_halves(records: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The records split by object into two halves, (tuning, report): objects in sorted id order, the even
    positions tune hyper-parameters, the odd ones are held out for reporting (a public, data-independent rule)."""
    ids = pd.Series(sorted(records["object_id"].unique()))
    tune = records["object_id"].isin(set(ids[0::2]))
    return records[tune.to_numpy()].reset_index(drop=True), records[~tune.to_numpy()].reset_index(drop=True)
