"""audits.reidentification: Pellungrini et al.'s risk family against scikit-mobility's doctests, without its bugs.

The golden values are the doctest outputs of ``skmob.privacy.attacks`` (scikit-mobility, BSD-3) on its
``privacy_toy.csv`` (7 users, 23 points, our ``shared/data/skmob_privacy_toy.csv``). Where our answer differs
from scikit-mobility's, the test gives both and the reason.
"""

from fractions import Fraction as F
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from audits.reidentification import (
    KINDS,
    Reidentification,
    ReidentificationParams,
    reidentification_risks,
)
from trajpub import config
from trajpub.errors import InputError, ParameterError

TOY = config.SHARED_DATA_DIR / "skmob_privacy_toy.csv"


@pytest.fixture(scope="module")
def toy() -> pd.DataFrame:
    d = pd.read_csv(TOY)
    return pd.DataFrame({"object_id": d["uid"].astype(str), "traj_id": d["uid"], "seq": d.groupby("uid").cumcount(),
                         "t": pd.to_datetime(d["datetime"], utc=True), "lon": d["lng"], "lat": d["lat"]})


def risks(raw: pd.DataFrame, release: pd.DataFrame | None = None, **kwargs) -> list[float]:
    params = ReidentificationParams(location=kwargs.pop("location", "lonlat"), **kwargs)
    out = reidentification_risks(raw, raw if release is None else release, params)
    return out.sort_values("object_id")["risk"].tolist()


def fractions(*values) -> list[float]:
    return [float(F(v)) for v in values]


# scikit-mobility's doctests, users 1..7 (kind, knowledge length, extra parameters, expected risks).
SKMOB_DOCTESTS = [
    ("location", 2, {}, fractions("1/3", "1/2", "1/3", "1/3", "1/4", "1/4", "1/2")),
    ("location", 3, {}, fractions("1/2", 1, "1/2", "1/3", "1/3", "1/4", 1)),
    ("location_sequence", 2, {}, fractions("1/2", "1/2", 1, "1/2", 1, "1/3", "1/2")),
    ("location_sequence", 3, {}, fractions(1, 1, 1, 1, 1, "1/3", 1)),
    ("location_time", 2, {"time_precision": "month"}, fractions("1/3", "1/2", "1/3", "1/3", "1/4", "1/4", "1/2")),
    ("location_time", 3, {"time_precision": "month"}, fractions("1/2", 1, "1/2", "1/3", "1/3", "1/4", 1)),
    ("unique_location", 2, {}, fractions("1/3", "1/4", "1/3", "1/3", "1/4", "1/4", "1/4")),
    ("unique_location", 3, {}, fractions("1/2", "1/3", "1/2", "1/3", "1/3", "1/4", "1/4")),
    ("location_frequency", 2, {}, fractions("1/3", 1, "1/3", "1/3", "1/3", "1/3", 1)),
    ("location_frequency", 2, {"tolerance": 0.5}, fractions("1/3", 1, "1/3", "1/3", "1/4", "1/4", 1)),
    ("location_frequency", 3, {"tolerance": 0.5}, fractions("1/2", 1, "1/2", "1/3", "1/3", "1/4", 1)),
    ("location_probability", 2, {}, fractions("1/2", 1, "1/2", 1, 1, 1, 1)),
    ("location_probability", 2, {"tolerance": 0.5}, fractions("1/3", "1/2", "1/3", "1/3", "1/4", 1, 1)),
    ("location_probability", 3, {"tolerance": 0.5}, fractions("1/2", 1, "1/2", "1/3", "1/3", 1, 1)),
    ("location_proportion", 2, {}, fractions("1/3", 1, "1/3", "1/3", "1/3", "1/3", 1)),
    ("location_proportion", 2, {"tolerance": 0.5}, fractions("1/3", "1/4", "1/3", "1/3", "1/3", "1/3", "1/4")),
    ("location_proportion", 3, {"tolerance": 0.5}, fractions("1/2", "1/3", "1/2", "1/3", "1/3", "1/3", "1/4")),
]


@pytest.mark.parametrize(("kind", "k", "extra", "expected"), SKMOB_DOCTESTS)
def test_scikit_mobility_doctests(toy, kind, k, extra, expected):
    assert risks(toy, kind=kind, knowledge_length=k, **extra) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("precision", ["hour", "day"])
