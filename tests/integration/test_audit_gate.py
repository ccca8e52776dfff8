"""The audit gate's negative and positive controls on the real T-Drive sample, attacks run on real Dask workers:
releasing the raw data unchanged, or with 10 m of jitter, is blocked by the default policy; the noisy prefix tree
at ε = 1 passes the signature attack but is blocked by the utility floor, which AdaTrace at ε = 5 passes; an attack
that times out blocks the release (fail closed); one that cannot measure the release says so and the policy
decides."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audits.controls import hold_out
from audits.gate import GatePolicy
from flows.review import review_markdown
from mechanisms import prefix_tree
from mechanisms.registry import mechanism
from tasks import audit, protect
from tasks.db import auditor_engine
from tasks.review import read_review
from tests.integration.conftest import BEIJING, TDRIVE_CSV, new_release, to_protected
from tests.integration.staged import new_dataset
from trajpub.candidate import CandidateRelease, Shape
from trajpub.config import console_url
from trajpub.grid import GridSpec
from trajpub.mechanism import PublicInputs
from trajpub.segment import cell_sequences, keep_trajectories, segment, to_grid

pytestmark = pytest.mark.integration
BBOX = tuple(BEIJING)
GRID = GridSpec(BBOX, 2000.0)


@pytest.fixture(scope="module")
def raw() -> pd.DataFrame:
    """The 300-taxi T-Drive sample prepared as the release flow prepares it (taxi-days, 2 km grid)."""
    df = pd.read_csv(TDRIVE_CSV).rename(columns={"taxi_id": "object_id", "longitude": "lon", "latitude": "lat"})
    df["t"] = pd.to_datetime(df["datetime"]).dt.tz_localize("Asia/Shanghai").dt.tz_convert("UTC")
    df["object_id"] = df["object_id"].astype(str)
    inside = df["lon"].between(BEIJING[0], BEIJING[2]) & df["lat"].between(BEIJING[1], BEIJING[3])
    df = df[inside].sort_values(["object_id", "t"], kind="stable").reset_index(drop=True)
    return to_grid(keep_trajectories(segment(df[["object_id", "t", "lon", "lat"]], 1800, True), 2, 7), GRID)


DEFAULT = GatePolicy.default()
SEED = 7


def held_out(raw: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the auditor's frame with the member column, the members' points): the policy's share of the taxis held
    out of a synthetic mechanism's input, as the release flow does (:mod:`audits.controls`)."""
    controls = hold_out(raw["object_id"].unique(), DEFAULT.controls.share, np.random.default_rng(seed))
    framed = raw.assign(member=~raw["object_id"].isin(controls))
    return framed, raw[framed["member"].to_numpy()].reset_index(drop=True)


def truthful(points: pd.DataFrame) -> CandidateRelease:
    return CandidateRelease(Shape.TRUTHFUL, points[["object_id", "traj_id", "seq", "cell", "t", "lon", "lat", "x", "y"]], {})


def test_raw_data_released_unchanged_is_blocked(dask_client, raw):
    outcome = audit.run(dask_client, raw, truthful(raw), DEFAULT, SEED, bbox=GRID.bbox)
    assert outcome.decision.blocked and not outcome.failures
    blocked = {a for a, v in outcome.decision.per_attack.items() if v["status"] == "blocked"}
    assert {"signature_linkage", "ap_attack", "known_points"} <= blocked


def test_raw_data_with_10_m_jitter_is_blocked(dask_client, raw):
    rng = np.random.default_rng(3)
    jittered = raw.copy()
    jittered["x"] += rng.normal(0, 10, len(raw))
    jittered["y"] += rng.normal(0, 10, len(raw))
    jittered["lon"], jittered["lat"] = GRID.unproject(jittered["x"].to_numpy(), jittered["y"].to_numpy())
    jittered["cell"] = GRID.cell_of(jittered["x"].to_numpy(), jittered["y"].to_numpy())
    outcome = audit.run(dask_client, raw, truthful(jittered), DEFAULT, SEED, bbox=GRID.bbox)
    assert outcome.decision.blocked and not outcome.failures
    assert outcome.decision.per_attack["signature_linkage"]["status"] == "blocked"


