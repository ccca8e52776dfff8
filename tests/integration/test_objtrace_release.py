"""ObjTrace through the whole release flow on real T-Drive data (40 taxis): a synthetic release whose every point
has a timestamp floored to the spec's precision, whose budget is charged per object, and whose lineage holds no
seed and no true count."""

from __future__ import annotations

import json
import re

import pytest
import sqlalchemy as sa

from tests.integration.conftest import (
    assert_no_raw_statistic_for_consumers,
    base_spec,
    cli,
    start_release,
    wait_for_status,
)

pytestmark = pytest.mark.integration


def q(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).all()


def test_objtrace_publishes_timestamped_synthetic_trajectories_charged_per_taxi(engine, loaded_tdrive, tmp_path):
    dataset = loaded_tdrive("objtrace")
    spec = base_spec(dataset, mechanism="objtrace", params={"epsilon": 10.0}, prepare={"cell_size_m": 2000})
    run = start_release(spec, tmp_path)
    assert wait_for_status(engine, run, {"awaiting_approval", "blocked"}) == "awaiting_approval", run.output()
    assert cli("approve", str(run.release_id), "--steward", "ada").returncode == 0
    assert run.proc.wait(timeout=180) == 0, run.output()
    rid = run.release_id
    assert_no_raw_statistic_for_consumers(engine, rid)
    table = f"published.{dataset}__r{rid}"
    (n, untimed, unfloored, trajectories) = q(
        engine, f"SELECT count(*), count(*) FILTER (WHERE t IS NULL), "
                f"count(*) FILTER (WHERE extract(second FROM t) <> 0), count(DISTINCT traj_id) FROM {table}")[0]
    assert n > 0 and trajectories > 0
    assert untimed == 0 and unfloored == 0  # every point has t, floored to the spec's 60 s
    assert q(engine, "SELECT epsilon, privacy_unit FROM governance.budget_ledger WHERE release_id = :r",
             r=rid) == [(10.0, "one object")]
    events = q(engine, "SELECT event FROM governance.lineage_events WHERE release_id = :r", r=rid)
    text = json.dumps([e[0] for e in events])
    assert not re.search(r'"[a-z_]*seed": ', text) and "input_trajectories" not in text
    (summary,) = q(engine, "SELECT summary FROM governance.releases WHERE release_id = :r", r=rid)[0]
    assert "noisy_records" in summary["mechanism"]  # noisy figures for the steward; lineage keeps public ones
