"""tasks.load on the real PostGIS: counts add up, geometry is EPSG:4326, loads are idempotent and atomic."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest
import sqlalchemy as sa

from tasks.load import LoadReport, load_source, sha256_of
from trajpub import config, formats
from trajpub.errors import InputError, ParameterError

pytestmark = pytest.mark.integration

TDRIVE_CSV = config.SHARED_DATA_DIR / "tdrive_sample_odd_taxis.csv.gz"

SMALL_BAD = (
    "taxi_id,datetime,longitude,latitude\n"
    "1,2008-02-02 15:36:08,116.51172,39.92123\n"   # line 2 good
    "1,2008-02-02 15:46:08,116.5\n"                 # line 3 field count
    "1,2008-02-02 15:56:08,116.51627,95.0\n"        # line 4 latitude
    "2,not a time,116.4,39.9\n"                     # line 5 time
    "2,2008-02-02 16:00:00,116.40001,39.90002\n"    # line 6 good
)


def _delete_dataset(dataset: str) -> None:
    """Remove a test's dataset (as the owner: the pipeline deletes no governance row)."""
    from tasks.db import owner_engine

    with owner_engine().begin() as conn:
        for sql in ("DELETE FROM staging.quarantine WHERE dataset = :d",
                    "DELETE FROM raw.points WHERE dataset = :d",
                    "DELETE FROM raw.sources WHERE dataset = :d",
                    "DELETE FROM governance.datasets WHERE dataset = :d",
                    "DELETE FROM raw.datasets WHERE dataset = :d"):
            conn.execute(sa.text(sql), {"d": dataset})


@pytest.fixture
def dataset(engine, dataset_name):
    """A fresh dataset name whose rows are removed afterwards."""
    yield dataset_name
    _delete_dataset(dataset_name)


