"""The release flow end to end on the real PostGIS, Prefect server, GX and Dask, driven through the CLI."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from tasks.db import database_url
from tests.integration.conftest import (
    TDRIVE_WEEK,
    assert_no_raw_statistic_for_consumers,
    base_spec,
    cli,
    final_state,
    release_status,
    set_dataset_policy,
    start_release,
    wait_for_status,
    wait_until,
)
from tests.integration.exports import check_exports, consumer_engine

pytestmark = pytest.mark.integration


PUBLISHED_SPEC = {"mechanism": "objtrace", "params": {"epsilon": 10.0}, "prepare": {"cell_size_m": 2000},
                  **TDRIVE_WEEK}


@pytest.fixture(scope="module")
def published(engine, loaded_tdrive, tmp_path_factory):
    """The synthetic shape's whole flow: an ObjTrace release (the demo's mechanism: DP per taxi, timestamped) of
    the real T-Drive subset. `trajpub release run` returns (exit 0) once the release awaits its steward, printing
    the release and the next command; the flow run goes on in the background, and `trajpub approve` publishes."""
    dataset = loaded_tdrive("pub")
    spec = tmp_path_factory.mktemp("pub") / "spec.yaml"
    spec.write_text(yaml.safe_dump(base_spec(dataset, **PUBLISHED_SPEC)))
    started = cli("release", "run", "--spec", str(spec), timeout=500)
    assert started.returncode == 0, started.stdout + started.stderr
    outcome = json.loads(started.stdout.strip().splitlines()[-1])
    rid = outcome["release_id"]
    assert outcome["status"] == "awaiting_approval" == release_status(engine, rid)
    assert f"trajpub approve {rid} --steward LOGIN" in started.stdout
    approved = cli("approve", str(rid), "--steward", "ada", "--comment", "reviewed")
    assert approved.returncode == 0, approved.stderr
    assert wait_until(lambda: release_status(engine, rid) == "published", 120, "the background flow to publish")
    assert wait_until(lambda: final_state(outcome["flow_run_id"]).is_completed(), 60, "the flow run to complete")
    # the console: the flow's log went to stderr (and its file), stdout holds the outcome alone; the whole run's log,
    # Dask's cluster closing included, holds no traceback and no "Sending large graph" warning
    assert len(started.stdout.strip().splitlines()) == 2, started.stdout
    log = Path(outcome["log"]).read_text()
    assert "Traceback" not in log and "Sending large graph" not in log, log[-4000:]
    return dataset, rid


def q(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).all()


def test_published_release_has_tables_view_status_and_approval(engine, published):
    dataset, rid = published
    (status, table, summary), = q(engine, "SELECT status, published_table, summary FROM governance.releases "
                                          "WHERE release_id = :r", r=rid)
    assert status == "published" and table == f"published.{dataset}__r{rid}"
    (n_points, n_traj), = q(engine, f"SELECT count(*), count(DISTINCT traj_id) FROM {table}")
    assert n_traj == summary["mechanism"]["released_records"] > 0
    assert n_points == summary["mechanism"]["released_points"]
    # trajectories as LineStringM in EPSG:4326, M = position; the latest view shows this release
    (geom_type, srid, m_ok), = q(engine, f"SELECT DISTINCT GeometryType(geom), ST_SRID(geom), "
                                         f"bool_and(ST_M(ST_EndPoint(geom)) = n_points - 1) "
                                         f"FROM {table}_traj WHERE geom IS NOT NULL GROUP BY 1, 2")
    assert (geom_type, srid, m_ok) == ("LINESTRINGM", 4326, True)
    assert q(engine, f"SELECT count(*) FROM published.{dataset}_latest")[0][0] == n_points
    (decision, steward), = q(engine, "SELECT decision, steward FROM governance.approvals WHERE release_id = :r",
                             r=rid)
    assert (decision, steward) == ("approved", "ada")
    history = [r[0] for r in q(engine, "SELECT to_status FROM governance.release_transitions "
                                       "WHERE release_id = :r ORDER BY at", r=rid)]
    assert history == ["planned", "validated", "protected", "audited", "awaiting_approval", "approved", "published"]


def test_published_columns_carry_no_raw_identifiers_and_synthetic_times(engine, published):
    dataset, rid = published
    columns = {r[0] for r in q(engine, "SELECT column_name FROM information_schema.columns WHERE "
                                       "table_schema = 'published' AND table_name = :t", t=f"{dataset}__r{rid}")}
    assert columns == {"traj_id", "seq", "t", "geom"}
    (n, untimed, unfloored), = q(engine, f"SELECT count(*), count(*) FILTER (WHERE t IS NULL), count(*) FILTER "
                                         f"(WHERE extract(second FROM t) <> 0) FROM published.{dataset}__r{rid}")
    assert n > 0 and untimed == 0 and unfloored == 0  # every point has a time, floored to the spec's 60 s


def test_budget_ledger_charged_once_per_object(engine, published):
    dataset, rid = published
    rows = q(engine, "SELECT epsilon, privacy_unit FROM governance.budget_ledger WHERE release_id = :r", r=rid)
    assert rows == [(10.0, "one object")]
    assert q(engine, "SELECT account, unit, unit_epsilon FROM governance.budget_ledger WHERE release_id = :r",
             r=rid) == [("epsilon-DP", "object", 10.0)]
    shown = cli("budget", "show", "--dataset", dataset)
    assert shown.returncode == 0 and "epsilon-DP: epsilon 10 per object spent of cap 1000" in shown.stdout
    (summary,), = q(engine, "SELECT summary FROM governance.releases WHERE release_id = :r", r=rid)
    assert "noisy_records" in summary["mechanism"]  # noisy figures for the steward; lineage keeps public ones


def test_lineage_start_and_complete_without_seed(engine, published):
    dataset, rid = published
    events = q(engine, "SELECT event_type, event FROM governance.lineage_events WHERE release_id = :r "
                       "ORDER BY event_id", r=rid)
    assert [e[0] for e in events] == ["START", "COMPLETE"]
    complete = events[-1][1]
    assert complete["inputs"][0]["name"] == "trajpub.raw.points"
    assert complete["inputs"][0]["facets"]["snapshot"]["content_hash"]
    assert complete["outputs"][0]["name"] == f"trajpub.published.{dataset}__r{rid}"
    assert {"mechanism", "guarantee", "validation", "audit", "approval"} <= set(complete["run"]["facets"])
    assert complete["run"]["facets"]["approval"]["steward"] == "ada"
    for _, event in events:  # the spec's seed (test mode) must not reach lineage under any key
        assert not re.search(r'"[a-z_]*seed": ', json.dumps(event))
    shown = cli("release", "show", str(rid))
    assert shown.returncode == 0 and "COMPLETE" in shown.stdout and "PUBLISHED" in shown.stdout
    assert "evidence: intact (charge, seal, the auditor's attested audit, report and gate)" in shown.stdout
    assert "review report: the Prefect UI's copy matches the attested report" in shown.stdout


def test_a_review_report_replaced_in_the_prefect_ui_is_detected(engine, published):
    """Anyone with the Prefect API string can add a version of the review-report artifact under its key: `release
    show` compares the UI's copy with the report the auditor attested in the database."""
    from prefect.artifacts import create_markdown_artifact

    _, rid = published
    create_markdown_artifact(key=f"review-report-r{rid}", markdown="All attacks passed. Approve.")
    shown = cli("release", "show", str(rid))
    assert shown.returncode == 0 and "review report: REPLACED: the Prefect UI's copy differs" in shown.stdout