def test_location_time_doctest_at_hour_precision_is_really_day_precision(toy, precision):
    # skmob's LocationTimeAttack(knowledge_length=2) (default "Hour") doctest: [1, 1, 1, 1, 1, 1/2, 1]. Its
    # "Hour" key is year+month+day+month (date_time_precision bug), i.e. day precision. On the toy data our true
    # hour precision happens to give the same risks as day precision, so the doctest holds for both; the
    # constructed case below is where they differ.
    expected = fractions(1, 1, 1, 1, 1, "1/2", 1)
    assert risks(toy, kind="location_time", knowledge_length=2, time_precision=precision) == expected


def two_visitors(times: tuple[str, str]) -> pd.DataFrame:
    """A and B each visit place X once on the same day, at the given times."""
    return pd.DataFrame({"object_id": ["A", "B"], "traj_id": [0, 1], "seq": [0, 0],
                         "t": pd.to_datetime(list(times), utc=True), "lon": [10.5, 10.5], "lat": [43.8, 43.8]})


@pytest.mark.parametrize(("precision", "times", "ours", "skmob"), [
    # skmob "Hour" = year, month, day, month: 08:34 and 15:34 on one day share a key -> 1/2 each.
    ("hour", ("2011-02-03 08:34:04", "2011-02-03 15:34:04"), [1.0, 1.0], [0.5, 0.5]),
    # skmob "Minute" = year, month, day, month, minute (no hour): 08:34 and 09:34 share a key -> 1/2 each.
    ("minute", ("2011-02-03 08:34:04", "2011-02-03 09:34:04"), [1.0, 1.0], [0.5, 0.5]),
    # Day precision is right in skmob too.
    ("day", ("2011-02-03 08:34:04", "2011-02-03 15:34:04"), [0.5, 0.5], [0.5, 0.5]),
])
def test_time_precision_floors_the_timestamp(precision, times, ours, skmob):
    frame = two_visitors(times)
    assert risks(frame, kind="location_time", knowledge_length=1, time_precision=precision) == ours
    # scikit-mobility's value: its keys for the two visits are equal exactly when it reports 1/2 each.
    a, b = (skmob_time_key(t, precision) for t in frame["t"])
    assert (a == b) == (skmob == [0.5, 0.5])


def skmob_time_key(dt: pd.Timestamp, precision: str) -> str:
    """Transcription of ``skmob.utils.utils.date_time_precision`` (for the record; note month twice, no hour)."""
    day = str(dt.year) + str(dt.month) + str(dt.day)
    return {"day": day, "hour": day + str(dt.month), "minute": day + str(dt.month) + str(dt.minute)}[precision]


def test_home_work_takes_the_most_visited_places_not_the_least(toy):
    # skmob's HomeWorkAttack doctest: [1/4, 1/4, 1/4, 1/4, 1, 1, 1]. frequency_vector sorts each user's places
    # by ascending frequency and the attack takes the first two rows: the two LEAST visited places. User 2
    # visits D = (43.843, 10.508) twice and A, B once: skmob's "home and work" for user 2 is {A, B}, shared with
    # users 1, 3, 4. Ours (the two most visited, ties by latitude) is {D, A}: top-2 sets are 1 {A,B}, 2 {A,D},
    # 3 {A,B}, 4 {A,B}, 5 {B,C}, 6 {A,D}, 7 {C,D}, so users 1, 3, 4 are 1 in 3, users 2 and 6 1 in 2.
    assert risks(toy, kind="home_work") == fractions("1/3", "1/2", "1/3", "1/3", 1, "1/2", 1)


def test_order_matters_only_for_sequences():
    frame = pd.DataFrame({"object_id": ["A", "A", "B", "B"], "traj_id": [0, 0, 1, 1], "seq": [0, 1, 0, 1],
                          "t": pd.to_datetime(["2024-01-01 08:00", "2024-01-01 09:00"] * 2, utc=True),
                          "lon": [1.0, 2.0, 2.0, 1.0], "lat": [0.0, 0.0, 0.0, 0.0]})  # A: X then Y; B: Y then X
    assert risks(frame, kind="location", knowledge_length=2) == [0.5, 0.5]
    assert risks(frame, kind="location_sequence", knowledge_length=2) == [1.0, 1.0]


