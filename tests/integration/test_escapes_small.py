"""Small escapes, tried through the real command line: an export that followed a symbolic link out of its folder
or ended in a traceback, a load that kept no point yet created its dataset, a load whose first line was 10 MB.
Each is one sentence naming what and where, exit code 1, and nothing written."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tasks import publish
from tests.integration.conftest import cli
from tests.integration.staged import approved_release, new_dataset

pytestmark = pytest.mark.integration


def one_sentence_error(out) -> str:
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and out.stderr.startswith("error: "), out.stderr
    return out.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def published(engine) -> int:
    rid = approved_release(engine, new_dataset(engine), "trajectories")
    publish.publish(engine, rid, None)
    return rid


@pytest.mark.parametrize("fmt", ["gpkg", "geoparquet", "flatgeobuf"])
def test_export_does_not_follow_a_dangling_symbolic_link_out_of_the_folder(published, tmp_path, fmt):
    outside, folder = tmp_path / "outside", tmp_path / "exports"
    outside.mkdir()
    folder.mkdir()
    link = folder / f"release.{fmt}"
    link.symlink_to(outside / "written-through-the-link")  # dangling: its target does not exist
    said = one_sentence_error(cli("export", str(published), "--format", fmt, "--out", str(link)))
    assert f"{link} already exists (a file, folder or symbolic link)" in said
    assert list(outside.iterdir()) == [] and link.is_symlink()


@pytest.mark.parametrize(("out", "says"), [
    ("{tmp}/no/such/folder/release.gpkg", "the folder {tmp}/no/such/folder does not exist"),
    ("", "--out names the file to write, not a folder"),
    ("{tmp}", "{tmp} already exists"),
])
def test_an_export_that_cannot_be_written_is_one_sentence(published, tmp_path, out, says):
    said = one_sentence_error(cli("export", str(published), "--format", "gpkg", "--out",
                                  out.format(tmp=tmp_path)))
    assert says.format(tmp=tmp_path) in said
    assert not (tmp_path / "no").exists()


def test_a_load_that_keeps_no_point_creates_no_dataset(engine, dataset_name, tmp_path):
    source = tmp_path / "all-bad.csv"
    source.write_text("id,t,x,y\na,yesterday,116.5,39.9\nb,2008-02-02T15:36:08,east,39.9\nc,tomorrow,1,2\n")
    said = one_sentence_error(cli("load", "csv", str(source), "--dataset", dataset_name, "--option", "object_id=id",
                                  "--option", "t=t", "--option", "lon=x", "--option", "lat=y"))
    assert "none of the 3 records is a point (the first: t 'yesterday' does not parse" in said
    assert said.endswith(f"nothing was loaded, no dataset created (file {source}, line 2)")
    with engine.connect() as conn:
        for table in ("raw.datasets", "governance.datasets", "raw.sources"):
            assert conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE dataset = :d"),
                                {"d": dataset_name}).scalar_one() == 0, table


@pytest.mark.parametrize(("fmt", "options"), [("tdrive", ()), ("csv", ("--option", "object_id=a", "--option", "t=b",
                                                                        "--option", "lon=c", "--option", "lat=d"))])
def test_a_10_mb_line_without_a_header_is_one_sentence(engine, dataset_name, tmp_path, fmt, options):
    source = tmp_path / "long.txt"
    source.write_text("x" * 10_000_000 + "\n1,2008-02-02 15:36:08,116.5,39.9\n")
    said = one_sentence_error(cli("load", fmt, str(source), "--dataset", dataset_name, *options))
    assert "the header line is 10000000 characters long" in said and said.endswith(f"(file {source}, line 1)")
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM raw.datasets WHERE dataset = :d"),
                            {"d": dataset_name}).scalar_one() == 0


def test_a_schedule_in_no_known_time_zone_is_one_sentence(tmp_path):
    """`deploy --timezone Mars/Olympus` was a pydantic traceback from the budget forecast: now refused before
    anything is served."""
    from trajpub.config import PROJECT_ROOT

    out = cli("deploy", "--spec", str(PROJECT_ROOT / "mechanisms" / "objtrace" / "example.yaml"), "--name",
              "mars", "--timezone", "Mars/Olympus")
    assert 'invalid schedule: Value error, Invalid timezone: "Mars/Olympus"' in one_sentence_error(out)
    assert "serving" not in out.stdout


def test_a_road_network_from_a_csv_is_one_sentence(tmp_path):
    csv = tmp_path / "roads.csv"
    csv.write_text("a,b\n1,2\n")
    out = cli("roads", "load-osm", "not_loaded", "--pbf", str(csv))
    assert "roads.csv is not an OpenStreetMap extract in PBF" in one_sentence_error(out)


def test_a_retention_past_a_century_is_refused_by_the_command_line():
    out = cli("retention", "any_dataset", "99999999999999", "--steward", "ada")
    assert out.returncode == 2 and "Traceback" not in out.stderr and "0<=x<=36500" in out.stderr, out.stderr