def test_no_raw_statistic_reaches_a_consumer(engine, published):
    _, rid = published
    assert_no_raw_statistic_for_consumers(engine, rid)


def test_lineage_events_follow_openlineage_and_reach_an_http_backend(engine, published, monkeypatch):
    """The stored START and COMPLETE events validate against the OpenLineage 2-0-2 spec and each facet
    against its schema; with OPENLINEAGE_URL set they are delivered, in order and once, to an HTTP endpoint."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from jsonschema import ValidationError

    from tasks import lineage
    from tests.lineage_schema import validate_event

    _, rid = published
    stored = [e for _, e in q(engine, "SELECT event_type, event FROM governance.lineage_events WHERE release_id = :r "
                                      "ORDER BY event_id", r=rid)]
    for event in stored:
        validate_event(event)
    broken = json.loads(json.dumps(stored[-1]))
    del broken["run"]["facets"]["guarantee"]["_producer"]
    with pytest.raises((ValidationError, AssertionError)):  # the validator can fail
        validate_event(broken)
    received: list[dict] = []

    class Backend(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(201)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Backend)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("OPENLINEAGE_URL", f"http://127.0.0.1:{server.server_port}")
        assert lineage.deliver(engine) >= len(stored)
        lineage.deliver(engine)  # may send events of releases running meanwhile in another worker, never ours again
    finally:
        server.shutdown()
    ours = [e for e in received if e["run"]["facets"]["trajpub_release"]["release_id"] == rid]  # each event once
    assert [(e["eventType"], e["run"]["runId"]) for e in ours] == [(e["eventType"], e["run"]["runId"]) for e in stored]
    for event in ours:
        validate_event(event)


def test_publish_again_changes_nothing(engine, published):
    dataset, rid = published
    before = q(engine, "SELECT count(*) FROM governance.lineage_events WHERE release_id = :r", r=rid)
    again = cli("publish-approved", str(rid))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.strip().splitlines()[-1])["table"] == f"published.{dataset}__r{rid}"
    assert q(engine, "SELECT count(*) FROM governance.lineage_events WHERE release_id = :r", r=rid) == before


def test_consumer_reads_published_only(engine, published):
    """As the consumer's own login (what a data user connects as)."""
    dataset, rid = published
    consumer = sa.create_engine(database_url("trajpub_consumer"))
    with consumer.connect() as conn:
        assert conn.execute(sa.text(f"SELECT count(*) FROM published.{dataset}__r{rid}")).scalar() > 0
        assert conn.execute(sa.text(f"SELECT count(*) FROM published.{dataset}_latest_traj")).scalar() > 0
        row = conn.execute(sa.text("SELECT * FROM published.release_lineage WHERE release_id = :r"),
                           {"r": rid}).mappings().one()
        assert row["approved_by"] == "ada" and row["guarantee"]["epsilon"] == 10.0
        assert "snapshot_points" not in row and "seed" not in json.dumps(row["parameters"])
    for table in ("raw.points", "raw.sources", "staging.quarantine", "staging.candidate_points",
                  "governance.releases", "governance.budget_ledger"):
        with consumer.connect() as conn, pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
            conn.execute(sa.text(f"SELECT 1 FROM {table} LIMIT 1"))