def test_a_release_that_no_longer_matches_the_owner_cannot_reidentify_it(toy):
    # User 7 visits D twice and C once. With k = 1 on the toy itself: {C} matches users 1, 3, 4, 5, 7 (1/5),
    # {D} users 1, 2, 3, 5, 6, 7 (1/6): risk 1/5. Remove user 7's visit to C from the release: {C} now matches
    # only other users (the adversary is wrong whatever it picks: 0), {D} still 1/6: risk 1/6.
    release = toy[~((toy["object_id"] == "7") & (toy["lat"] == 43.77925))]
    assert risks(toy, kind="location", knowledge_length=1)[6] == pytest.approx(1 / 5)
    assert risks(toy, release, kind="location", knowledge_length=1)[6] == pytest.approx(1 / 6)


def test_cells_give_the_same_risks_as_exact_coordinates_and_off_grid_points_are_dropped(toy):
    places = toy["lat"].astype(str) + "," + toy["lon"].astype(str)
    cells = toy.assign(cell=pd.factorize(places)[0].astype(np.int64))
    off_grid = pd.concat([cells, cells.iloc[:1].assign(cell=-1, seq=99)], ignore_index=True)
    for kind in ("location", "unique_location", "location_frequency"):
        assert risks(off_grid, kind=kind, knowledge_length=2, location="cell") == risks(toy, kind=kind,
                                                                                         knowledge_length=2)


def test_sampled_instances_give_a_lower_bound(toy):
    # User 1 has 4 points: C(4, 2) = 6 instances. With max_instances = 6 all are evaluated; with 2, a sample.
    exact = reidentification_risks(toy, toy, ReidentificationParams(location="lonlat", max_instances=6, seed=0))
    sample = reidentification_risks(toy, toy, ReidentificationParams(location="lonlat", max_instances=2, seed=0))
    assert not exact["sampled"].any() and sample["sampled"].iloc[0]
    assert (sample["n_instances"] <= 2).all()
    assert (sample["risk"] <= exact["risk"] + 1e-12).all()


def test_a_sample_of_targets_keeps_every_candidate(toy):
    # 7 targets, 3 sampled: each sampled target's risk is the one it has when all 7 are attacked, because the
    # candidates (every released object) do not change
    params = {"kind": "location", "location": "lonlat", "knowledge_length": 2, "seed": 4}
    every = reidentification_risks(toy, toy, ReidentificationParams(**params)).set_index("object_id")["risk"]
    sample = reidentification_risks(toy, toy, ReidentificationParams(max_targets=3, **params))
    assert len(sample) == 3 and sample.attrs == {"n_candidates": 7, "n_targets_total": 7}
    assert sample.set_index("object_id")["risk"].to_dict() == every[sample["object_id"]].to_dict()
    result = Reidentification(ReidentificationParams(max_targets=3, **params)).evaluate(toy, toy)
    assert (result.n_targets, result.baseline, result.evidence["n_targets_total"]) == (3, 1 / 7, 7)


def test_attack_result_sums_the_risks(toy):
    result = Reidentification(ReidentificationParams(kind="location", location="lonlat", knowledge_length=3)
                              ).evaluate(toy, toy)
    assert result.attack == "reidentification_location"
    assert result.n_targets == 7 and result.baseline == 1 / 7
    assert result.n_successes == pytest.approx(float(sum(F(x) for x in ("1/2", 1, "1/2", "1/3", "1/3", "1/4", 1))))
    assert result.evidence["unique_share"] == pytest.approx(2 / 7)
    assert [e["owner"] for e in result.evidence["examples"]] == ["2", "7"]


# --- the vectorised matching against a direct transcription of the definitions --------------------------------


