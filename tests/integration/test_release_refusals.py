"""Bad input and refused releases: a clear error, a recorded reason, nothing published."""

from __future__ import annotations

import json
import uuid

import pandas as pd
import pytest
import sqlalchemy as sa
import yaml

from tests.integration.conftest import (
    TDRIVE_CSV,
    base_spec,
    cli,
    final_state,
    flow_run_in,
    set_dataset_policy,
    small_fleet_policy,
    start_release,
    wait_for_status,
)

pytestmark = pytest.mark.integration


def releases_of(engine, dataset: str) -> list[tuple]:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT release_id, status, failure_reason FROM governance.releases "
                                    "WHERE dataset = :d ORDER BY release_id"), {"d": dataset}).all()


def published_tables(engine, dataset: str) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM information_schema.tables WHERE table_schema = "
                                    "'published' AND table_name LIKE :p"), {"p": f"{dataset}%"}).scalar()


@pytest.mark.parametrize(("flags", "message"), [
    (["--mechanism", "no_such_mechanism"], "unknown mechanism 'no_such_mechanism'"),
    (["--param", "epsilonn=1"], "unknown parameter"),
    (["--param", "epsilon=-1"], "epsilon"),
    (["--window", "2008-02-05/2008-02-01"], "window_start must be before window_end"),
    (["--bbox", "117.6,39.4,115.4,41.1"], "is not (min_lon, min_lat, max_lon, max_lat) in degrees"),
])
def test_bad_parameters_are_refused_before_a_release_exists(engine, bare_dataset, tmp_path, flags, message):
    dataset = bare_dataset
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"dataset: {dataset}\nbbox: [115.4, 39.4, 117.6, 41.1]\n")
    result = cli("release", "run", "--wait", "--spec", str(spec), *flags)
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr
    assert releases_of(engine, dataset) == []


def test_malformed_spec_yaml_names_file_line_and_column(tmp_path):
    spec = tmp_path / "broken.yaml"
    spec.write_text("dataset: x\nbbox: [1, 2\n")
    result = cli("release", "run", "--wait", "--spec", str(spec))
    assert result.returncode == 1
    assert f"file {spec}, line" in result.stderr and "column" in result.stderr


def test_budget_cap_refuses_before_reading_data(engine, bare_dataset, tmp_path):
    dataset = bare_dataset
    assert cli("budget", "cap", dataset, "0.5", "--steward", "ada").returncode == 0
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"dataset: {dataset}\nbbox: [115.4, 39.4, 117.6, 41.1]\nrequested_by: pytest\n")
    result = cli("release", "run", "--wait", "--spec", str(spec), "--param", "epsilon=1")  # no cap on records per object
    assert result.returncode == 1 and "epsilon per object is unbounded" in result.stderr, result.stderr
    result = cli("release", "run", "--wait", "--spec", str(spec), "--param", "epsilon=0.25", "--param",
                 "max_records_per_object=3")  # 0.25 per record, 0.75 per object
    assert result.returncode == 1
    assert "needs epsilon-DP epsilon 0.75 per object" in result.stderr and "cap 0.5" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: this release needs")  # the CLI's last word
    assert releases_of(engine, dataset) == []
    # refused at plan, inside its flow run: the run ends in a state named Refused, not a crash or a success
    state = final_state(flow_run_in(result.stderr))
    assert (state.type.value, state.name) == ("FAILED", "Refused") and "cap 0.5" in state.message


def test_an_empty_window_is_skipped_not_failed(engine, loaded_tdrive, tmp_path):
    """A window without data (a quiet week of a weekly deployment) is skipped before anything is planned: no
    release, nothing charged, no lineage, exit 0 with the outcome on stdout, the flow run Completed in a state
    named Skipped that says so, and no traceback."""
    dataset = loaded_tdrive("empty")
    run = start_release(base_spec(dataset, window_start="2009-01-01", window_end="2009-01-02"), tmp_path)
    assert run.proc.wait(timeout=240) == 0, run.output()
    run.reader.join(timeout=30)
    outcome = json.loads(run.output().strip().splitlines()[-1])
    assert outcome["status"] == "skipped" and outcome["reason"].startswith(
        f"skipped: no data in the window 2009-01-01T00:00:00+00:00 to 2009-01-02T00:00:00+00:00 of dataset '{dataset}'")
    assert "Traceback" not in run.output()
    assert releases_of(engine, dataset) == [] and published_tables(engine, dataset) == 0
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM governance.budget_ledger WHERE dataset = :d"),
                            {"d": dataset}).scalar() == 0
    run_id = flow_run_in(run.output())
    state = final_state(run_id)
    assert (state.type.value, state.name) == ("COMPLETED", "Skipped") and state.message == outcome["reason"]
    with engine.connect() as conn:  # recorded as skipped (sql/041), with its window
        skip = conn.execute(sa.text("SELECT dataset, window_start, reason FROM governance.skipped_runs"
                                    " WHERE flow_run_id = :f"), {"f": run_id}).one()
    assert (skip.dataset, skip.window_start.year, skip.reason) == (dataset, 2009, outcome["reason"])