def test_consumer_card_and_lineage_list_each_attack_once_per_resolution(engine, published):
    """The gate runs grid attacks at every cell size of its policy; what a consumer reads holds
    each (attack, cell size) verdict once, as governance recorded it, not copies of one attack."""
    _, rid = published
    recorded = {(a, r or None, p) for a, r, p in q(engine, "SELECT attack, resolution_m, passed FROM "
                                                           "governance.audit_results WHERE release_id = :r", r=rid)}
    assert len({a for a, _, _ in recorded}) < len(recorded)  # some attack ran at several resolutions
    with consumer_engine().connect() as conn:
        card = conn.execute(sa.text("SELECT audits FROM published.release_lineage WHERE release_id = :r"),
                            {"r": rid}).scalar_one()
    (event,), = q(engine, "SELECT event FROM governance.lineage_events WHERE release_id = :r "
                          "AND event_type = 'COMPLETE'", r=rid)
    for listed in (card, event["run"]["facets"]["audit"]["attacks"]):
        rows = [(a["attack"], a.get("resolution_m"), a["passed"]) for a in listed]  # no grid: absent in an event
        assert len(rows) == len(set(rows)) and set(rows) == recorded


def test_validation_quarantine_is_accounted_for(engine, published):
    dataset, rid = published
    (n_rows, n_q, result), = q(engine, "SELECT n_rows, n_quarantined, result FROM governance.validation_results "
                                       "WHERE release_id = :r", r=rid)
    assert n_q == q(engine, "SELECT count(*) FROM staging.quarantine WHERE release_id = :r", r=rid)[0][0]
    assert n_q == result["n_integrity"] + result["n_duplicate"]
    (snapshot,), = q(engine, "SELECT snapshot_points FROM governance.releases WHERE release_id = :r", r=rid)
    assert n_rows == snapshot == q(engine, "SELECT count(*) FROM raw.points WHERE dataset = :d", d=dataset)[0][0]