def reference_risk(raw: pd.DataFrame, release: pd.DataFrame, kind: str, k: int, tol: float) -> dict[str, float]:
    """The definitions of the module docstring, by brute force over all instances and candidates."""
    def points(frame, uid):
        f = frame[frame["object_id"] == uid].sort_values("t")
        return list(zip(f["lon"], f["lat"], f["t"].dt.floor("h"), strict=True))

    def counts(pts, timed=False):
        out: dict = {}
        for lon, lat, hour in pts:
            key = (lon, lat, hour) if timed else (lon, lat)
            out[key] = out.get(key, 0) + 1
        return out

    def match(inst, cand):
        if kind in ("location", "location_time"):
            need = counts(inst, kind == "location_time")
            have = counts(cand, kind == "location_time")
            return all(have.get(key, 0) >= n for key, n in need.items())
        if kind == "location_sequence":
            it = iter([(lon, lat) for lon, lat, _ in cand])
            return all(any(step == (lon, lat) for step in it) for lon, lat, _ in inst)
        have = counts(cand)
        if not all(loc in have for loc, _ in inst):
            return False
        if kind == "unique_location":
            return True
        if kind == "location_frequency":
            pairs = [(f, have[loc]) for loc, f in inst]
        elif kind == "location_probability":
            pairs = [(f, have[loc] / len(cand)) for loc, f in inst]
        else:
            top_i, top_c = max(f for _, f in inst), max(have[loc] for loc, _ in inst)
            pairs = [(f / top_i, have[loc] / top_c) for loc, f in inst]
        return all(g * (1 - tol) - 1e-12 <= f <= g * (1 + tol) + 1e-12 for f, g in pairs)

    uids = sorted(set(release["object_id"]))
    cands = {v: points(release, v) for v in uids}
    out = {}
    for u in sorted(set(raw["object_id"]) & set(uids)):
        pts = points(raw, u)
        if kind in ("location", "location_time", "location_sequence"):
            elements = pts
        else:
            n = len(pts)
            elements = [(loc, c if kind != "location_probability" else c / n) for loc, c in counts(pts).items()]
        best = 0.0
        for inst in combinations(elements, min(k, len(elements))):
            matching = [v for v in uids if match(inst, cands[v])]
            if u in matching:
                best = max(best, 1 / len(matching))
        out[u] = best
    return out


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "home_work"])
@pytest.mark.parametrize("seed", [0, 1])
def test_vectorised_matching_equals_brute_force(kind, seed):
    rng = np.random.default_rng(seed)
    n = 40
    raw = pd.DataFrame({"object_id": rng.choice(list("ABCDEFGH"), n), "lon": rng.integers(0, 4, n).astype(float),
                        "lat": rng.integers(0, 2, n).astype(float),
                        "t": pd.Timestamp("2024-01-01", tz="UTC") + pd.to_timedelta(rng.permutation(n) * 20, unit="min")})
    raw["traj_id"], raw["seq"] = 0, np.arange(n)
    release = raw.drop(index=rng.choice(n, 6, replace=False))  # some owners lose points: they may not match
    moved = rng.choice(release.index, 4, replace=False)
    release.loc[moved, "lon"] = rng.integers(0, 4, 4).astype(float)
    tol = 0.5 if kind in ("location_frequency", "location_probability", "location_proportion") else 0.0
    expected = reference_risk(raw, release, kind, 2, tol)
    params = ReidentificationParams(kind=kind, knowledge_length=2, location="lonlat", tolerance=tol,
                                    max_instances=10_000)
    got = reidentification_risks(raw, release, params).set_index("object_id")["risk"].to_dict()
    assert got == pytest.approx(expected, abs=1e-12)


# --- inputs and parameters ------------------------------------------------------------------------------------


def test_inputs_are_checked(toy):
    attack = Reidentification(ReidentificationParams(kind="location_time", location="lonlat"))
    with pytest.raises(InputError, match="t"):
        attack.evaluate(toy, toy.drop(columns="t"))
    with pytest.raises(InputError, match="truthful"):
        attack.evaluate(toy, toy.assign(object_id="someone"))
    with pytest.raises(InputError, match="cell"):
        Reidentification(ReidentificationParams()).evaluate(toy, toy)  # location="cell" needs a cell column
    per_object = Reidentification(ReidentificationParams(location="lonlat")).risks(toy, toy)
    assert per_object["risk"].tolist() == pytest.approx(SKMOB_DOCTESTS[0][3])  # location, k = 2


@pytest.mark.parametrize("kwargs", [
    {"kind": "location_speed"}, {"knowledge_length": 0}, {"location": "xy"}, {"time_precision": "week"},
    {"timezone": "Nowhere/Land"}, {"tolerance": 1.5}, {"tolerance": -0.1}, {"max_instances": 0}, {"seed": -2},
])
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ParameterError):
        ReidentificationParams(**kwargs)


def test_params_round_trip():
    params = ReidentificationParams(kind="location_time", time_precision="minute", timezone="Asia/Shanghai")
    assert ReidentificationParams.from_dict(params.to_dict()) == params
    with pytest.raises(ParameterError, match="k"):
        ReidentificationParams.from_dict({"k": 2})