def test_time_regressions_and_impossible_points_are_quarantined_and_fail_the_release(engine, tmp_path):
    """Real T-Drive rows of 5 taxis, with one taxi's timestamps swapped pairwise (it goes back in time every
    other point: not a newest-first listing, which the load would put in order) and a few points outside the
    bbox: every bad row lands in quarantine with its expectation, and the share trips the 5% policy."""
    from tasks.load import load_source

    df = pd.read_csv(TDRIVE_CSV)
    df = df[df["taxi_id"].isin(sorted(df["taxi_id"].unique())[:5])].copy()
    first = df["taxi_id"] == df["taxi_id"].min()
    times = df.loc[first, "datetime"].to_numpy()
    pairs = len(times) // 2 * 2
    times[:pairs] = times[:pairs].reshape(-1, 2)[:, ::-1].ravel()
    df.loc[first, "datetime"] = times
    df.iloc[10:13, df.columns.get_loc("latitude")] = 10.0  # valid coordinates, far outside the release bbox
    path = tmp_path / "bad_taxis.csv"
    df.to_csv(path, index=False)
    dataset = f"rev_{uuid.uuid4().hex[:8]}"
    load_source(engine, "tdrive", path, dataset)  # the default cap, 10 per taxi: ε 1 x 7 records fits
    run = start_release(base_spec(dataset, params={"epsilon": 1.0, "max_records_per_object": 7}), tmp_path)
    status = wait_for_status(engine, run, {"failed"})
    run.proc.wait(timeout=60)
    assert status == "failed" and run.proc.returncode == 1
    [(rid, _, reason)] = releases_of(engine, dataset)
    assert "failed validation, above the policy threshold of 5.0%" in reason
    assert "time does not increase" in reason
    with engine.connect() as conn:
        reasons = conn.execute(sa.text("SELECT reason FROM staging.quarantine WHERE release_id = :r"),
                               {"r": rid}).scalars().all()
        result = conn.execute(sa.text("SELECT result FROM governance.validation_results WHERE release_id = :r"),
                              {"r": rid}).scalar()
    # the load kept the swapped taxi in file order: each of its plausible points that does not come after the
    # previous plausible one in time is quarantined; exact repeats and the points outside the bbox are
    # quarantined for that instead and skipped by the time-order check
    plausible = df[first & ~df.duplicated(keep="first") & (df["latitude"] != 10.0)]
    goes_back = (pd.to_datetime(plausible["datetime"]).diff() <= pd.Timedelta(0)).sum()
    assert goes_back >= len(plausible) // 3
    assert sum("time does not increase" in r for r in reasons) == goes_back
    outside = ~df["latitude"].between(39.4, 41.1)  # our 3, and any of the real data's own (0, 0) fixes
    assert outside.sum() >= 3
    assert sum("latitude outside the release bbox" in r for r in reasons) == outside.sum()
    assert len(reasons) == result["n_quarantined"] == result["n_integrity"] + result["n_duplicate"]
    assert published_tables(engine, dataset) == 0
    with engine.connect() as conn:  # reserved at plan, given back: refused before the mechanism ran
        ledger = conn.execute(sa.text("SELECT entry_kind, epsilon FROM governance.budget_ledger WHERE release_id = :r"
                                      " ORDER BY entry_id"), {"r": rid}).all()
    assert [tuple(r) for r in ledger] == [("charge", 1.0), ("release", -1.0)]