def test_approvals_and_ledger_are_append_only(owner, published):
    """Even for the owner (short of disabling triggers: `trajpub verify` catches that, test_tamper_evidence)."""
    _, rid = published
    for sql in ("UPDATE governance.approvals SET steward = 'mallory' WHERE release_id = :r",
                "DELETE FROM governance.budget_ledger WHERE release_id = :r"):
        with owner.begin() as conn, pytest.raises(sa.exc.ProgrammingError, match="append-only"):
            conn.execute(sa.text(sql), {"r": rid})


def test_rejected_release_publishes_nothing(engine, loaded_tdrive, tmp_path):
    dataset = loaded_tdrive("rej")
    run = start_release(base_spec(dataset), tmp_path)
    wait_for_status(engine, run, {"awaiting_approval"})
    assert cli("reject", str(run.release_id), "--steward", "ada").returncode != 0  # comment required
    rejected = cli("reject", str(run.release_id), "--steward", "ada", "--comment", "too coarse")
    assert rejected.returncode == 0, rejected.stderr
    assert run.proc.wait(timeout=120) == 0
    # progress inside the long steps: each validated partition, each of the policy's resolutions
    assert re.search(r"validation: partition 1 of \d+ checked", run.output()), run.output()
    assert re.search(r"audit: at \d+ m: \w+.* done \(resolution 1 of \d+\)", run.output()), run.output()
    assert q(engine, "SELECT status, published_table FROM governance.releases WHERE release_id = :r",
             r=run.release_id) == [("rejected", None)]
    assert q(engine, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'published' "
                     "AND table_name LIKE :p", p=f"{dataset}%") == [(0,)]


def test_timeout_keeps_release_waiting_and_later_approval_publishes(engine, loaded_tdrive, tmp_path):
    """Nobody answers in time, the flow ends, a later approval still publishes (in a flow run of its own). (A
    cluster of separate ``dask scheduler`` and ``dask worker`` processes is tested in test_recovery.py.)"""
    dataset = loaded_tdrive("late")
    run = start_release(base_spec(dataset, approval_timeout_s=2), tmp_path)
    assert run.proc.wait(timeout=300) == 0, run.output()
    assert '"status": "awaiting_approval"' in run.output()
    assert q(engine, "SELECT status FROM governance.releases WHERE release_id = :r",
             r=run.release_id) == [("awaiting_approval",)]
    approved = cli("approve", str(run.release_id), "--steward", "bob")
    assert approved.returncode == 0, approved.stderr
    assert q(engine, "SELECT status, published_table FROM governance.releases WHERE release_id = :r",
             r=run.release_id) == [("published", f"published.{dataset}__r{run.release_id}")]
    # AdaTrace's epsilon is per trajectory record; the ledger charges the object: 10 x at most 7 records per taxi
    assert q(engine, "SELECT epsilon, privacy_unit, account, unit, unit_epsilon FROM governance.budget_ledger "
                     "WHERE release_id = :r", r=run.release_id) == [
        (10.0, "one trajectory record", "epsilon-DP", "object", 70.0)]


