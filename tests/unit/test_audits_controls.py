"""Members against controls: Newcombe's and DeLong's intervals against published values and theory, the
comparison's risk, the policy's "too few objects to measure", the hold-out, and the closest-record attacks on
constructed releases that copy members or only learn the population."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from audits.closest_record import (
    DCR_NAME,
    SHADOW_NAME,
    ClosestRecord,
    ClosestRecordParams,
    resampled,
)
from audits.controls import ControlPolicy, MemberControl, TooFewObjects, hold_out, members_and_controls
from audits.result import AttackResult
from audits.stats import auc_interval, newcombe_interval
from trajpub.errors import InputError, ParameterError

Z = norm.ppf(0.975)


# --- Newcombe's hybrid score interval -------------------------------------------------------------------------

@pytest.mark.parametrize(("counts", "expected"), [
    # Newcombe (1998), Table II, method 10, to the four decimals printed there
    ((56, 70, 48, 80), (0.0524, 0.3339)),
    ((9, 10, 3, 10), (0.1705, 0.8090)),
    ((5, 56, 0, 29), (-0.0381, 0.1926)),
    ((0, 10, 0, 20), (-0.1611, 0.2775)),
    ((0, 10, 0, 10), (-0.2775, 0.2775)),
    ((10, 10, 0, 20), (0.6791, 1.0000)),
    ((10, 10, 0, 10), (0.6075, 1.0000)),
])
def test_newcombe_matches_the_published_table(counts, expected):
    low, high = newcombe_interval(*counts)
    assert (round(low, 4), round(high, 4)) == expected


def test_newcombe_covers_the_true_difference_at_its_level():
    """1,000 draws of 100 members and 40 controls at the same rate 0.1: the interval holds 0 in 95% of them up to
    sampling error (3 binomial standard errors of a 0.95 proportion over 1,000 draws: 0.021); Newcombe reports
    coverage at or a little above nominal for this method."""
    rng = np.random.default_rng(2026)
    x1, x2 = rng.binomial(100, 0.1, 1000), rng.binomial(40, 0.1, 1000)
    covered = np.mean([low <= 0 <= high for low, high in (newcombe_interval(a, 100, b, 40) for a, b in zip(x1, x2))])
    assert abs(covered - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / 1000)


# --- DeLong's interval of the AUC ------------------------------------------------------------------------------

def test_auc_and_delong_variance_match_their_definitions_with_ties():
    rng = np.random.default_rng(4)
    x, y = rng.integers(0, 6, 25).astype(float), rng.integers(0, 5, 17).astype(float)  # many ties
    psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    var = v10.var(ddof=1) / 25 + v01.var(ddof=1) / 17
    auc, low, high = auc_interval(x, y)
    assert auc == pytest.approx(psi.mean(), abs=1e-12)
    assert (low, high) == pytest.approx((auc - Z * math.sqrt(var), auc + Z * math.sqrt(var)), abs=1e-12)


def test_delong_covers_one_half_when_scores_do_not_depend_on_membership():
    """1,000 draws of 100 against 40 normal scores (the audit's sizes): coverage of AUC = 1/2 near 95%, within 3
    binomial standard errors (0.021). DeLong's variance is asymptotic: at 30 against 20 it covers ~92%, which is
    why the policy asks for at least 30 objects a side and a narrow interval."""
    rng = np.random.default_rng(2027)
    covered = np.mean([low <= 0.5 <= high for _, low, high in
                       (auc_interval(rng.normal(size=100), rng.normal(size=40)) for _ in range(1000))])
    assert abs(covered - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / 1000)


def test_auc_needs_two_scores_per_side():
    with pytest.raises(ParameterError, match="at least 2"):
        auc_interval(np.array([1.0]), np.array([0.0, 1.0]))


# --- the comparison and the result ---------------------------------------------------------------------------

def test_rates_comparison_is_anonymeters_risk_with_newcombes_interval():
    c = MemberControl.rates(30, 200, 9, 90)
    assert (c.member_value, c.control_value) == (0.15, 0.1)
    assert c.risk == pytest.approx((0.15 - 0.1) / 0.9)
    low, high = newcombe_interval(30, 200, 9, 90)
    assert c.difference_ci == (low, high)
    assert c.risk_ci == pytest.approx((max(0.0, low / 0.9), high / 0.9))
    result = AttackResult.against_controls("membership_dcr", c, {})
    assert (result.n_targets, result.baseline, result.risk) == (200, 0.1, c.risk)
    assert (result.risk_ci_low, result.risk_ci_high) == c.risk_ci
    assert result.to_dict()["controls"]["protocol"] == "held_out"


def test_a_result_that_disagrees_with_its_comparison_is_refused():
    c = MemberControl.rates(30, 200, 9, 90)
    with pytest.raises(ParameterError, match="comparison"):
        AttackResult(attack="x", n_targets=200, n_successes=30, baseline=0.5, controls=c)


def test_scores_comparison_is_the_advantage():
    c = MemberControl.scores(np.array([3.0, 4.0, 5.0]), np.array([1.0, 2.0, 3.0]))
    assert c.member_value == pytest.approx((9 - 0.5) / 9)  # 3 ties 3: one half-win
    assert c.risk == pytest.approx(2 * c.member_value - 1)


def test_too_few_objects_by_count_and_by_width():
    policy = ControlPolicy(share=0.3, min_objects=30, max_risk_ci_width=0.4)
    few = MemberControl.rates(5, 70, 2, 29)
    assert policy.unmeasurable(few).startswith("too few objects to measure: 70 members and 29 controls")
    wide = MemberControl.rates(50, 100, 20, 40)  # rates 0.5: Newcombe's width / (1 - 0.5) > 0.4
    low, high = wide.difference_ci
    assert wide.risk_ci_width == pytest.approx((high - low) / 0.5) and wide.risk_ci_width > 0.4
    assert "more than the policy's 0.4" in policy.unmeasurable(wide)
    assert policy.unmeasurable(MemberControl.rates(0, 200, 0, 90)) is None


def test_a_wide_interval_wholly_above_the_ceiling_is_a_measured_block_but_too_few_objects_never_is():
    policy = ControlPolicy(share=0.3, min_objects=30, max_risk_ci_width=0.2)
    wide_and_high = MemberControl.rates(38, 40, 3, 30)  # members nearly all found, controls rarely
    assert wide_and_high.risk_ci_width > 0.2 and wide_and_high.risk_ci[0] > 0.5
    assert "more than the policy's 0.2" in policy.unmeasurable(wide_and_high)
    assert policy.unmeasurable(wide_and_high, max_risk=0.5) is None
    assert "more than the policy's 0.2" in policy.unmeasurable(wide_and_high, max_risk=wide_and_high.risk_ci[0])
    copied_few = MemberControl.rates(28, 28, 0, 12)
    assert copied_few.risk_ci[0] > 0.5
    assert policy.unmeasurable(copied_few, max_risk=0.5).startswith("too few objects to measure: 28 members")


@pytest.mark.parametrize("bad", [{"share": 1.0}, {"share": -0.1}, {"min_objects": 1}, {"max_risk_ci_width": 0},
                                 {"extra": 1}])
def test_bad_control_policies_are_refused(bad):
    with pytest.raises(ParameterError):
        ControlPolicy.from_dict({"share": 0.3, **bad})


def test_hold_out_draws_whole_objects_at_the_share():
    objects = np.array([f"t{i}" for i in range(101)])
    a = hold_out(np.repeat(objects, 3), 0.3, np.random.default_rng(1))
    assert len(a) == 30 and len(set(a)) == 30 and set(a) <= set(objects)
    assert list(a) == list(hold_out(objects, 0.3, np.random.default_rng(1)))
    assert list(a) != list(hold_out(objects, 0.3, np.random.default_rng(2)))
    assert len(hold_out(objects, 0.0, np.random.default_rng(1))) == 0


def test_members_and_controls_need_a_constant_member_column_and_both_groups():
    raw = pd.DataFrame({"object_id": ["a", "a", "b"], "member": [True, False, True]})
    with pytest.raises(InputError, match="constant per object"):
        members_and_controls(raw, "here")
    with pytest.raises(TooFewObjects, match="0 controls"):
        members_and_controls(raw.assign(member=True), "here")


# --- the closest-record attacks --------------------------------------------------------------------------------

def trips(n_objects: int, seed: int, per_object: int = 3, prefix: str = "o") -> pd.DataFrame:
    """Straight trips of 6 points between random places of a 20 km square (one object: ``per_object`` trips)."""
    rng = np.random.default_rng(seed)
    n = n_objects * per_object
    a, b = rng.uniform(0, 0.2, (n, 2)), rng.uniform(0, 0.2, (n, 2))
    f = np.tile(np.linspace(0, 1, 6), n)
    trip = np.repeat(np.arange(n), 6)
    objects = np.array([f"{prefix}{o:03d}" for o in range(n_objects)])
    return pd.DataFrame({"object_id": objects[trip // per_object],
                         "traj_id": [f"{prefix}{t}" for t in trip], "seq": np.tile(np.arange(6), n),
                         "lon": 116 + a[trip, 0] + f * (b[trip, 0] - a[trip, 0]),
                         "lat": 39.9 + a[trip, 1] + f * (b[trip, 1] - a[trip, 1])})


def split(raw: pd.DataFrame, share: float = 0.3, seed: int = 9) -> pd.DataFrame:
    controls = hold_out(raw["object_id"].unique(), share, np.random.default_rng(seed))
    return raw.assign(member=~raw["object_id"].isin(controls))


def attack(name: str) -> ClosestRecord:
    return ClosestRecord(ClosestRecordParams(calibration="none" if name == DCR_NAME else "reference"))


def test_resampled_distance_is_the_rms_distance_of_corresponding_points():
    one = trips(1, 3, per_object=1)
    shifted = one.assign(traj_id="s", lat=one["lat"] + 50 / 111_320.0)  # 50 m north
    _, vectors = resampled(pd.concat([one, shifted]), lat0=39.9)
    assert np.linalg.norm(vectors[0] - vectors[1]) == pytest.approx(50.0, rel=1e-9)


@pytest.mark.parametrize("name", [DCR_NAME, SHADOW_NAME])
def test_copies_of_a_tenth_of_the_members_are_found_and_no_control(name):
    raw = split(trips(200, 1))
    members = np.sort(raw.loc[raw["member"], "object_id"].unique())
    release = trips(300, 2, prefix="s")  # the population's trips, none of the raw ones
    copied = raw[raw["object_id"].isin(members[::10])]
    release = pd.concat([release, copied.assign(traj_id="copy/" + copied["traj_id"])], ignore_index=True)
    result = attack(name).evaluate(raw, release.drop(columns="object_id"))
    assert result.attack == name
    assert result.n_successes == len(members[::10]) and result.baseline == 0.0
    assert result.risk == pytest.approx(len(members[::10]) / len(members))
    assert result.risk_ci_low > 0


@pytest.mark.parametrize("name", [DCR_NAME, SHADOW_NAME])
def test_a_release_of_the_population_reproduces_nobody(name):
    """Independent trips of the same population: however close they come, members and controls are alike."""
    raw = split(trips(200, 1))
    result = attack(name).evaluate(raw, trips(300, 2, prefix="s").drop(columns="object_id"))
    assert (result.success_rate, result.baseline, result.risk) == (0.0, 0.0, 0.0)
    low, high = result.evidence["advantage_ci"]
    assert low <= 0 <= high  # the AUC beside it: no advantage either


def test_shadow_calibration_tells_a_copy_from_a_crowd():
    """Two objects drive the same trip (2 m apart); a release that reproduces that trip within 60 m is within
    DCR's 100 m of both, member and control alike (no evidence), and the shadow attack's ratio says the same; a
    copy of a lone member's trip is 0 m away while its nearest other object is km away: reproduced."""
    lone = trips(1, 5, per_object=1, prefix="lone")
    crowd_a = trips(1, 6, per_object=1, prefix="a")
    crowd_b = crowd_a.assign(object_id="b000", traj_id="b0", lat=crowd_a["lat"] + 2 / 111_320.0)
    raw = pd.concat([lone, crowd_a, crowd_b], ignore_index=True)
    raw["member"] = raw["object_id"].isin(["lone000", "a000"])
    release = pd.concat([lone.assign(traj_id="r1"), crowd_a.assign(traj_id="r2", lat=crowd_a["lat"] + 60 / 111_320.0)])
    dcr = attack(DCR_NAME)._attack(raw, release.drop(columns="object_id"))
    shadow = attack(SHADOW_NAME)._attack(raw, release.drop(columns="object_id"))
    assert (dcr.n_successes, dcr.baseline) == (2.0, 1.0)     # both members and the control within 100 m
    assert (shadow.n_successes, shadow.baseline) == (1.0, 0.0)  # only the lone member's copy


def test_under_an_upper_bound_decision_an_interval_wider_than_the_ceiling_cannot_show_a_pass():
    policy = ControlPolicy(share=0.3, min_objects=30, max_risk_ci_width=0.4)
    crossing = MemberControl.rates(90, 200, 30, 86)  # rates 0.45 and 0.35: an interval about 0.3 wide from near 0
    low, high = crossing.risk_ci
    assert 0.2 < high - low < 0.4 and high > 0.2 and low < 0.2
    assert policy.unmeasurable(crossing, max_risk=0.2) is None  # a point decision may still read it
    assert "wider than the attack's ceiling 0.2, so it cannot show a pass" in policy.unmeasurable(
        crossing, max_risk=0.2, upper_bound=True)
    assert policy.unmeasurable(crossing, max_risk=0.35, upper_bound=True) is None  # narrower than this ceiling
    copied = MemberControl.rates(150, 200, 5, 86)
    assert copied.risk_ci[0] > 0.2 and policy.unmeasurable(copied, max_risk=0.2, upper_bound=True) is None