def test_prefix_tree_at_epsilon_1_passes_the_signature_attack_but_not_the_utility_floor(dask_client, raw):
    """The former demo release: private enough, but its records are scattered one-cell noise."""
    framed, members = held_out(raw, SEED)
    _, offsets, cells = cell_sequences(members)
    params = prefix_tree.PrefixTreeParams(epsilon=1.0, height=8, max_records_per_object=7)
    released = prefix_tree.sanitize(offsets, cells, GRID.n_cells, params, np.random.default_rng(11)).release
    offs, out = released.expanded()
    lengths = np.diff(offs)
    lon, lat = GRID.cell_centre(out)
    points = pd.DataFrame({"traj_id": np.repeat(np.arange(1, len(lengths) + 1), lengths),
                           "seq": np.arange(len(out)) - np.repeat(offs[:-1], lengths), "cell": out,
                           "t": pd.NaT, "lon": lon, "lat": lat})
    outcome = audit.run(dask_client, framed, CandidateRelease(Shape.SYNTHETIC, points, {}), DEFAULT, SEED,
                        bbox=GRID.bbox)
    for name in ("signature_linkage_synthetic", "membership_dcr", "membership_shadow"):
        verdict = outcome.decision.per_attack[name]
        assert verdict["status"] == "passed", (name, verdict)
    assert (outcome.decision.privacy, outcome.decision.utility) == ("passed", "blocked")
    assert outcome.decision.per_utility["pattern_f1"]["status"] == "blocked"
    assert all(r.startswith("utility ") for r in outcome.decision.reasons)


def test_adatrace_at_epsilon_5_passes_privacy_and_the_utility_floor(dask_client, raw):
    """The positive control of the floor: a synthesizer that keeps routes (AdaTrace at the survey's ε = 5, the
    demo's release). DPT at ε = 5 also passes the floor but not always the signature attack (risk 0.18-0.26)."""
    mech = mechanism("adatrace")
    params = mech.parse_params({"epsilon": 5.0, "max_records_per_object": 7})
    framed, members = held_out(raw, SEED)
    halves = [members[pd.factorize(members["object_id"])[0] % 2 == p].reset_index(drop=True) for p in (0, 1)]
    futures = dask_client.scatter(halves)
    candidate = protect.run(mech, dask_client, futures, PublicInputs(GRID), params, np.random.default_rng(7))
    outcome = audit.run(dask_client, framed, candidate, DEFAULT, SEED, bbox=GRID.bbox)
    assert not outcome.decision.blocked, outcome.decision.reasons
    assert outcome.decision.utility == "passed"


@pytest.mark.parametrize("rule", ["block", "pass"])
def test_an_attack_not_applicable_is_recorded_as_such_and_the_policy_decides(dask_client, raw, engine, rule):
    """A short window without night or working hours (here: the sample's morning rush,
    07:00-09:00 Beijing time) gives home/work nothing to infer. It is neither a failure nor a risk of 0: "not
    applicable: why", stored and shown as such, and the policy's ``when_not_applicable`` decides whether it adds a
    block. Signature linkage still gates, at the default ceiling: the raw data released unchanged is blocked by
    it either way."""
    policy = GatePolicy.from_dict({"attacks": {
        "home_work": {"max_risk": 0.3, "params": {"timezone": "Asia/Shanghai"}, "when_not_applicable": rule},
        "signature_linkage": {"max_risk": 0.2}}})
    rush = raw[raw["t"].dt.tz_convert("Asia/Shanghai").dt.hour.isin([7, 8])]
    outcome = audit.run(dask_client, rush, truthful(rush), policy, SEED, bbox=GRID.bbox)
    assert not outcome.failures and list(outcome.not_applicable) == ["home_work"]
    assert "night/working windows" in outcome.not_applicable["home_work"]
    home_work_blocks = [r for r in outcome.decision.reasons if r.startswith("home_work: not applicable")]
    assert len(home_work_blocks) == (1 if rule == "block" else 0)
    assert outcome.decision.per_attack["signature_linkage"]["status"] == "blocked"
    rid = new_release(engine, new_dataset(engine))
    to_protected(engine, rid)
    with auditor_engine().begin() as conn:
        audit.store(conn, rid, outcome)
        record = read_review(conn, rid)
    rows = {r["attack"]: r for r in record.audits}
    review = review_markdown(record)
    assert f"**Decide in the steward console:** [{console_url()}/releases/{rid}]" in review  # the pause form's link
    assert rows["home_work"]["outcome"] == "not applicable" and rows["home_work"]["passed"] is (rule == "pass")
    assert rows["signature_linkage"]["outcome"] == "measured"
    verdict = "pass" if rule == "pass" else "BLOCK"
    assert (f"| home_work | - | not applicable: {outcome.not_applicable['home_work']} | | | | | 0.300 | {verdict} |"
            in review)
    measured = rows["signature_linkage"]  # its risk interval and three-way verdict are stored and shown
    assert measured["verdict"] == "blocked" and measured["risk_ci_low"] > 0.2
    assert f"| {measured['risk']:.3f} | [{measured['risk_ci_low']:.3f}, {measured['risk_ci_high']:.3f}] | 0.200 | " \
           "BLOCKED |" in review