def test_fgs_pufferfish_release_runs_the_whole_flow(engine, loaded_tdrive, tmp_path):
    """Validation, the truthful linkage audit (recorded whatever it is), approval, publication."""
    dataset = loaded_tdrive("fgs")
    truthful = ["ap_attack", "home_work", "known_points", "reidentification_location",
                "reidentification_location_sequence", "signature_linkage"]
    policy = {"attacks": {name: {"max_risk": 0.95} for name in truthful}}  # lenient; raw data (0.99-1.0) is blocked
    policy["attacks"]["home_work"]["params"] = {"timezone": "Asia/Shanghai"}
    set_dataset_policy(dataset, policy, tmp_path)
    spec = base_spec(dataset, mechanism="fgs_pufferfish",
                     params={"epsilon": 2.0, "n_slots": 48, "day_timezone": "Asia/Shanghai"})
    run = start_release(spec, tmp_path)
    assert wait_for_status(engine, run, {"awaiting_approval", "blocked"}) == "awaiting_approval"
    with engine.connect() as conn:
        audits = dict(conn.execute(sa.text(
            "SELECT attack, (evidence->>'n_targets')::int FROM governance.audit_results WHERE release_id = :r"),
            {"r": run.release_id}).all())
        meta = conn.execute(sa.text("SELECT summary->'mechanism' FROM governance.releases WHERE release_id = :r"),
                            {"r": run.release_id}).scalar()
    assert sorted(audits) == truthful
    assert audits["signature_linkage"] == meta["released_records"] > 0
    assert meta["analytic_epsilon"]["epsilon_total"] == pytest.approx(2.0, rel=1e-6)  # calibrated to the target
    approved = cli("approve", str(run.release_id), "--steward", "ada")
    assert approved.returncode == 0, approved.stderr
    run.proc.wait(timeout=120)
    table = f"published.{dataset}__r{run.release_id}"
    with engine.connect() as conn:
        n, n_traj, n_untimed = conn.execute(sa.text(
            f"SELECT count(*), count(DISTINCT traj_id), count(*) FILTER (WHERE t IS NULL) FROM {table}")).one()
        charged = conn.execute(sa.text("SELECT epsilon FROM governance.budget_ledger WHERE release_id = :r"),
                               {"r": run.release_id}).scalar()
    assert n == 48 * n_traj and n_traj == meta["released_records"] and n_untimed == 0  # 48 timed slots a day
    assert charged == 2.0
    assert meta["empirical_epsilon"]["epsilon_total"] is not None  # the steward's figure, kept in governance
    assert_no_raw_statistic_for_consumers(engine, run.release_id)


def test_export_round_trips_in_every_format_and_only_when_published(engine, published, tmp_path):
    """Points and LineStrings in GeoParquet, GeoPackage and FlatGeobuf with the release card, read as
    the consumer role; a release that is not published is refused."""
    from tasks.export import export_release
    from trajpub.errors import TrajpubError

    dataset, release_id = published
    table = f"published.{dataset}__r{release_id}"
    check_exports(release_id, tmp_path, {"points": table, "trajectories": f"{table}_traj"})
    (unpublished,) = q(engine, "SELECT max(release_id) + 1 FROM governance.releases")[0]
    with pytest.raises(TrajpubError, match=f"release {unpublished} is not published"):
        export_release(consumer_engine(), unpublished, "gpkg", tmp_path / "nothing.gpkg")
    assert not (tmp_path / "nothing.gpkg").exists()
    first, again = (cli("export", str(release_id), "--format", "gpkg", "--out", str(tmp_path / "cli.gpkg"))
                    for _ in range(2))
    assert first.returncode == 0 and f"trajectories: {tmp_path / 'cli.gpkg'}" in first.stdout, first.stderr
    assert again.returncode == 1 and "already exists" in again.stderr and "Traceback" not in again.stderr


