"""Readers of trajpub.formats: exact small cases written to tmp_path, plus the real sample files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyproj import Transformer

from trajpub import config, formats
from trajpub.errors import InputError, ParameterError

DATA = config.SHARED_DATA_DIR
TDRIVE_CSV = DATA / "tdrive_sample_odd_taxis.csv.gz"
SKMOB_CSV = DATA / "skmob_geolife_sample.txt.gz"
MPD_CSV = DATA / "mpd_demodata_geolife.csv"
MPD_GPKG = DATA / "mpd_demodata_geolife.gpkg"

BAD_TDRIVE = (
    "taxi_id,datetime,longitude,latitude\n"       # line 1: header
    "1,2008-02-02 15:36:08,116.5,39.9\n"          # 2 good
    "1,2008-02-02 15:46:08,116.5\n"               # 3 three fields
    "\n"                                          # 4 blank: not a record
    "2,abc,116.5,39.9\n"                          # 5 bad time
    "2,2008-02-02 15:46:08,116.5,95.0\n"          # 6 lat 95
    "3,2008-02-02 15:46:08,NaN,39.9\n"            # 7 NaN
    ",2008-02-02 15:46:08,116.5,39.9\n"           # 8 no taxi id
    "4,2008-02-02 15:46:08,x1,39.9\n"             # 9 not a number
    "5,2008-02-02 15:46:08,200,-91\n"             # 10 two bad coordinates
    '"6,a",2008-02-02 15:56:08,116.25,39.75\n'    # 11 good, quoted id holding the separator
    "7,2008-02-02 15:46:08,,39.9\r\n"             # 12 empty lon (CRLF)
    "8,2008-02-02 15:46:08,1,2,3\n"               # 13 five fields
)
BAD_TDRIVE_REASONS = {
    3: "wrong number of fields: 3, expected 4",
    5: "datetime 'abc' does not parse as %Y-%m-%d %H:%M:%S",
    6: "latitude 95.0 is outside [-90, 90]",
    7: "longitude is NaN",
    8: "taxi_id (the object id) is empty",
    9: "longitude 'x1' is not a number",
    10: "longitude 200 is outside [-180, 180]; latitude -91 is outside [-90, 90]",
    12: "longitude is empty",
    13: "wrong number of fields: 5, expected 4",
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def assert_accounted(parsed: formats.ParsedSource) -> None:
    """Every record read is either a point or a reject, exactly once."""
    assert len(parsed.points) + len(parsed.rejects) == parsed.n_read
    lines = np.concatenate([parsed.points["source_line"].to_numpy(),
                            parsed.rejects["source_line"].to_numpy()])
    assert len(np.unique(lines)) == len(lines)
    assert str(parsed.points["t"].dtype) == "datetime64[us, UTC]"
    assert parsed.points["lon"].between(-180, 180).all() and parsed.points["lat"].between(-90, 90).all()
    assert (parsed.rejects["reason"].str.len() > 0).all()


# --- T-Drive ------------------------------------------------------------------------------------------------

def test_tdrive_rejects_each_malformed_line_with_its_reason(tmp_path):
    parsed = formats.parse("tdrive", write(tmp_path / "bad.csv", BAD_TDRIVE))
    assert_accounted(parsed)
    assert parsed.n_read == 11  # 12 lines after the header, one of them blank
    assert dict(zip(parsed.rejects["source_line"], parsed.rejects["reason"])) == BAD_TDRIVE_REASONS
    records = dict(zip(parsed.rejects["source_line"], parsed.rejects["record"]))
    assert records[6] == "2,2008-02-02 15:46:08,116.5,95.0"
    assert records[12] == "7,2008-02-02 15:46:08,,39.9"
    points = parsed.points.set_index("source_line")
    assert list(points.index) == [2, 11]
    assert list(points["object_id"]) == ["1", "6,a"]
    # Beijing local time (UTC+8) -> UTC
    assert points.loc[2, "t"] == pd.Timestamp("2008-02-02 07:36:08", tz="UTC")
    assert points.loc[11, "t"] == pd.Timestamp("2008-02-02 07:56:08", tz="UTC")
    assert (points.loc[11, "lon"], points.loc[11, "lat"]) == (116.25, 39.75)


def test_tdrive_folder_of_text_files_numbers_lines_across_sorted_files(tmp_path):
    folder = tmp_path / "taxi_log"
    write(folder / "1.txt", "1,2008-02-02 15:36:08,116.51172,39.92123\n"
                            "1,2008-02-02 15:46:08,116.51135,39.93883\n")
    write(folder / "2.txt", "2,2008-02-02 13:00:00,116.4,39.9\n2,2008-02-02 13:05:00,116.4,91\n")
    write(folder / "notes.md", "not a trajectory\n")
    parsed = formats.parse("tdrive", folder)
    assert_accounted(parsed)
    assert [p.name for p in parsed.files] == ["1.txt", "2.txt"]
    assert list(parsed.points["source_line"]) == [1, 2, 3]
    assert list(parsed.points["object_id"]) == ["1", "1", "2"]
    assert parsed.points["t"].iloc[2] == pd.Timestamp("2008-02-02 05:00:00", tz="UTC")
    assert parsed.rejects["source_line"].tolist() == [4]
    assert parsed.rejects["reason"].iloc[0] == "latitude 91 is outside [-90, 90] (file 2.txt, line 2)"


def test_tdrive_real_sample():
    parsed = formats.parse("tdrive", TDRIVE_CSV)
    assert_accounted(parsed)
    assert parsed.n_read == 402_428 and len(parsed.rejects) == 0
    assert parsed.points["object_id"].nunique() == 299
    assert parsed.points["source_line"].iloc[0] == 2
    # the data is 2008-02-02 .. 02-08 in Beijing time: first fix 13:31:16 local, last 17:39:18 local
    assert parsed.points["t"].min() == pd.Timestamp("2008-02-02 05:31:16", tz="UTC")
    assert parsed.points["t"].max() == pd.Timestamp("2008-02-08 09:39:18", tz="UTC")


# --- GeoLife ------------------------------------------------------------------------------------------------

PLT_HEADER = ("Geolife trajectory\nWGS 84\nAltitude is in Feet\nReserved 3\n"
              "0,2,255,My Track,0,0,2,8421376\n0\n")


def make_geolife(root: Path) -> Path:
    data = root / "Geolife Trajectories 1.3" / "Data"
    write(data / "000" / "Trajectory" / "20081023025304.plt", PLT_HEADER
          + "39.984702,116.318417,0,492,39744.1201851852,2008-10-23,02:53:04\n"
          + "39.984683,116.31845,0,492,39744.1202546296,2008-10-23,02:53:10\n")
    write(data / "000" / "Trajectory" / "20081024020959.plt", PLT_HEADER
          + "40.008304,116.319876,0,492,39745.0902662037,2008-10-24,02:09:59\n"
          + "40.008413,116.319962,0,492,39745.0903240741,2008-10-24,2:10:xx\n")
    write(data / "010" / "Trajectory" / "20070804033032.plt", PLT_HEADER
          + "39.921712,116.472343,0,13,39298.1462037037,2007-08-04,03:30:32\n"
          + "39.921705,116.472343,0,13\n")
    write(data / "010" / "labels.txt", "Start Time\tEnd Time\tTransportation Mode\n")
    return data


def test_geolife_plt_folder(tmp_path):
    data = make_geolife(tmp_path)
    parsed = formats.parse("geolife", data.parent)
    assert_accounted(parsed)
    assert parsed.n_read == 6 and len(parsed.points) == 4
    assert [p.name for p in parsed.files] == [
        "20081023025304.plt", "20081024020959.plt", "20070804033032.plt"]
    assert parsed.points["object_id"].tolist() == ["000", "000", "000", "010"]
    # header lines count: data starts at line 7 of each 8-line file
    assert parsed.points["source_line"].tolist() == [7, 8, 15, 23]
    assert parsed.points["t"].iloc[0] == pd.Timestamp("2008-10-23 02:53:04", tz="UTC")  # GMT, unchanged
    assert (parsed.points["lat"].iloc[0], parsed.points["lon"].iloc[0]) == (39.984702, 116.318417)
    reasons = dict(zip(parsed.rejects["source_line"], parsed.rejects["reason"]))
    assert reasons == {
        16: "date time '2008-10-24 2:10:xx' does not parse as %Y-%m-%d %H:%M:%S "
            "(file Data/000/Trajectory/20081024020959.plt, line 8)",
        24: "wrong number of fields: 4, expected 7 (file Data/010/Trajectory/20070804033032.plt, line 8)",
    }
    # Data/ itself gives the same points
    again = formats.parse("geolife", data)
    pd.testing.assert_frame_equal(again.points, parsed.points)


def test_geolife_real_csv_layouts():
    skmob = formats.parse("geolife", SKMOB_CSV)
    assert_accounted(skmob)
    assert skmob.n_read == 217_653 and len(skmob.rejects) == 0
    assert skmob.points["object_id"].value_counts().to_dict() == {"005": 109_046, "001": 108_607}
    # lat/lng not swapped: most fixes are in Beijing (user 005 also went to Macau)
    assert 116.2 < skmob.points["lon"].median() < 116.5 and 39.8 < skmob.points["lat"].median() < 40.1

    mpd = formats.parse("geolife", MPD_CSV)
    assert_accounted(mpd)
    assert mpd.n_read == 5_908 and len(mpd.rejects) == 0
    first = mpd.points.iloc[0]
    assert (first["object_id"], first["lon"], first["lat"]) == ("19", 116.391305, 39.898573)
    assert first["t"] == pd.Timestamp("2008-12-11 04:42:14", tz="UTC")


def test_geopackage_and_csv_of_the_same_points_agree():
    gpkg = formats.parse("gpkg", MPD_GPKG, {"object_id": "tracker"})
    csv = formats.parse("geolife", MPD_CSV)
    assert_accounted(gpkg)
    assert gpkg.points["source_line"].tolist() == list(range(1, 5_909))
    cols = ["object_id", "t", "lon", "lat"]
    pd.testing.assert_frame_equal(gpkg.points[cols], csv.points[cols])


# --- generic CSV --------------------------------------------------------------------------------------------

def test_csv_mapping_separator_and_timezone(tmp_path):
    path = write(tmp_path / "paris.csv",
                 "who;when;x;y\n"
                 "a;2021-03-28 01:30:00;2.35;48.85\n"     # CET (UTC+1)
                 "a;2021-03-28 02:30:00;2.35;48.85\n"     # does not exist: clocks jump 02:00 -> 03:00
                 "a;2021-03-28 03:30:00;2.35;48.85\n"     # CEST (UTC+2)
                 "b;28/03/2021;2.35;48.85\n")
    parsed = formats.parse("csv", path, {"object_id": "who", "t": "when", "lon": "x", "lat": "y", "sep": ";",
                                         "timezone": "Europe/Paris", "time_format": "%Y-%m-%d %H:%M:%S"})
    assert_accounted(parsed)
    assert parsed.points["t"].tolist() == [pd.Timestamp("2021-03-28 00:30", tz="UTC"),
                                           pd.Timestamp("2021-03-28 01:30", tz="UTC")]
    assert dict(zip(parsed.rejects["source_line"], parsed.rejects["reason"])) == {
        3: "when '2021-03-28 02:30:00' does not exist or is ambiguous in timezone Europe/Paris",
        5: "when '28/03/2021' does not parse as %Y-%m-%d %H:%M:%S",
    }


def test_csv_iso_times_with_offsets_and_gzip(tmp_path):
    path = tmp_path / "iso.csv.gz"
    path.write_bytes(gzip.compress(b"id,time,lon,lat\nk,2020-01-01T08:00:00+08:00,1.5,2.5\n"
                                   b"k,2020-01-01T00:00:01Z,1.5,2.5\nk,2020-01-01T00:00:02,1.5,2.5\n"))
    parsed = formats.parse("csv", path, {"object_id": "id", "t": "time", "lon": "lon", "lat": "lat"})
    assert parsed.points["t"].tolist() == [pd.Timestamp("2020-01-01 00:00:00", tz="UTC"),
                                           pd.Timestamp("2020-01-01 00:00:01", tz="UTC"),
                                           pd.Timestamp("2020-01-01 00:00:02", tz="UTC")]


def test_csv_unix_times(tmp_path):
    path = write(tmp_path / "unix.csv", "id,ts,lon,lat\nk,1600000000,1,2\nk,soon,1,2\n")
    parsed = formats.parse("csv", path, {"object_id": "id", "t": "ts", "lon": "lon", "lat": "lat",
                                         "time_format": "unix"})
    assert parsed.points["t"].tolist() == [pd.Timestamp("2020-09-13 12:26:40", tz="UTC")]
    assert parsed.rejects["reason"].tolist() == ["ts 'soon' does not parse as unix"]


def test_csv_options_are_checked():
    with pytest.raises(ParameterError, match="needs option.*lat") as err:
        formats.get_format("csv", {"object_id": "a", "t": "b", "lon": "c"})
    with pytest.raises(ParameterError, match="unknown option.*colour.*allowed: lat, lon, object_id, sep, t, "
                                             "time_format, timezone"):
        formats.get_format("csv", {"object_id": "a", "t": "b", "lon": "c", "lat": "d", "colour": "red"})
    with pytest.raises(ParameterError, match="unknown option.*for format tdrive; allowed: none"):
        formats.get_format("tdrive", {"sep": ";"})
    with pytest.raises(ParameterError, match="unknown timezone"):
        formats.get_format("csv", {"object_id": "a", "t": "b", "lon": "c", "lat": "d",
                                   "timezone": "Mars/Olympus"})
    with pytest.raises(ParameterError,
                       match="unknown format 'kml'; allowed: tdrive, geolife, csv, gpkg, geojson"):
        formats.parse("kml", "whatever.kml")
    assert err.value.where == "format csv"


def test_csv_missing_columns(tmp_path):
    path = write(tmp_path / "cols.csv", "id,time,lon\nk,2020-01-01,1\n")
    with pytest.raises(InputError, match="missing column.*lat; found id, time, lon") as err:
        formats.parse("csv", path, {"object_id": "id", "t": "time", "lon": "lon", "lat": "lat"})
    assert err.value.where == f"file {path}, line 1"


# --- unusable files -----------------------------------------------------------------------------------------

def test_missing_empty_and_foreign_files(tmp_path):
    with pytest.raises(InputError, match="does not exist") as err:
        formats.parse("tdrive", tmp_path / "nope.csv")
    assert str(tmp_path / "nope.csv") in err.value.where
    with pytest.raises(InputError, match="no data rows"):
        formats.parse("tdrive", write(tmp_path / "empty.csv", ""))
    with pytest.raises(InputError, match="no data rows"):
        formats.parse("tdrive", write(tmp_path / "header_only.csv",
                                      "taxi_id,datetime,longitude,latitude\n\n"))
    expected = "none of the expected columns taxi_id, datetime, longitude, latitude"
    with pytest.raises(InputError, match=expected) as err:
        formats.parse("tdrive", write(tmp_path / "foreign.csv", "a,b,c\nx,y,z\n"))
    assert err.value.where.endswith("foreign.csv, line 1")
    with pytest.raises(InputError, match="matches no GeoLife layout"):
        formats.parse("geolife", write(tmp_path / "foreign2.csv", "a,b,c\nx,y,z\n"))
    with pytest.raises(InputError, match="no GeoLife .plt files"):
        formats.parse("geolife", tmp_path)
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes(b"taxi_id,datetime,longitude,latitude\n1,2008-02-02 15:36:08,116.5,39.9\n\xe9,x,1,2\n")
    with pytest.raises(InputError, match="not UTF-8") as err:
        formats.parse("tdrive", latin1)
    assert err.value.where.endswith("latin1.csv, line 3")


CSV_OPTIONS = {"object_id": "id", "t": "t", "lon": "x", "lat": "y"}


@pytest.mark.parametrize(("fmt", "options"), [("tdrive", None), ("csv", CSV_OPTIONS), ("geolife", None)])
@pytest.mark.parametrize("first_line", ["x" * 10_000_000, "a," * 5_000_000, '"' + "x" * 200_000 + '"'])
def test_a_10_mb_first_line_is_no_header_in_one_sentence(tmp_path, fmt, options, first_line):
    """A first line of 10 MB (a file without its header, or not text at all) was a ``_csv.Error`` traceback."""
    path = write(tmp_path / "long.csv", "\n" + first_line + "\n1,2008-02-02 15:36:08,116.5,39.9\n")
    with pytest.raises(InputError, match="the header line is .* characters long|cannot be split") as err:
        formats.parse(fmt, path, options)
    assert err.value.where == f"file {path}, line 2" and len(err.value.message) < 300


def test_every_record_is_either_a_point_or_a_reject(tmp_path):
    """The accounting invariant for every reader, on rows where everything is wrong at once."""
    # (the first line has a number, so the headerless T-Drive reader does not take it for a header)
    junk = "\n".join(["x,nan,inf,-inf", ",,,", "a,b", "1,2008-13-45 99:99:99,1e400,-0",
                      '",",",",","'] * 3) + "\n"
    cases = [
        ("tdrive", write(tmp_path / "t.txt", junk), None),
        ("csv", write(tmp_path / "c.csv", "o,t,x,y\n" + junk),
         {"object_id": "o", "t": "t", "lon": "x", "lat": "y"}),
        ("geolife", write(tmp_path / "Data" / "1" / "Trajectory" / "x.plt", PLT_HEADER + junk), None),
    ]
    for fmt, path, options in cases:
        parsed = formats.parse(fmt, path, options)
        assert_accounted(parsed)
        assert parsed.n_read == 15 and len(parsed.points) == 0, fmt


# --- GeoJSON and GeoPackage ---------------------------------------------------------------------------------

def feature(geometry: dict | None, oid: str = "a", t: str = "2020-01-01T00:00:00Z") -> dict:
    return {"type": "Feature", "properties": {"object_id": oid, "t": t}, "geometry": geometry}


def write_geojson(path: Path, features: list[dict], crs: object = "absent") -> Path:
    doc: dict = {"type": "FeatureCollection", "features": features}
    if crs != "absent":
        doc["crs"] = crs
    path.write_text(json.dumps(doc))
    return path


def test_geojson_in_utm_is_reprojected_and_non_points_rejected(tmp_path):
    utm = {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32650"}}
    path = write_geojson(tmp_path / "utm.geojson", [
        feature({"type": "Point", "coordinates": [450000.0, 4400000.0]}),
        feature({"type": "LineString", "coordinates": [[450000, 4400000], [450010, 4400010]]}, oid="b"),
        feature(None, oid="c"),
        feature({"type": "Point", "coordinates": [451000.0, 4401000.0]}, oid="", t="2020-01-01T00:00:05Z"),
        feature({"type": "Point", "coordinates": [452000.0, 4402000.0]}, t="yesterday"),
    ], crs=utm)
    parsed = formats.parse("geojson", path)
    assert_accounted(parsed)
    lon, lat = Transformer.from_crs("EPSG:32650", "EPSG:4326", always_xy=True).transform(450000.0, 4400000.0)
    assert parsed.points["lon"].iloc[0] == pytest.approx(lon, abs=1e-9)
    assert parsed.points["lat"].iloc[0] == pytest.approx(lat, abs=1e-9)
    assert 116 < lon < 118 and 39 < lat < 40.5
    assert dict(zip(parsed.rejects["source_line"], parsed.rejects["reason"])) == {
        2: "geometry is a LineString, expected a Point",
        3: "geometry is missing",
        4: "object_id (the object id) is empty",
        5: "t 'yesterday' does not parse as ISO8601",
    }
    record = json.loads(parsed.rejects["record"].iloc[0])
    assert record["geometry"]["coordinates"][0] == [450000.0, 4400000.0]  # as read, not reprojected
    assert record["properties"]["object_id"] == "b"


def test_geojson_without_crs_member_is_wgs84_and_metres_do_not_slip_in(tmp_path):
    path = write_geojson(tmp_path / "rfc7946.geojson", [
        feature({"type": "Point", "coordinates": [116.4, 39.9]}),
        feature({"type": "Point", "coordinates": [450000.0, 4400000.0]}),
    ])
    parsed = formats.parse("geojson", path)
    assert_accounted(parsed)
    assert (parsed.points["lon"].tolist(), parsed.points["lat"].tolist()) == ([116.4], [39.9])
    assert parsed.rejects["reason"].tolist() == [
        "longitude 450000.0 is outside [-180, 180]; latitude 4400000.0 is outside [-90, 90]"]


def test_geojson_with_null_crs_is_refused(tmp_path):
    path = write_geojson(tmp_path / "nullcrs.geojson", [feature({"type": "Point", "coordinates": [1, 2]})],
                         crs=None)
    with pytest.raises(InputError, match='"crs": null, which means no CRS can be assumed') as err:
        formats.parse("geojson", path)
    assert "nullcrs.geojson" in err.value.where


def test_geopackage_without_crs_is_refused(tmp_path):
    import geopandas as gpd
    import shapely

    path = tmp_path / "nocrs.gpkg"
    frame = gpd.GeoDataFrame({"object_id": ["a"], "t": ["2020-01-01T00:00:00Z"]},
                             geometry=[shapely.Point(450000, 4400000)], crs=None)
    with pytest.warns(UserWarning):
        frame.to_file(path, driver="GPKG", layer="pts")
    with pytest.raises(InputError, match="the layer has no CRS") as err:
        formats.parse("gpkg", path)
    assert err.value.where.endswith("layer pts")
    with pytest.raises(InputError, match="no layer 'other'; the file has pts"):
        formats.parse("gpkg", path, {"layer": "other"})
    with pytest.raises(InputError, match="missing column.*who"):
        frame.set_crs(32650).to_file(tmp_path / "utm.gpkg", driver="GPKG", layer="pts")
        formats.parse("gpkg", tmp_path / "utm.gpkg", {"object_id": "who"})


def test_geopackage_in_another_crs_is_reprojected(tmp_path):
    import geopandas as gpd
    import shapely

    path = tmp_path / "utm.gpkg"
    when = pd.to_datetime(["2020-01-01 00:00", "2020-01-01 00:01"])
    frame = gpd.GeoDataFrame({"taxi": [7, 8], "when": when},
                             geometry=[shapely.Point(450000, 4400000), shapely.Point(450100, 4400100)],
                             crs="EPSG:32650")
    frame.to_file(path, driver="GPKG", layer="pts")
    parsed = formats.parse("gpkg", path, {"object_id": "taxi", "t": "when"})
    assert_accounted(parsed)
    expect = Transformer.from_crs("EPSG:32650", "EPSG:4326", always_xy=True).transform([450000, 450100],
                                                                                      [4400000, 4400100])
    np.testing.assert_allclose(parsed.points["lon"], expect[0], atol=1e-9)
    np.testing.assert_allclose(parsed.points["lat"], expect[1], atol=1e-9)
    assert parsed.points["object_id"].tolist() == ["7", "8"]
    assert parsed.points["t"].tolist() == [pd.Timestamp("2020-01-01 00:00", tz="UTC"),
                                           pd.Timestamp("2020-01-01 00:01", tz="UTC")]


def test_seconds_60_and_61_are_quarantined_not_rolled_over(tmp_path):
    """Finding F6 of bench/GOVERNANCE_RESULTS.md: strptime's %S accepts 60 and 61 and shifts the time."""
    from trajpub.formats import parse

    path = tmp_path / "taxi.txt"
    path.write_text("1,2008-02-02 10:00:59,116.1,39.9\n1,2008-02-02 10:00:61,116.1,39.9\n"
                    "1,2008-02-02 23:59:60,116.1,39.9\n1,2008-02-02 10:01:01,116.1,39.9\n")
    parsed = parse("tdrive", path)
    assert len(parsed.points) == 2 and len(parsed.rejects) == 2
    assert all("second of 60 or 61" in r for r in parsed.rejects["reason"])