@pytest.fixture(scope="module")
def tdrive(engine):
    """The real T-Drive sample loaded once into a fresh dataset: (report, the same file parsed)."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    report = load_source(engine, "tdrive", TDRIVE_CSV, name)
    yield report, formats.parse("tdrive", TDRIVE_CSV)
    _delete_dataset(name)


def _counts(engine: sa.Engine, dataset: str) -> dict[str, int]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.text(
            "SELECT (SELECT count(*) FROM raw.points WHERE dataset = :d) AS points,"
            " (SELECT count(*) FROM staging.quarantine WHERE dataset = :d AND stage = 'load')"
            "   AS quarantined,"
            " (SELECT count(*) FROM raw.sources WHERE dataset = :d) AS sources,"
            " (SELECT count(*) FROM raw.datasets WHERE dataset = :d) AS datasets,"
            " (SELECT count(*) FROM governance.datasets WHERE dataset = :d) AS governed"),
            {"d": dataset}).mappings().one())


# --- the real T-Drive sample --------------------------------------------------------------------------------

def test_tdrive_counts_add_up(engine, tdrive):
    report, _ = tdrive
    assert not report.already_loaded
    assert report.n_read == 402_428
    assert report.n_loaded + report.n_quarantined == report.n_read
    counts = _counts(engine, report.dataset)
    assert counts == {"points": report.n_loaded, "quarantined": report.n_quarantined, "sources": 1,
                      "datasets": 1, "governed": 1}
    with engine.connect() as conn:
        source = conn.execute(sa.text("SELECT * FROM raw.sources WHERE source_id = :s"),
                              {"s": report.source_id}).mappings().one()
    assert source["sha256"] == sha256_of([TDRIVE_CSV]) == report.sha256
    assert (source["n_read"], source["n_loaded"], source["n_quarantined"]) == (
        report.n_read, report.n_loaded, report.n_quarantined)
    assert source["format"] == "tdrive" and source["path"] == str(TDRIVE_CSV.resolve())


def test_tdrive_points_are_the_parsed_points_in_epsg_4326(engine, tdrive):
    report, parsed = tdrive
    with engine.connect() as conn:
        srids = conn.execute(sa.text(
            "SELECT DISTINCT ST_SRID(geom), GeometryType(geom) FROM raw.points WHERE dataset = :d"),
            {"d": report.dataset}).all()
        stored = pd.DataFrame(conn.execute(sa.text(
            "SELECT source_line, object_id, t, ST_X(geom) AS lon, ST_Y(geom) AS lat FROM raw.points"
            " WHERE dataset = :d ORDER BY source_line"), {"d": report.dataset}).all(),
            columns=["source_line", "object_id", "t", "lon", "lat"])
    assert srids == [(4326, "POINT")]
    expected = parsed.points.sort_values("source_line").reset_index(drop=True)
    assert stored["source_line"].tolist() == expected["source_line"].tolist()
    assert stored["object_id"].tolist() == expected["object_id"].tolist()
    # coordinates survive the text COPY bit for bit; times to the microsecond, in UTC
    assert (stored["lon"].to_numpy() == expected["lon"].to_numpy()).all()
    assert (stored["lat"].to_numpy() == expected["lat"].to_numpy()).all()
    stored_t = pd.to_datetime(stored["t"], utc=True).astype("datetime64[us, UTC]")
    assert (stored_t.to_numpy() == expected["t"].to_numpy()).all()
    assert stored_t.min() == pd.Timestamp("2008-02-02 05:31:16", tz="UTC")  # 13:31:16 in Beijing


def test_points_name_an_existing_source_checked_per_statement(engine, tdrive):
    """The foreign key raw.points.source_id -> raw.sources, checked once per statement (sql/022): a point cannot
    name a missing source, and a source that points name cannot go."""
    from tasks.db import owner_engine

    report, _ = tdrive
    with owner_engine().connect() as conn:
        missing = -1  # never a bigserial's value: another test worker may take max + 1 meanwhile
        for sql in (("INSERT INTO raw.points (dataset, source_id, source_line, object_id, t, geom)"
                    f" VALUES ('{report.dataset}', {missing}, 1, 'x', now(), ST_SetSRID(ST_MakePoint(116, 40), 4326))"),
                    f"DELETE FROM raw.sources WHERE source_id = {report.source_id}",
                    f"UPDATE raw.sources SET source_id = {missing} WHERE source_id = {report.source_id}"):
            with pytest.raises(sa.exc.IntegrityError, match="not in raw.sources|still named by raw.points"):
                conn.execute(sa.text(sql))
            conn.rollback()
    assert _counts(engine, report.dataset)["sources"] == 1


def test_loading_the_same_file_again_is_a_no_op(engine, tdrive):
    report, _ = tdrive
    before = _counts(engine, report.dataset)
    again = load_source(engine, "tdrive", TDRIVE_CSV, report.dataset)
    assert again.already_loaded
    assert (again.source_id, again.n_read, again.n_loaded, again.n_quarantined) == (
        report.source_id, report.n_read, report.n_loaded, report.n_quarantined)
    assert _counts(engine, report.dataset) == before


# --- small files --------------------------------------------------------------------------------------------

def test_malformed_file_loads_good_rows_and_quarantines_the_rest(engine, dataset, tmp_path):
    path = tmp_path / "small.csv"
    path.write_text(SMALL_BAD)
    messages: list[str] = []
    report = load_source(engine, "tdrive", path, dataset, progress=messages.append)
    assert isinstance(report, LoadReport)
    assert (report.n_read, report.n_loaded, report.n_quarantined) == (5, 2, 3)
    assert any("quarantining 3" in m for m in messages)
    with engine.connect() as conn:
        quarantined = conn.execute(sa.text(
            "SELECT source_id, source_line, stage, reason, record, release_id, point_id"
            " FROM staging.quarantine WHERE dataset = :d ORDER BY source_line"), {"d": dataset}).all()
        points = conn.execute(sa.text(
            "SELECT source_line, object_id, t, ST_X(geom), ST_Y(geom) FROM raw.points WHERE dataset = :d"
            " ORDER BY source_line"), {"d": dataset}).all()
    assert [(q.source_line, q.reason) for q in quarantined] == [
        (3, "wrong number of fields: 3, expected 4"),
        (4, "latitude 95.0 is outside [-90, 90]"),
        (5, "datetime 'not a time' does not parse as %Y-%m-%d %H:%M:%S"),
    ]
    assert {(q.source_id, q.stage, q.release_id, q.point_id) for q in quarantined} == {
        (report.source_id, "load", None, None)}
    assert quarantined[1].record == "1,2008-02-02 15:56:08,116.51627,95.0"
    assert [(p[0], p[1], p[3], p[4]) for p in points] == [(2, "1", 116.51172, 39.92123),
                                                         (6, "2", 116.40001, 39.90002)]
    assert points[0][2] == pd.Timestamp("2008-02-02 07:36:08", tz="UTC")


def test_same_file_in_two_datasets_loads_twice(engine, dataset, tmp_path):
    path = tmp_path / "small.csv"
    path.write_text(SMALL_BAD)
    other = f"{dataset}_b"
    try:
        first = load_source(engine, "tdrive", path, dataset)
        second = load_source(engine, "tdrive", path, other)
        assert not first.already_loaded and not second.already_loaded
        assert first.source_id != second.source_id and first.sha256 == second.sha256
        assert _counts(engine, other)["points"] == 2
    finally:
        _delete_dataset(other)


def test_folder_source_hashes_all_files_in_order(engine, dataset, tmp_path):
    folder = tmp_path / "taxi_log"
    folder.mkdir()
    (folder / "2.txt").write_text("2,2008-02-02 13:00:00,116.4,39.9\n")
    (folder / "1.txt").write_text("1,2008-02-02 13:00:00,116.5,39.8\n1,2008-02-02 13:05:00,116.5,-95\n")
    report = load_source(engine, "tdrive", folder, dataset)
    assert report.sha256 == sha256_of([folder / "1.txt", folder / "2.txt"])
    assert (report.n_read, report.n_loaded, report.n_quarantined) == (3, 2, 1)
    with engine.connect() as conn:
        reason = conn.execute(sa.text("SELECT reason FROM staging.quarantine WHERE dataset = :d"),
                              {"d": dataset}).scalar_one()
    assert reason == "latitude -95 is outside [-90, 90] (file 1.txt, line 2)"
    (folder / "3.txt").write_text("3,2008-02-02 13:00:00,116.3,39.7\n")
    grown = load_source(engine, "tdrive", folder, dataset)  # new bytes: a new source (all three files again)
    assert not grown.already_loaded and grown.source_id != report.source_id


def test_a_failure_midway_leaves_nothing_behind(engine, dataset, tmp_path):
    path = tmp_path / "small.csv"
    path.write_text(SMALL_BAD)

    def fail_during_quarantine(message: str) -> None:
        if message.startswith("quarantining"):  # points are already inserted at this step
            raise RuntimeError("simulated crash")

    with pytest.raises(RuntimeError, match="simulated crash"):
        load_source(engine, "tdrive", path, dataset, progress=fail_during_quarantine)
    assert _counts(engine, dataset) == {"points": 0, "quarantined": 0, "sources": 0, "datasets": 0,
                                        "governed": 0}
    retry = load_source(engine, "tdrive", path, dataset)
    assert not retry.already_loaded and retry.n_loaded == 2


def test_concurrent_loads_of_the_same_file_load_it_once(engine, dataset, tmp_path):
    path = tmp_path / "small.csv"
    path.write_text(SMALL_BAD)
    both_parsing = threading.Barrier(2, timeout=30)

    def wait_for_the_other(message: str) -> None:
        if message.startswith("parsing"):  # both have seen no earlier load of this file
            both_parsing.wait()

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(load_source, engine, "tdrive", path, dataset, progress=wait_for_the_other)
                   for _ in range(2)]
        reports = [f.result(timeout=60) for f in futures]
    assert sorted(r.already_loaded for r in reports) == [False, True]
    assert reports[0].source_id == reports[1].source_id
    assert _counts(engine, dataset) == {"points": 2, "quarantined": 3, "sources": 1, "datasets": 1,
                                        "governed": 1}


# --- refusals -----------------------------------------------------------------------------------------------

def test_refusals_write_nothing(engine, dataset, tmp_path):
    path = tmp_path / "small.csv"
    path.write_text(SMALL_BAD)
    with pytest.raises(ParameterError, match="unknown format 'kml'; allowed: tdrive, geolife, csv"):
        load_source(engine, "kml", path, dataset)
    with pytest.raises(ParameterError, match="unknown option"):
        load_source(engine, "tdrive", path, dataset, {"sep": ";"})
    for bad_name in ("Taxi", "1taxi", "taxi-2", "", "t" * 41, "taxi\n"):
        with pytest.raises(ParameterError, match="dataset name"):
            load_source(engine, "tdrive", path, bad_name)
    with pytest.raises(InputError, match="does not exist"):
        load_source(engine, "tdrive", tmp_path / "missing.csv", dataset)
    empty = tmp_path / "empty.csv"
    empty.write_text("taxi_id,datetime,longitude,latitude\n")
    with pytest.raises(InputError, match="no data rows"):
        load_source(engine, "tdrive", empty, dataset)
    assert _counts(engine, dataset) == {"points": 0, "quarantined": 0, "sources": 0, "datasets": 0,
                                        "governed": 0}


def test_geopackage_loads_through_the_same_path(engine, dataset):
    report = load_source(engine, "gpkg", config.SHARED_DATA_DIR / "mpd_demodata_geolife.gpkg", dataset,
                         {"object_id": "tracker"})
    assert (report.n_read, report.n_loaded, report.n_quarantined) == (5_908, 5_908, 0)
    with engine.connect() as conn:
        objects = conn.execute(sa.text("SELECT count(DISTINCT object_id), min(ST_SRID(geom)),"
                                       " max(ST_SRID(geom)) FROM raw.points WHERE dataset = :d"),
                               {"d": dataset}).one()
    assert tuple(objects) == (3, 4326, 4326)  # trackers 0, 2 and 19


def test_nul_characters_are_quarantined_not_fatal(engine, dataset, tmp_path):
    """PostgreSQL text cannot hold NUL: an id with one is rejected, and the stored record spells it out."""
    path = tmp_path / "nul.csv"
    path.write_bytes(b"taxi_id,datetime,longitude,latitude\n"
                     b"a\x00b,2008-02-02 15:36:08,116.5,39.9\n"
                     b"c,2008-02-02 15:36:08,116.5,39.9\n")
    report = load_source(engine, "tdrive", path, dataset)
    assert (report.n_loaded, report.n_quarantined) == (1, 1)
    with engine.connect() as conn:
        reason, record = conn.execute(sa.text(
            "SELECT reason, record FROM staging.quarantine WHERE dataset = :d"), {"d": dataset}).one()
    assert reason == "taxi_id (the object id) contains a NUL character"
    assert record == "a\\x00b,2008-02-02 15:36:08,116.5,39.9"


def test_a_newest_first_file_loads_in_time_order_and_passes_the_time_order_check(engine, dataset, tmp_path):
    """Real T-Drive rows of 5 taxis written newest-first (the whole file reversed), loaded with the command line:
    it says it put them in time order, each point keeps its source line, and the release's time-order
    expectation finds nothing to quarantine in what a snapshot reads."""
    from tasks.ingest import parse_partition, partition_csv, psycopg_dsn
    from tasks.validate import load_suite, suite_parameters, validate_partition
    from tests.integration.conftest import BEIJING, cli
    from trajpub.spec import ReleaseSpec

    df = pd.read_csv(TDRIVE_CSV)
    df = df[df["taxi_id"].isin(sorted(df["taxi_id"].unique())[:5])].drop_duplicates()
    reversed_file = df.iloc[::-1]
    path = tmp_path / "newest_first.csv"
    reversed_file.to_csv(path, index=False)
    moving = df.groupby("taxi_id")["datetime"].nunique().gt(1).sum()  # a taxi with one time has no order

    out = cli("load", "tdrive", str(path), "--dataset", dataset)

    assert out.returncode == 0, out.stderr
    assert f"put {moving} objects listed newest-first in time order" in out.stdout
    with engine.connect() as conn:
        stored = pd.DataFrame(conn.execute(sa.text(
            "SELECT point_id, source_line, object_id, t FROM raw.points WHERE dataset = :d"
            " ORDER BY object_id, point_id"), {"d": dataset}).all(), columns=["point_id", "source_line", "object_id",
                                                                              "t"])
        source = conn.execute(sa.text("SELECT n_reordered_objects, n_unordered_objects FROM raw.sources"
                                      " WHERE dataset = :d"), {"d": dataset}).one()
    assert tuple(source) == (moving, 0)
    assert stored.groupby("object_id")["t"].apply(lambda t: t.is_monotonic_increasing).all()
    # line n of the file (1 = header) is row n - 2 of the reversed frame: each point still names its own line
    expected_t = pd.to_datetime(reversed_file["datetime"].to_numpy()[stored["source_line"] - 2])
    stored_local = pd.to_datetime(stored["t"], utc=True) + pd.Timedelta(hours=8)  # T-Drive times are UTC+8
    assert (stored_local.dt.tz_localize(None).to_numpy() == expected_t.to_numpy()).all()

    snapshot = {"dataset": dataset, "max_point_id": int(stored["point_id"].max()), "ws": None, "we": None}
    points = parse_partition(partition_csv(psycopg_dsn(engine), snapshot, sorted(stored["object_id"].unique())))
    spec = ReleaseSpec.from_dict({"dataset": dataset, "bbox": BEIJING})
    _, _, summary = validate_partition(points, load_suite(), suite_parameters(spec))
    [time_order] = [e for e in summary if e["expectation"] == "expect_column_values_to_be_between(dt_prev_s)"]
    assert time_order["element_count"] > 0 and time_order["unexpected_count"] == 0