def test_an_attack_that_times_out_blocks_the_release(dask_client, raw):
    """0.001 s: the attack runs out of time, or (when the utility figures hold the worker its frames are on) has
    not even started by then; either way it fails and the gate fails closed."""
    policy = {"timeout_s": 0.001, "attacks": {"signature_linkage": {"max_risk": 0.2}}}
    outcome = audit.run(dask_client, raw, truthful(raw), GatePolicy.from_dict(policy), SEED, bbox=GRID.bbox)
    assert outcome.decision.blocked
    assert list(outcome.failures) == ["signature_linkage"]
    assert outcome.failures["signature_linkage"].startswith(("timed out after 0.001 s",
                                                             "did not start within 0.001 s"))


def test_a_synthetic_release_that_copies_a_tenth_of_its_members_is_blocked(dask_client, raw):
    """The positive control of the members-against-controls protocol: AdaTrace at ε = 5 (which passes above) with
    the raw trajectories of 10% of its members added. The survey's old measure moved by a few points; DCR and the
    shadow attack find the copied members (and no control) and block it."""
    framed, members = held_out(raw, SEED)
    mech = mechanism("adatrace")
    params = mech.parse_params({"epsilon": 5.0, "max_records_per_object": 7})
    candidate = protect.run(mech, dask_client, dask_client.scatter([members]), PublicInputs(GRID), params,
                            np.random.default_rng(7))
    objects = members["object_id"].unique()
    copied = members[members["object_id"].isin(np.random.default_rng(1).choice(objects, len(objects) // 10,
                                                                                replace=False))]
    first = int(candidate.points["traj_id"].max()) + 1
    copies = copied.assign(traj_id=first + pd.factorize(copied["traj_id"])[0])[list(candidate.points.columns)]
    copying = CandidateRelease(Shape.SYNTHETIC, pd.concat([candidate.points, copies], ignore_index=True), {})
    outcome = audit.run(dask_client, framed, copying, DEFAULT, SEED, bbox=GRID.bbox)
    for name in ("membership_dcr", "membership_shadow"):
        verdict = outcome.decision.per_attack[name]
        assert verdict["status"] == "blocked", (name, verdict)
        assert verdict["baseline"] == 0.0 and verdict["success_rate"] == pytest.approx(0.1, abs=0.01)


def test_too_few_objects_to_measure_is_said_in_words(dask_client, raw, engine):
    """40 taxis: 12 controls, fewer than the policy's 30: every synthetic attack says "too few objects to
    measure" (not a number), the default policy blocks (fail closed) and the review shows the words."""
    few = raw[raw["object_id"].isin(np.sort(raw["object_id"].unique())[:40])]
    framed, members = held_out(few, SEED)
    release = members.drop(columns=["object_id", "member"], errors="ignore")[["traj_id", "seq", "cell", "t", "lon",
                                                                              "lat"]]
    outcome = audit.run(dask_client, framed, CandidateRelease(Shape.SYNTHETIC, release, {}), DEFAULT, SEED,
                        bbox=GRID.bbox)
    assert sorted(outcome.not_applicable) == ["membership_dcr", "membership_shadow", "membership_shape",
                                              "membership_time", "signature_linkage_synthetic"]
    for why in outcome.not_applicable.values():
        assert "too few objects to measure: 28 members and 12 controls" in why, why
    assert outcome.decision.blocked and not outcome.failures
    rid = new_release(engine, new_dataset(engine))
    to_protected(engine, rid)
    with auditor_engine().begin() as conn:
        audit.store(conn, rid, outcome)
        record = read_review(conn, rid)
    assert "| membership_dcr | - | not applicable: too few objects to measure: 28 members and 12 controls" \
        in review_markdown(record)
