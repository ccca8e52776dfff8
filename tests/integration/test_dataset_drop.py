"""`trajpub dataset list|show` say what a dataset holds; `trajpub dataset drop`: a steward removes a loaded dataset's
raw data; governance keeps its history."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tasks import governance, publish
from tasks.datasets import drop_dataset
from tasks.load import load_source
from tests.integration.conftest import cli, new_release, to_awaiting_approval
from trajpub.errors import PolicyError

pytestmark = pytest.mark.integration

SMALL = (
    "taxi_id,datetime,longitude,latitude\n"
    "1,2008-02-02 15:36:08,116.51172,39.92123\n"
    "1,2008-02-02 15:46:08,116.5\n"                  # quarantined at load: field count
    "1,2008-02-02 15:56:08,116.51627,39.92667\n"
    "2,2008-02-02 16:00:00,116.40001,39.90002\n"
)


@pytest.fixture
def loaded(engine, dataset_name, tmp_path):
    path = tmp_path / "small.csv"
    path.write_text(SMALL)
    load_source(engine, "tdrive", path, dataset_name)
    return dataset_name


def _raw_rows(engine: sa.Engine, dataset: str) -> dict[str, int]:
    with engine.connect() as conn:
        return {table: conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE dataset = :d"),
                                    {"d": dataset}).scalar()
                for table in ("raw.points", "raw.sources", "staging.quarantine")}


def test_dataset_show_and_list_say_what_the_dataset_holds_in_utc_and_local_time(loaded):
    # The T-Drive format is Beijing local time: 15:36:08 on 2 February is 07:36 UTC; two taxis, three points
    # (the short line is in quarantine, not in the count), one source; the budget untouched.
    shown = cli("dataset", "show", loaded)
    assert shown.returncode == 0, shown.stderr
    assert ("time range: 2008-02-02 07:36 UTC = 2008-02-02 15:36 Asia/Shanghai .. "
            "2008-02-02 08:00 UTC = 2008-02-02 16:00 Asia/Shanghai") in shown.stdout
    assert "objects: 2; points: 3" in shown.stdout
    assert "3 points loaded, 1 quarantined" in shown.stdout
    assert "unit of protection: one object over the dataset's whole life" in shown.stdout
    listed = cli("dataset", "list")
    assert listed.returncode == 0, listed.stderr
    [row] = [line.split() for line in listed.stdout.splitlines() if line.startswith(loaded + " ")]
    assert row[1:] == ["2008-02-02", "07:36", "2008-02-02", "08:00", "Asia/Shanghai", "2", "3", "1"]
    missing = cli("dataset", "show", "never_loaded_here")
    assert missing.returncode == 1 and "has not been loaded" in missing.stderr


def test_a_published_release_blocks_the_drop_until_it_is_withdrawn(engine, stewards, loaded):
    rid = new_release(engine, loaded)
    to_awaiting_approval(engine, rid)
    with pytest.raises(PolicyError, match=rf"releases under way: {rid} \(awaiting_approval\)"):
        drop_dataset(stewards["alice"], loaded)
    with stewards["alice"].begin() as conn:
        governance.decide(conn, rid, "approved", None)
    publish.publish(engine, rid, None)
    with pytest.raises(PolicyError, match=rf"has published releases: {rid} \(published\); withdraw them first"):
        drop_dataset(stewards["alice"], loaded)
    assert _raw_rows(engine, loaded) == {"raw.points": 3, "raw.sources": 1, "staging.quarantine": 1}
    publish.withdraw(stewards["alice"], rid, "wrong file")

    dropped = drop_dataset(stewards["bob"], loaded)

    assert (dropped.steward, dropped.n_points, dropped.n_sources) == ("bob", 3, 1)
    assert _raw_rows(engine, loaded) == {"raw.points": 0, "raw.sources": 0, "staging.quarantine": 0}
    with engine.connect() as conn:  # the history stays: the release, its ledger-relevant record, the drop itself
        assert conn.execute(sa.text("SELECT status FROM governance.releases WHERE release_id = :r"),
                            {"r": rid}).scalar() == "withdrawn"
        assert conn.execute(sa.text("SELECT steward FROM governance.dataset_drops WHERE dataset = :d"),
                            {"d": loaded}).scalars().all() == ["bob"]


def test_the_pipeline_role_cannot_drop_a_dataset(engine, loaded):
    with pytest.raises(sa.exc.ProgrammingError, match="permission denied"), engine.begin() as conn:
        conn.execute(sa.text("SELECT governance.drop_dataset(:d)"), {"d": loaded})
    with pytest.raises(sa.exc.ProgrammingError, match="permission denied"), engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM raw.points WHERE dataset = :d"), {"d": loaded})
    assert _raw_rows(engine, loaded)["raw.points"] == 3


def test_cli_drops_a_dataset_whose_releases_ended_and_refuses_one_under_way(engine, loaded):
    rid = new_release(engine, loaded)
    refused = cli("dataset", "drop", loaded, "--steward", "ada")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr + refused.stdout
    assert f"releases under way: {rid} (planned)" in refused.stderr
    with engine.begin() as conn:
        governance.transition(conn, rid, "failed", "test: ended")

    out = cli("dataset", "drop", loaded, "--steward", "ada")

    assert out.returncode == 0, out.stderr
    assert f"dropped '{loaded}': 3 points from 1 source(s)" in out.stdout
    assert _raw_rows(engine, loaded) == {"raw.points": 0, "raw.sources": 0, "staging.quarantine": 0}
