"""The gate policy belongs to the dataset: a spec cannot write its own thresholds, point at a
file, or name a registered policy weaker than its dataset's; a stricter registered policy gates the release and
the review and lineage name its version."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
import yaml

from audits.gate import GatePolicy
from tests.integration.conftest import base_spec, cli, small_fleet_policy, start_release, wait_for_status
from trajpub.errors import PolicyError

pytestmark = pytest.mark.integration


def q(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).all()


def n_releases(engine, dataset: str) -> int:
    return q(engine, "SELECT count(*) FROM governance.releases WHERE dataset = :d", d=dataset)[0][0]


def write(tmp_path, name: str, data) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def default_with(**max_risk) -> dict:
    """The 40-taxi datasets' policy (:func:`small_fleet_policy`: the default, measured on so few) with other
    ceilings."""
    d = small_fleet_policy().to_dict()
    for attack, limit in max_risk.items():
        d["attacks"][attack]["max_risk"] = limit
    return d


@pytest.mark.parametrize("gate_policy", [{"attacks": {"known_points": {"max_risk": 0.9}}}, "/etc/passwd"])
def test_finding_1_a_spec_cannot_write_or_point_at_its_gate_policy(engine, bare_dataset, tmp_path, gate_policy):
    dataset = bare_dataset
    spec = write(tmp_path, "spec.yaml", base_spec(dataset, gate_policy=gate_policy))
    out = cli("release", "run", "--wait", "--spec", spec)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
    assert "gate_policy" in out.stderr and "root:" not in out.stderr
    assert n_releases(engine, dataset) == 0


def test_a_registered_policy_weaker_than_the_datasets_is_refused_before_any_data_is_read(engine, bare_dataset,
                                                                                       tmp_path):
    dataset = bare_dataset
    shown = cli("policy", "show", dataset)  # a dataset no steward configured adopts the shipped default
    assert shown.returncode == 0 and shown.stdout.startswith(f"# {dataset}: gate policy default v"), shown.stderr
    lenient = write(tmp_path, "lenient.yaml", default_with(known_points=1.0))
    out = cli("policy", "register", "lenient_points", lenient, "--steward", "ada")
    assert out.returncode == 0, out.stderr
    spec = write(tmp_path, "spec.yaml", base_spec(dataset, gate_policy="lenient_points"))
    out = cli("release", "run", "--wait", "--spec", spec)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert "less strict than dataset" in out.stderr and "raises known_points max_risk from 0.2 to 1" in out.stderr
    assert n_releases(engine, dataset) == 0
    # the steward may loosen the dataset's own policy; then the same spec is accepted at parse and plan
    assert cli("policy", "set", dataset, lenient, "--steward", "ada").returncode == 0
    shown = cli("policy", "show", dataset)
    assert f"# {dataset}: gate policy {dataset} v1" in shown.stdout and " ada " in shown.stdout


def test_a_stricter_registered_policy_gates_the_release_and_is_named_in_review_and_lineage(engine, loaded_tdrive,
                                                                                         tmp_path):
    dataset = loaded_tdrive("pol")
    strict = default_with(known_points=0.05, signature_linkage_synthetic=0.15)
    out = cli("policy", "register", "strict_points", write(tmp_path, "strict.yaml", strict), "--steward", "ada")
    assert out.returncode == 0, out.stderr
    version = int(out.stdout.split(" v")[1].split()[0])
    run = start_release(base_spec(dataset, gate_policy="strict_points", approval_timeout_s=2), tmp_path)
    status = wait_for_status(engine, run, {"awaiting_approval", "blocked"})
    assert run.proc.wait(timeout=120) == (0 if status == "awaiting_approval" else 3), run.output()
    rid = run.release_id
    assert f"gated by policy strict_points v{version}" in run.output()
    (summary,), = q(engine, "SELECT summary FROM governance.releases WHERE release_id = :r", r=rid)
    assert summary["gate_policy"] == {"name": "strict_points", "version": version}
    thresholds = dict(q(engine, "SELECT attack, threshold FROM governance.audit_results WHERE release_id = :r",
                        r=rid))
    assert thresholds["signature_linkage_synthetic"] == 0.15  # the registered policy's, not the default's 0.2
    (start,), = q(engine, "SELECT event FROM governance.lineage_events WHERE release_id = :r AND "
                          "event_type = 'START'", r=rid)
    facet = start["run"]["facets"]["gate_policy"]
    assert (facet["name"], facet["version"]) == ("strict_points", version)
    (page,), = q(engine, "SELECT html FROM governance.review_reports WHERE release_id = :r", r=rid)
    assert f"Gated by policy <b>strict_points v{version}</b>" in page
    if status == "awaiting_approval":
        from flows.review import review_markdown
        from tasks.review import read_review

        with engine.connect() as conn:
            assert f"Gated by policy **strict_points v{version}**" in review_markdown(read_review(conn, rid))


def test_home_work_reads_hours_in_the_datasets_local_zone_and_a_requester_cannot_choose_another(
        engine, stewards, loaded_tdrive):
    """T-Drive's times are Beijing's: its dataset records Asia/Shanghai at load (sql/025), and the gate's home/work
    inference reads night and working hours there, not in UTC (where 22:00-06:00 is Beijing's 06:00-14:00). A
    registered policy naming another zone is a weakening a spec may not choose."""
    from tasks import policies
    from tasks.protect import parse_spec

    dataset = loaded_tdrive("zone")
    assert q(engine, "SELECT timezone FROM governance.datasets WHERE dataset = :d", d=dataset) == [("Asia/Shanghai",)]
    with engine.connect() as conn:
        gated = policies.resolve(conn, parse_spec(base_spec(dataset))[0])
    assert gated.policy.attack_params["home_work"]["timezone"] == "Asia/Shanghai"
    assert GatePolicy.default().attack_params.get("home_work", {}).get("timezone") is None  # the shipped default
    in_utc = GatePolicy.default().to_dict()
    in_utc["attacks"]["home_work"]["params"] = {"timezone": "UTC"}
    with stewards["ada"].begin() as conn:
        version = policies.register(conn, "home_in_utc", GatePolicy.from_dict(in_utc))
    with engine.connect() as conn, pytest.raises(PolicyError, match="changes the parameters of home_work"):
        policies.resolve(conn, parse_spec(base_spec(dataset, gate_policy={"name": "home_in_utc",
                                                                          "version": version}))[0])
