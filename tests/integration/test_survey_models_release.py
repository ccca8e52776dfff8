"""The generalised shape through the whole release flow on real T-Drive data: GLOVE's samples published as
regions with time spans shared by k; KLT's points of interest from PostGIS. (W4M's anonymity sets publish through
the same path as (k-Psi)'s, whose whole flow is test_kpsi_release; W4M's groups are checked in test_w4m_*.)"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from tasks.roads import read_pois
from tests.integration.conftest import (
    assert_no_raw_statistic_for_consumers,
    base_spec,
    cli,
    set_dataset_policy,
    start_release,
    wait_for_status,
)
from tests.integration.exports import check_exports
from trajpub.grid import GridSpec

pytestmark = pytest.mark.integration
TRUTHFUL = ["ap_attack", "home_work", "known_points", "reidentification_location", "signature_linkage"]
# A lenient policy for these shape tests that still blocks the raw data released unchanged (its re-identification
# and known-points risks are 0.99-1.0 at the adversary's 250 m: bench/AUDIT_RESOLUTIONS_RESULTS.md)
RECORD_ALL = {"attacks": {name: {"max_risk": 0.95} for name in TRUTHFUL}}


def q(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).all()


def release_and_approve(engine, dataset: str, mechanism: str, params: dict, tmp_path) -> str:
    set_dataset_policy(dataset, RECORD_ALL, tmp_path)
    spec = base_spec(dataset, mechanism=mechanism, params=params)
    run = start_release(spec, tmp_path)
    assert wait_for_status(engine, run, {"awaiting_approval", "blocked"}) == "awaiting_approval", run.output()
    attacks = {r[0] for r in q(engine, "SELECT attack FROM governance.audit_results WHERE release_id = :r",
                               r=run.release_id)}
    assert attacks == set(TRUTHFUL)
    assert cli("approve", str(run.release_id), "--steward", "ada").returncode == 0
    assert run.proc.wait(timeout=180) == 0, run.output()
    (guarantee, charged) = q(engine, "SELECT r.guarantee, (SELECT sum(epsilon) FROM governance.budget_ledger l "
                                     "WHERE l.release_id = r.release_id) FROM governance.releases r "
                                     "WHERE release_id = :r", r=run.release_id)[0]
    assert guarantee["epsilon"] is None and not guarantee["proven"]  # syntactic models: heuristic, no budget
    assert charged == 0.0
    assert_no_raw_statistic_for_consumers(engine, run.release_id)
    return f"published.{dataset}__r{run.release_id}"


def test_glove_release_publishes_regions_and_time_spans_shared_by_k(engine, loaded_tdrive, tmp_path):
    dataset = loaded_tdrive("glove")
    table = release_and_approve(engine, dataset, "glove", {"k": 5}, tmp_path)
    columns = {r[0] for r in q(engine, "SELECT column_name FROM information_schema.columns WHERE "
                                       "table_schema = 'published' AND table_name = :t", t=table.split(".")[1])}
    assert columns == {"set_id", "traj_id", "seq", "t", "t_end", "region", "geom"}
    (n, outside, reversed_span, srid) = q(engine, f"SELECT count(*), count(*) FILTER (WHERE NOT ST_Covers(region, "
                                                  f"geom)), count(*) FILTER (WHERE t_end < t), max(ST_SRID(region)) "
                                                  f"FROM {table}")[0]
    assert n > 0 and outside == 0 and reversed_span == 0 and srid == 4326  # the centre lies in its region
    # a group's k (or more) members publish the same generalised samples: one distinct sample per seq
    groups = q(engine, f"SELECT set_id, count(DISTINCT traj_id), count(DISTINCT (seq, t, t_end, region::text)), "
                       f"max(seq) + 1 FROM {table} GROUP BY set_id")
    assert all(members >= 5 and distinct == length for _, members, distinct, length in groups)
    check_exports(int(table.rsplit("__r", 1)[1]), tmp_path, {"points": table, "trajectories": f"{table}_traj"})


def test_klt_reads_its_points_of_interest_from_postgis(engine):
    from mechanisms.registry import mechanism
    from tasks import public_inputs
    from trajpub.errors import InputError
    from trajpub.osm import pois_from_pbf

    name = f"hel_pois_{uuid.uuid4().hex[:8]}"
    loaded = cli("roads", "load-pois", name, "--pbf", "helsinki_pbf")
    assert loaded.returncode == 0, loaded.stderr
    again = cli("roads", "load-pois", name, "--pbf", "helsinki_pbf")
    assert again.returncode != 0 and "already loaded" in again.stderr
    klt = mechanism("klt")
    setup, inputs = public_inputs.resolve(engine, klt, klt.parse_params({"pois": {"postgis": name}}),
                                          GridSpec((24.0, 59.5, 26.0, 61.0), 10_000.0))
    assert f"POI set {name} in PostGIS" in klt.guarantee(setup).plain_text()
    expected = pois_from_pbf("helsinki_pbf")
    got = inputs.pois
    assert len(got) == len(expected) > 100
    assert got["category"].value_counts().to_dict() == expected["category"].value_counts().to_dict()
    centre = read_pois(engine, name, (24.93, 60.16, 24.95, 60.17))
    assert 0 < len(centre) < len(got) and centre["lon"].between(24.93, 24.95).all()
    unknown = klt.parse_params({"pois": {"postgis": "no_such_pois"}})  # parsing reads no database
    with pytest.raises(InputError, match="is not loaded"):
        public_inputs.resolve(engine, klt, unknown, GridSpec((24.0, 59.5, 26.0, 61.0), 10_000.0))
