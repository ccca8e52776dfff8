"""Comparisons: the bill refused over a cap before anything runs; the steward's pick in the database
(one decision approves one candidate and rejects its siblings); and a comparison end to end, two candidates of one
40-taxi snapshot through the real CLI, flow, PostGIS, Dask and Prefect server, picked in the real Prefect UI
(headless Chromium): every candidate charged before it runs, the gate-blocked one not recommended, only the pick
published with lineage naming the comparison, the other's staging gone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid

import pytest
import sqlalchemy as sa
import yaml
from playwright.sync_api import expect

from tests.integration.browser import chromium_page
from tests.integration.conftest import (
    TRAJPUB,
    base_spec,
    cli,
    final_state,
    flow_run_in,
    new_release,
    release_status,
    set_dataset_policy,
    small_fleet_policy,
    to_awaiting_approval,
    wait_until,
)
from tests.integration.test_ui_approval import flow_run_state, form_property, kill_tree, log_in, submit_resume
from tests.lineage_schema import validate_event
from trajpub.errors import PolicyError

pytestmark = pytest.mark.integration

STEWARD = "alice"


def comparison_spec(dataset: str, candidates: list[dict]) -> dict:
    shared = {k: v for k, v in base_spec(dataset, approval_timeout_s=300).items() if k not in ("mechanism", "params")}
    return {"name": "pytest_compare", **shared, "candidates": candidates}


def write(spec: dict, tmp_path) -> str:
    path = tmp_path / f"compare-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def q(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).mappings().all()


def test_the_candidates_together_are_refused_over_the_cap_before_anything_runs(engine, bare_dataset):
    from tasks import compare

    # adatrace charges k x epsilon per taxi: 7 x (0.5 + 0.4) = 6.3 together, over the cap of 5.5, each under it
    _, planned = compare.parse(comparison_spec(bare_dataset, [{"mechanism": "adatrace", "params": {
        "max_records_per_object": 7}, "grid": {"epsilon": [0.5, 0.4]}}]))
    with engine.connect() as conn, pytest.raises(PolicyError) as err:
        compare.bill(conn, planned)
    assert "need epsilon-DP epsilon 6.3 per object" in err.value.message  # the second finds 5.5 - 3.5 left
    assert "only 2 of the cap 5.5 per object left" in err.value.message
    with engine.connect() as conn:
        bill = compare.bill(conn, planned[1:])
    assert [c.epsilon for _, c in bill.charges] == [pytest.approx(2.8)] and not q(
        engine, "SELECT 1 FROM governance.releases WHERE dataset = :d", d=bare_dataset)


def test_the_pick_approves_one_and_rejects_its_siblings_as_one_steward(engine, stewards, bare_dataset):
    from tasks import compare, governance

    run, other_run = uuid.uuid4(), uuid.uuid4()
    rids = [new_release(engine, bare_dataset) for _ in range(4)]
    with engine.begin() as conn:
        for rid, flow_run_id in zip(rids, (run, run, run, other_run), strict=True):
            governance.update_release(conn, rid, flow_run_id=str(flow_run_id))
    for rid in rids:
        to_awaiting_approval(engine, rid)
    def code() -> str:
        with stewards[STEWARD].begin() as conn:
            return governance.issue_decision_code(conn, rids[1], "picked", "the best")

    with pytest.raises(PolicyError, match="not valid for release"):
        compare.pick_by_code(engine, rids[0], "", code())  # a code picks only the release it was issued for
    with pytest.raises(PolicyError, match="comment differs"):
        compare.pick_by_code(engine, rids[1], "another comment", code())  # the comment is bound to the code
    issued = code()
    assert compare.pick_by_code(engine, rids[1], "", issued) == STEWARD  # the code's comment is recorded
    decided = {r["release_id"]: r for r in q(engine, "SELECT r.release_id, r.status, a.steward, a.comment FROM "
                                                     "governance.releases r LEFT JOIN governance.approvals a USING "
                                                     "(release_id) WHERE release_id = ANY(:r)", r=rids)}
    assert [decided[r]["status"] for r in rids] == ["rejected", "approved", "rejected", "awaiting_approval"]
    assert {decided[r]["steward"] for r in rids[:3]} == {STEWARD}
    assert decided[rids[1]]["comment"] == "the best"
    assert decided[rids[0]]["comment"] == f"not picked: release {rids[1]} of the same comparison was picked"
    with pytest.raises(PolicyError, match="not valid for release"):
        compare.pick_by_code(engine, rids[1], "again", issued)  # a code is used once


def test_a_pick_from_the_cli_with_no_flow_waiting_publishes_it_and_discards_the_others(engine, stewards,
                                                                                       bare_dataset):
    """`trajpub release pick` once the comparison's flow no longer waits (its approval timeout passed, or the
    Prefect server forgot the run): the CLI publishes the pick with its comparison lineage facet itself, and the
    siblings are rejected as not picked, their staging purged and their lineage aborted."""
    from tasks import governance
    from tests.integration.staged import SHAPES

    run = uuid.uuid4()  # a flow run the Prefect server does not know
    rids = [new_release(engine, bare_dataset) for _ in range(2)]
    record = {"name": "pytest_cli_pick", "candidates": [{"release_id": r} for r in rids]}
    with engine.begin() as conn:
        for rid in rids:
            governance.update_release(conn, rid, flow_run_id=str(run))
            governance.merge_summary(conn, rid, {"comparison": record})
    for rid in rids:
        to_awaiting_approval(engine, rid, SHAPES["trajectories"]().check())
    picked, other = rids[1], rids[0]
    out = cli("release", "pick", str(picked), "--steward", STEWARD, "--comment", "denser")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    final = {r["release_id"]: r for r in q(engine, "SELECT release_id, status, published_table, staging_purged_at "
                                                   "FROM governance.releases WHERE release_id = ANY(:r)", r=rids)}
    assert final[picked]["status"] == "published" and final[other]["status"] == "rejected"
    assert final[other]["staging_purged_at"] is not None and final[other]["published_table"] is None
    assert not q(engine, "SELECT 1 FROM staging.candidate_points WHERE release_id = :r", r=other)
    assert len(q(engine, f"SELECT 1 FROM {final[picked]['published_table']}")) == len(SHAPES["trajectories"]().points)
    (event,) = q(engine, "SELECT event FROM governance.lineage_events WHERE release_id = :r AND event_type = "
                         "'COMPLETE'", r=picked)
    assert event["event"]["run"]["facets"]["comparison"]["picked"] == picked
    assert q(engine, "SELECT 1 FROM governance.lineage_events WHERE release_id = :r AND event_type = 'ABORT'",
             r=other)


def test_a_comparison_is_charged_reviewed_and_only_the_pick_published(engine, owner, loaded_tdrive, tmp_path):
    dataset = loaded_tdrive("cmp")  # epsilon-DP cap 1000 per taxi
    with owner.begin() as conn:  # a steward keeps ended candidates' staging 30 days: only the comparison discards it
        conn.execute(sa.text("UPDATE governance.datasets SET staging_retention_days = 30 WHERE dataset = :d"),
                     {"d": dataset})
    # The comparison's mechanics are under test here, not the gate's ceilings: 40 taxis cannot resolve the default
    # ones (28 members put a zero rate's upper end at 0.12, over membership's 0.05), and a candidate whose interval
    # crosses a ceiling is never recommended, so this steward sets ceilings the fleet can resolve (0.9), keeping
    # the utility floor and the upper-bound decision.
    resolvable = small_fleet_policy().to_dict() | {"decide_on": "upper_bound"}
    for attack in resolvable["attacks"].values():
        attack["max_risk"] = 0.9
    set_dataset_policy(dataset, resolvable, tmp_path)
    # AdaTrace at epsilon 10 per record on 7 taxi-days passes that gate on these taxis (conftest.base_spec);
    # the prefix tree's one-cell records are under the synthetic utility floor (audits/policies/default.yaml)
    candidates = [{"mechanism": "adatrace", "params": {"epsilon": 10.0, "max_records_per_object": 7}},
                  {"mechanism": "prefix_tree", "params": {"epsilon": 1.0, "height": 3, "max_records_per_object": 7}}]
    proc = subprocess.Popen([TRAJPUB, "release", "compare", "--spec", write(comparison_spec(dataset, candidates),
                                                                              tmp_path), "--yes"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "TRAJPUB_TEST_MODE": "1"})
    lines: list[str] = []
    try:
        def planned() -> list[int] | None:
            line = proc.stdout.readline()
            lines.append(line)
            m = re.search(r"comparison pytest_compare: releases ([\d, ]+) planned", line)
            assert line or proc.poll() is None, "".join(lines)
            return [int(r) for r in m.group(1).split(", ")] if m else None

        rids = wait_until(planned, 240, "the comparison to plan its candidates", poll_s=0)
        assert "TOTAL epsilon-DP: epsilon 77 per object for 2 candidate(s)" in "".join(lines)  # 70 + 7
        charged = {r["release_id"]: r["unit_epsilon"] for r in q(
            engine, "SELECT release_id, unit_epsilon FROM governance.budget_ledger WHERE dataset = :d AND "
                    "entry_kind = 'charge'", d=dataset)}
        assert charged == {rids[0]: 70.0, rids[1]: 7.0}  # k x epsilon per record, before running

        def reviewed() -> bool:
            statuses = {release_status(engine, r) for r in rids}
            return not statuses & {"planned", "validated", "protected", "audited"}

        wait_until(reviewed, 420, "every candidate to be audited")
        rows = {r["release_id"]: r for r in q(engine, "SELECT release_id, status, flow_run_id, summary FROM "
                                                      "governance.releases WHERE release_id = ANY(:r)", r=rids)}
        assert rows[rids[1]]["status"] == "blocked"
        assert "pattern_f1" in " ".join(rows[rids[1]]["summary"]["gate"]["reasons"])
        assert rows[rids[0]]["status"] == "awaiting_approval", rows[rids[0]]["summary"].get("gate")
        recommended = rows[rids[0]]["summary"]["comparison"]["recommended"]
        assert recommended == rids[0]  # the one candidate that passed the gate
        assert q(engine, "SELECT 1 FROM staging.candidate_points WHERE release_id = :r LIMIT 1", r=rids[1])
        flow_run_id = str(rows[rids[0]]["flow_run_id"])
        wait_until(lambda: flow_run_state(flow_run_id) == "PAUSED", 60, "the comparison to pause")
        # `release compare` returns at the pause, as `release run` does: the candidates on stdout, the run goes on
        assert proc.wait(timeout=120) == 0, "".join(lines)
        rest = proc.stdout.read()
        returned = json.loads(rest.strip().splitlines()[-1])
        assert returned["status"] == "awaiting_pick" and returned["flow_run_id"] == flow_run_id
        assert [r["release_id"] for r in returned["releases"]] == rids, rest
        assert "Pick: trajpub release pick ID --steward LOGIN" in rest and "Traceback" not in "".join(lines) + rest

        with chromium_page() as page:
            page.set_viewport_size({"width": 1400, "height": 1000})
            log_in(page, f"/runs/flow-run/{flow_run_id}")
            page.get_by_role("button", name="Resume").click()
            dialog = page.get_by_role("dialog")
            expect(dialog.get_by_role("heading", name="Comparison pytest_compare: pick one candidate to publish")
                   ).to_be_visible()
            expect(dialog.get_by_text("Recommended", exact=True)).to_be_visible()
            pick = form_property(dialog, "Pick (Optional)").locator("input")
            expect(pick).to_have_value(str(recommended))
            issued = cli("steward", "code", str(recommended), "--steward", STEWARD, "--decision", "pick")
            assert issued.returncode == 0, issued.stderr
            form_property(dialog, "Decision Code (Optional)").locator("textarea").fill(issued.stdout.strip())
            submit_resume(dialog, flow_run_id)
            expect(page.locator(".state-badge").first).to_have_text("Completed", timeout=180_000)

        final = {r["release_id"]: r for r in q(engine, "SELECT release_id, status, published_table, staging_purged_at"
                                                       " FROM governance.releases WHERE release_id = ANY(:r)", r=rids)}
        assert final[recommended]["status"] == "published"
        assert final[recommended]["published_table"] == f"published.{dataset}__r{recommended}"
        blocked = rids[1]  # its staging, kept after the gate blocked it, is discarded once the pick is published
        assert final[blocked]["published_table"] is None and final[blocked]["staging_purged_at"] is not None
        assert not q(engine, "SELECT 1 FROM staging.candidate_points WHERE release_id = :r", r=blocked)
        published = q(engine, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'published' "
                              "AND table_name LIKE :p", p=f"{dataset}__r%")
        assert {t["table_name"] for t in published} == {f"{dataset}__r{recommended}", f"{dataset}__r{recommended}_traj"}
        (event,) = q(engine, "SELECT event FROM governance.lineage_events WHERE release_id = :r AND "
                             "event_type = 'COMPLETE'", r=recommended)
        validate_event(event["event"])
        facet = event["event"]["run"]["facets"]["comparison"]
        assert facet["name"] == "pytest_compare" and facet["picked"] == recommended
        assert [c["release_id"] for c in facet["candidates"]] == rids
    finally:
        kill_tree(proc)


def test_a_comparison_with_no_candidate_to_recommend_ends_blocked(engine, loaded_tdrive, tmp_path):
    """The prefix tree's one-cell records are under the synthetic utility floor (as above): alone in a comparison
    there is nothing to pick. The comparison's flow run ends in a Failed state named Blocked and `release compare`
    exits 3 with the reason in one sentence, not 0 as if a candidate awaited the steward."""
    dataset = loaded_tdrive("cmpb")
    candidates = [{"mechanism": "prefix_tree", "params": {"epsilon": 1.0, "height": 3, "max_records_per_object": 7}}]
    out = cli("release", "compare", "--spec", write(comparison_spec(dataset, candidates), tmp_path), "--yes",
              timeout=900)
    assert out.returncode == 3, out.stdout + out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("blocked: comparison pytest_compare: none of the 1 candidates passed the gate"), last
    assert '"status": "nothing to pick"' in out.stdout and "Traceback" not in out.stderr
    state = final_state(flow_run_in(out.stderr))
    assert (state.type.value, state.name) == ("FAILED", "Blocked") and state.message == last.removeprefix("blocked: ")
    assert [r["status"] for r in q(engine, "SELECT status FROM governance.releases WHERE dataset = :d",
                                    d=dataset)] == ["blocked"]