def test_review_report_renders_in_chromium_with_every_image(engine, published, tmp_path):
    from tests.integration.browser import chromium_page

    _, rid = published
    out = tmp_path / "review.html"
    written = cli("report", str(rid), "--out", str(out))
    assert written.returncode == 0, written.stderr
    with chromium_page() as page:
        page.goto(out.as_uri())
        page.wait_for_load_state("load")
        images = page.eval_on_selector_all("img", "els => els.map(e => [e.alt, e.complete, e.naturalWidth])")
        text = page.inner_text("body")
    assert {alt for alt, _, _ in images} >= {"Density: raw vs release", "Trajectory length and diameter",
                                             "Attacks"}
    assert all(complete and width > 0 for _, complete, width in images), images
    for section in ("Guarantee", "Privacy budget", "Linkage attacks", "Utility", "left"):
        assert section in text
    assert "signature_linkage_synthetic" in text


def test_fastpub_release_publishes_its_fragment_table(engine, tmp_path):
    """FASTPub through the whole flow on the full T-Drive sample (4,400 taxi-days as clients), the
    membership audit on the aggregate product, and the fragment table published after approval."""
    from tasks.load import load_source
    from tests.integration.conftest import TDRIVE_CSV

    dataset = f"fastpub_{os.getpid()}_{tmp_path.name[-6:]}".lower().replace("-", "_")
    load_source(engine, "tdrive", TDRIVE_CSV, dataset)
    # each taxi-day is a client at epsilon 10: per object that is unbounded (nothing caps a taxi's days), so this
    # dataset declares its unit the trajectory record
    refused = start_release(base_spec(dataset, mechanism="fastpub", params={"k": 5, "epsilon": 10.0}), tmp_path)
    assert refused.proc.wait(timeout=120) == 1 and "unbounded" in refused.output()
    assert cli("budget", "unit", dataset, "record", "--steward", "ada").returncode == 0
    spec = base_spec(dataset, mechanism="fastpub", params={"k": 5, "epsilon": 10.0, "l_max": 3},
                     prepare={"cell_size_m": 25000})
    run = start_release(spec, tmp_path)
    assert wait_for_status(engine, run, {"awaiting_approval", "blocked"}) == "awaiting_approval", run.output()
    (attacks,) = q(engine, "SELECT array_agg(attack) FROM governance.audit_results WHERE release_id = :r",
                   r=run.release_id)[0]
    assert attacks == ["membership"]
    n_owners = q(engine, "SELECT count(*) FROM staging.candidate_owners WHERE release_id = :r", r=run.release_id)
    assert n_owners[0][0] > 0  # who answered: the auditor's private key, never published
    assert cli("approve", str(run.release_id), "--steward", "ada").returncode == 0
    assert run.proc.wait(timeout=120) == 0
    table = f"published.{dataset}__r{run.release_id}"
    rows = q(engine, f"SELECT cells, length, estimated_count, ST_NPoints(geom) FROM {table}")
    assert rows and all(length == len(cells) == npts and count > 5 for cells, length, count, npts in rows)
    (summary,) = q(engine, "SELECT summary FROM governance.releases WHERE release_id = :r", r=run.release_id)[0]
    assert summary["shape"] == "fragments" and summary["published"] == {"fragments": len(rows)}
    columns = {r[0] for r in q(engine, "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                                       "'published' AND table_name = :t", t=f"{dataset}__r{run.release_id}")}
    assert columns == {"fragment_id", "cells", "length", "estimated_count", "round", "geom"}
    assert q(engine, f"SELECT count(*) FROM published.{dataset}_latest_fragments") == [(len(rows),)]
    assert_no_raw_statistic_for_consumers(engine, run.release_id)
    check_exports(run.release_id, tmp_path, {"fragments": table})
