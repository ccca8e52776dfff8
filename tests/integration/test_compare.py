"""A comparison end to end (issue 18): three candidates of one 40-taxi snapshot through the real CLI, flow,
PostGIS, Dask and Prefect server; the steward picks in the real Prefect UI (headless Chromium). Checks the bill
(refused over the cap before anything runs, then every candidate charged), the review's recommendation against the
gate's verdicts, and that only the pick is published, with lineage naming the comparison, the others' staging
gone."""

from __future__ import annotations

import os
import re
import subprocess
import uuid

import pytest
import sqlalchemy as sa
import yaml
from playwright.sync_api import expect

from tests.integration.browser import chromium_page
from tests.integration.conftest import TRAJPUB, base_spec, cli, release_status, wait_until
from tests.integration.test_ui_approval import UI_URL, flow_run_state, form_property, kill_tree
from tests.lineage_schema import validate_event

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


def test_a_comparison_is_charged_reviewed_and_only_the_pick_published(engine, loaded_tdrive, tmp_path):
    dataset = loaded_tdrive("cmp")  # epsilon-DP cap 1000 per taxi
    # refused before anything is read or charged: 7 x (100 + 50) = 1050 per taxi together, over the cap of 1000
    over = comparison_spec(dataset, [{"mechanism": "adatrace", "params": {"max_records_per_object": 7},
                                      "grid": {"epsilon": [100.0, 50.0]}}])
    refused = cli("release", "compare", "--spec", write(over, tmp_path), "--yes")
    assert refused.returncode == 1
    assert "need epsilon-DP epsilon 1050 per object" in refused.stderr and "only 1000 of its cap" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not q(engine, "SELECT 1 FROM governance.releases WHERE dataset = :d", d=dataset)

    # AdaTrace at epsilon 10 per record on 7 taxi-days passes the default gate on these taxis (conftest.base_spec);
    # the prefix tree's one-cell records are under the synthetic utility floor (audits/policies/default.yaml)
    candidates = [{"mechanism": "adatrace", "params": {"epsilon": 10.0}, "grid": {"max_records_per_object": [7, 6]}},
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
        assert "TOTAL epsilon-DP: epsilon 137 per object for 3 candidate(s)" in "".join(lines)  # 70 + 60 + 7
        charged = {r["release_id"]: r["unit_epsilon"] for r in q(
            engine, "SELECT release_id, unit_epsilon FROM governance.budget_ledger WHERE dataset = :d AND "
                    "entry_kind = 'charge'", d=dataset)}
        assert charged == {rids[0]: 70.0, rids[1]: 60.0, rids[2]: 7.0}  # k x epsilon per record, before running

        def reviewed() -> bool:
            statuses = {release_status(engine, r) for r in rids}
            assert proc.poll() is None, "".join(lines) + proc.stdout.read()
            return not statuses & {"planned", "validated", "protected", "audited"}

        wait_until(reviewed, 420, "every candidate to be audited")
        rows = {r["release_id"]: r for r in q(engine, "SELECT release_id, status, flow_run_id, summary FROM "
                                                      "governance.releases WHERE release_id = ANY(:r)", r=rids)}
        assert rows[rids[2]]["status"] == "blocked"
        assert "pattern_f1" in " ".join(rows[rids[2]]["summary"]["gate"]["reasons"])
        passing = [r for r in rids if rows[r]["status"] == "awaiting_approval"]
        assert rids[0] in passing, rows[rids[0]]["summary"].get("gate")
        # the recommendation: of the candidates the gate passed, the one using the least of its utility floor
        loads = {r: sum(e["value"] / e["max"] if "max" in e else e["min"] / e["value"]
                        for e in rows[r]["summary"]["gate"]["per_utility"].values() if "max" in e or "min" in e)
                 for r in passing}
        recommended = rows[rids[0]]["summary"]["comparison"]["recommended"]
        assert recommended == min(loads, key=loads.get)
        flow_run_id = str(rows[rids[0]]["flow_run_id"])
        wait_until(lambda: flow_run_state(flow_run_id) == "PAUSED", 60, "the comparison to pause")

        with chromium_page() as page:
            page.set_viewport_size({"width": 1400, "height": 1000})
            page.goto(f"{UI_URL}/runs/flow-run/{flow_run_id}")
            page.get_by_role("button", name="Resume").click()
            dialog = page.get_by_role("dialog")
            expect(dialog.get_by_role("heading", name="Comparison pytest_compare: pick one candidate to publish")
                   ).to_be_visible()
            expect(dialog.get_by_text("Recommended", exact=True)).to_be_visible()
            pick = form_property(dialog, "Pick (Optional)").locator("input")
            expect(pick).to_have_value(str(recommended))
            issued = cli("steward", "code", str(recommended), "--steward", STEWARD)
            assert issued.returncode == 0, issued.stderr
            form_property(dialog, "Decision Code (Optional)").locator("textarea").fill(issued.stdout.strip())
            dialog.get_by_role("button", name="Submit", exact=True).click()
            expect(dialog).to_be_hidden()
            expect(page.locator(".state-badge").first).to_have_text("Completed", timeout=180_000)
        assert proc.wait(timeout=60) == 0

        final = {r["release_id"]: r for r in q(engine, "SELECT release_id, status, published_table, staging_purged_at"
                                                       " FROM governance.releases WHERE release_id = ANY(:r)", r=rids)}
        assert final[recommended]["status"] == "published"
        assert final[recommended]["published_table"] == f"published.{dataset}__r{recommended}"
        for rid in set(rids) - {recommended}:
            assert final[rid]["status"] in ("rejected", "blocked") and final[rid]["published_table"] is None
            assert final[rid]["staging_purged_at"] is not None
            assert not q(engine, "SELECT 1 FROM staging.candidate_points WHERE release_id = :r", r=rid)
            if final[rid]["status"] == "rejected":
                (approval,) = q(engine, "SELECT steward, comment FROM governance.approvals WHERE release_id = :r", r=rid)
                assert approval["steward"] == STEWARD and f"release {recommended}" in approval["comment"]
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