def test_load_help_lists_every_option_of_every_format_with_its_meaning():
    from click.testing import CliRunner

    from flows.cli import main

    for fmt in formats.FORMATS.values():
        assert set(fmt.option_help) == set(fmt.allowed_options), fmt.name
    out = CliRunner().invoke(main, ["load", "csv", "--help"], terminal_width=100)
    assert out.exit_code == 0
    text = " ".join(out.output.split())  # the help wraps long lines
    for name, fmt in formats.FORMATS.items():
        assert f"{name}: {' '.join(fmt.summary.split())}" in text
        for option, meaning in fmt.option_help.items():
            assert f"{option} (" in text and " ".join(meaning.split()) in text, (name, option)


@pytest.mark.parametrize(("fmt", "options", "zone"), [
    ("tdrive", {}, "Asia/Shanghai"), ("geolife", {}, "Asia/Shanghai"),
    ("csv", {"object_id": "a", "t": "b", "lon": "c", "lat": "d", "timezone": "Europe/Helsinki"}, "Europe/Helsinki"),
    ("csv", {"object_id": "a", "t": "b", "lon": "c", "lat": "d"}, None),  # UTC times: where people live is unknown
])
def test_each_format_says_the_local_zone_its_people_live_by(fmt, options, zone):
    assert formats.get_format(fmt, options).local_timezone == zone