def test_release_over_the_gate_threshold_is_blocked_with_evidence(engine, loaded_tdrive, tmp_path):
    """Dummies at k = 2 publish every real trajectory beside a single dummy: an attacker who knows a taxi's
    trajectory links it to its published record, and the gate blocks."""
    dataset = loaded_tdrive("gate")
    set_dataset_policy(dataset, small_fleet_policy().to_dict() | {
        "attacks": {"signature_linkage": {"max_risk": 0.01}}}, tmp_path)
    spec = base_spec(dataset, mechanism="dummy", params={"k": 2, "l": 2, "road_network": None})
    run = start_release(spec, tmp_path)
    assert wait_for_status(engine, run, {"blocked"}) == "blocked"
    # not a success for scripts or for Prefect: exit 3, the reason in one sentence, a Failed state named Blocked
    assert run.proc.wait(timeout=60) == 3 and '"status": "blocked"' in run.output()
    said = f"blocked: release {run.release_id} is blocked by the audit gate: signature_linkage: risk "
    [line] = [line for line in run.output().splitlines() if line.startswith("blocked: ")]
    assert line.startswith(said) and "against max_risk 0.01: blocked, the whole interval is above it" in line
    with engine.connect() as conn:
        audit = conn.execute(sa.text("SELECT risk, risk_ci_low, risk_ci_high, threshold, verdict, passed, evidence "
                                     "FROM governance.audit_results WHERE release_id = :r ORDER BY risk DESC "
                                     "LIMIT 1"),  # the worst resolution
                             {"r": run.release_id}).mappings().one()
        charged = conn.execute(sa.text("SELECT epsilon FROM governance.budget_ledger WHERE release_id = :r"),
                               {"r": run.release_id}).scalar()
        flow_run_id = conn.execute(sa.text("SELECT flow_run_id FROM governance.releases WHERE release_id = :r"),
                                   {"r": run.release_id}).scalar()
    state = final_state(flow_run_id)
    assert (state.type.value, state.name) == ("FAILED", "Blocked") and state.message == line.removeprefix("blocked: ")
    assert audit["risk_ci_low"] <= audit["risk"] <= audit["risk_ci_high"] and audit["risk_ci_low"] > 0.01
    assert audit["verdict"] == "blocked"
    assert audit["risk"] > audit["threshold"] == 0.01 and audit["passed"] is False
    assert audit["evidence"]["evidence"]["examples"]  # concrete linked records for the steward
    assert charged == 0.0  # a syntactic model is charged no epsilon; its ledger row records that it ran
    assert published_tables(engine, dataset) == 0


def test_fgs_on_a_quarter_of_an_hour_is_refused_before_the_budget_is_charged(engine, bare_dataset, tmp_path):
    """FGS-Pufferfish on 15 minutes failed with a reshape error after its epsilon was charged. A window
    that cannot hold its min_days whole days is refused at parse, with the reason, before a release exists."""
    dataset = bare_dataset
    spec = tmp_path / "fgs.yaml"
    spec.write_text(yaml.safe_dump(base_spec(dataset, mechanism="fgs_pufferfish", window_start="2008-02-04T10:00:00Z",
                                             window_end="2008-02-04T10:15:00Z",
                                             params={"epsilon": 2.0, "day_timezone": "Asia/Shanghai"})))
    result = cli("release", "run", "--wait", "--spec", str(spec))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "can hold 0; widen the window" in result.stderr and "fgs_pufferfish.window" in result.stderr
    assert releases_of(engine, dataset) == []
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM governance.budget_ledger WHERE dataset = :d"),
                            {"d": dataset}).scalar() == 0


def test_fastpub_admitting_no_fragment_ends_as_nothing_released(engine, loaded_tdrive, tmp_path):
    """FASTPub admitting no fragment was blocked as an attack's error ("release frame is empty"). A
    threshold k above the number of clients admits none: the outcome is "nothing was released", no attack runs,
    the budget stays spent and nothing is published."""
    dataset = loaded_tdrive("nofrag")
    run = start_release(base_spec(dataset, mechanism="fastpub", prepare={"cell_size_m": 25000},
                                  params={"k": 1_000_000, "epsilon": 1.0, "l_max": 1, "max_records_per_object": 1}),
                        tmp_path)
    assert run.proc.wait(timeout=300) == 3, run.output()  # blocked: nothing to publish
    assert '"outcome": "nothing was released"' in run.output()
    [(rid, status, _)] = releases_of(engine, dataset)
    with engine.connect() as conn:
        detail = conn.execute(sa.text("SELECT detail FROM governance.release_transitions WHERE release_id = :r AND "
                                      "to_status = 'blocked'"), {"r": rid}).scalar()
        attacks = conn.execute(sa.text("SELECT count(*) FROM governance.audit_results WHERE release_id = :r"),
                               {"r": rid}).scalar()
        events = conn.execute(sa.text("SELECT event_type FROM governance.lineage_events WHERE release_id = :r "
                                      "ORDER BY event_id"), {"r": rid}).scalars().all()
        charged = conn.execute(sa.text("SELECT count(*) FROM governance.budget_ledger WHERE release_id = :r"),
                               {"r": rid}).scalar()
    assert status == "blocked" and detail.startswith("nothing was released: fastpub released no")
    state = final_state(flow_run_in(run.output()))
    assert (state.type.value, state.name) == ("FAILED", "Blocked") and "nothing was released" in state.message
    assert attacks == 0 and events == ["START", "ABORT"] and charged >= 1
    assert published_tables(engine, dataset) == 0
