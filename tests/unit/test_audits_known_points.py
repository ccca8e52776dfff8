"""audits.known_points: unicity / partial-knowledge re-identification (A2) on cases with known answers."""

import numpy as np
import pandas as pd
import pytest

from audits.known_points import NAME, KnownPoints, KnownPointsParams
from trajpub.errors import InputError, ParameterError

T0 = pd.Timestamp("2024-03-04 08:00", tz="UTC")


def frame(tracks: dict[str, list[tuple[float, float, float]]], owners: dict[str, str] | None = None,
          traj_ids: dict[str, int] | None = None) -> pd.DataFrame:
    """One trajectory per key: points (x metres, y metres, minutes after T0); object_id = owners[key]."""
    owners, traj_ids = owners or {}, traj_ids or {}
    rows = [{"object_id": owners.get(key, key), "traj_id": traj_ids.get(key, i), "seq": j, "x": x, "y": y,
             "t": T0 + pd.Timedelta(minutes=m)}
            for i, (key, pts) in enumerate(tracks.items()) for j, (x, y, m) in enumerate(pts)]
    out = pd.DataFrame(rows)
    out["lon"], out["lat"] = 116.0, 39.9  # present but unused: x, y take precedence
    return out


def scattered(n_objects: int, n_points: int = 20, seed: int = 3) -> dict[str, list[tuple[float, float, float]]]:
    """Object i at random places of its own 1 km strip (x in [2000 i, 2000 i + 1000]), one point every 10
    minutes: two objects are always more than 1 km apart."""
    rng = np.random.default_rng(seed)
    return {f"o{i:02d}": [(2000.0 * i + x, y, 10.0 * j) for j, (x, y) in
                          enumerate(rng.uniform(0, 1000, (n_points, 2)).tolist())]
            for i in range(n_objects)}


def attack(**kwargs) -> KnownPoints:
    return KnownPoints(KnownPointsParams(seed=kwargs.pop("seed", 1), **kwargs))


def test_identical_release_of_scattered_objects_is_fully_unique():
    raw = frame(scattered(25))
    result = attack(n_points=3, spatial_tolerance_m=50.0).evaluate(raw, raw)
    assert (result.attack, result.n_targets, result.success_rate, result.baseline) == (NAME, 25, 1.0, 1 / 25)
    assert result.risk == 1.0
    assert result.evidence["unicity_by_p"] == {"1": 1.0, "2": 1.0, "3": 1.0}
    assert result.evidence["candidate_set_size_quantiles"]["1.0"] == 1.0
    assert len(result.evidence["examples"]) == 5


def test_identical_objects_cannot_be_told_apart():
    # Five objects with the very same trajectory: every known point matches all five records, so the adversary
    # guesses among 5: expected success 1/5 per target, exactly the baseline, and unicity 0.
    track = scattered(1)["o00"]
    raw = frame({f"c{i}": track for i in range(5)})
    result = attack(n_points=4).evaluate(raw, raw)
    assert result.n_successes == pytest.approx(5 * 1 / 5)
    assert result.baseline == 1 / 5 and result.risk == 0.0
    assert result.evidence["unicity_by_p"]["4"] == 0.0
    assert result.evidence["inverse_candidates_by_p"]["4"] == pytest.approx(1 / 5)
    assert result.evidence["candidate_set_size_quantiles"]["0.5"] == 5.0


def test_time_separates_objects_that_share_places():
    # A and B visit the same places, B two hours later. With a 30-minute window each is unique; knowing only
    # places, both records match every known point: 1/2 each.
    places = [(0.0, 0.0), (1000.0, 0.0), (1000.0, 1000.0)]
    tracks = {"A": [(x, y, 30.0 * j) for j, (x, y) in enumerate(places)],
              "B": [(x, y, 120 + 30.0 * j) for j, (x, y) in enumerate(places)],
              "C": [(9000.0, 9000.0, 0.0)]}
    raw = frame(tracks)
    timed = attack(n_points=2, temporal_tolerance_s=1800.0).evaluate(raw, raw)
    assert timed.success_rate == 1.0
    spatial = attack(n_points=2, temporal_tolerance_s=None).evaluate(raw, raw)
    assert spatial.n_successes == pytest.approx(0.5 + 0.5 + 1.0)


def test_spatial_tolerance_decides_whether_shifted_points_match():
    raw = frame(scattered(10))
    shifted = raw.assign(x=raw["x"] + 30.0, y=raw["y"] + 40.0)  # every point moved 50 m
    # A 1-minute window: only the released point of the same time (10 minutes apart) can match.
    assert attack(spatial_tolerance_m=60.0, temporal_tolerance_s=60.0).evaluate(raw, shifted).success_rate == 1.0
    missed = attack(spatial_tolerance_m=45.0, temporal_tolerance_s=60.0).evaluate(raw, shifted)
    # No record matches any known point: the adversary guesses among 10 records, 1/10 per target.
    assert missed.success_rate == pytest.approx(1 / 10) and missed.risk == 0.0
    assert missed.evidence["owner_consistent_share"] == 0.0


def test_unicity_never_decreases_with_more_points():
    # The p' = 1..p curves use prefixes of the same sample, so C(K) can only shrink as K grows.
    rng = np.random.default_rng(8)
    grid = rng.integers(0, 6, size=(40, 12, 2)) * 1000.0  # 40 objects on a coarse 6 x 6 lattice: many collisions
    raw = frame({f"o{i}": [(x, y, 60.0 * j) for j, (x, y) in enumerate(pts)] for i, pts in enumerate(grid)})
    result = attack(n_points=5, temporal_tolerance_s=None, spatial_tolerance_m=10.0).evaluate(raw, raw)
    curve = [result.evidence["unicity_by_p"][str(q)] for q in range(1, 6)]
    inverse = [result.evidence["inverse_candidates_by_p"][str(q)] for q in range(1, 6)]
    assert curve == sorted(curve) and inverse == sorted(inverse)
    assert curve[0] < curve[-1]  # the lattice makes single points ambiguous but 5 points mostly unique


def test_record_mode_draws_knowledge_from_the_record_time_span():
    # Object A has a morning record (traj 0) and an evening record (traj 1) at different places; B is elsewhere.
    tracks = {"A_am": [(0.0, 0.0, 0.0), (500.0, 0.0, 10.0)],
              "A_pm": [(5000.0, 0.0, 600.0), (5500.0, 0.0, 610.0)],
              "B": [(9000.0, 9000.0, 0.0), (9500.0, 9000.0, 600.0)]}
    owners = {"A_am": "A", "A_pm": "A"}
    raw = frame(tracks, owners=owners)
    result = attack(record_key="traj_id", n_points=2).evaluate(raw, raw)
    assert result.n_targets == 3 and result.success_rate == 1.0 and result.evidence["unicity_by_p"]["2"] == 1.0


def test_another_record_of_the_same_owner_is_still_a_reidentification():
    # Spatial-only, per record: A's two records cover the same places, so the knowledge matches both; both are
    # A's, so the adversary is right either way (success 1), though no record is unique (unicity 0).
    pts = [(0.0, 0.0, 0.0), (800.0, 0.0, 10.0)]
    tracks = {"A1": pts, "A2": [(x, y, m + 1440) for x, y, m in pts], "B": [(9000.0, 0.0, 0.0)]}
    raw = frame(tracks, owners={"A1": "A", "A2": "A"})
    result = attack(record_key="traj_id", temporal_tolerance_s=None, n_points=2).evaluate(raw, raw)
    assert result.success_rate == 1.0
    assert result.evidence["unicity_by_p"]["2"] == pytest.approx(1 / 3)  # only B's record is unique


def test_dummies_are_candidates_but_not_targets():
    raw = frame({"A": [(0.0, 0.0, 0.0)], "B": [(5000.0, 0.0, 0.0)]})
    # Each real record has a dummy twin (owner "dummy", not a raw object) at the same place and time.
    release = frame({"A": [(0.0, 0.0, 0.0)], "dA": [(0.0, 0.0, 0.0)], "B": [(5000.0, 0.0, 0.0)],
                     "dB": [(5000.0, 0.0, 0.0)]}, owners={"dA": "dummy", "dB": "dummy"})
    result = attack(record_key="traj_id", n_points=1).evaluate(raw, release)
    assert result.n_targets == 2 and result.success_rate == 0.5 and result.baseline == 1 / 4


def test_releases_without_timestamps():
    raw = frame(scattered(6))
    untimed = raw.assign(t=pd.NaT)
    with pytest.raises(InputError, match="timestamps"):
        attack().evaluate(raw, untimed)
    assert attack(temporal_tolerance_s=None).evaluate(raw, untimed).success_rate == 1.0
    with pytest.raises(InputError, match="timestamps"):
        attack(record_key="traj_id", temporal_tolerance_s=None).evaluate(raw, untimed)


def test_seed_max_targets_and_lon_lat_fallback():
    raw = frame(scattered(30)).drop(columns=["x", "y"])
    rng = np.random.default_rng(0)
    raw["lon"] = 116.3 + rng.uniform(0, 0.2, len(raw))  # no x, y: an equirectangular projection of lon/lat
    raw["lat"] = 39.9 + rng.uniform(0, 0.2, len(raw))
    a = attack(max_targets=7, seed=5).evaluate(raw, raw)
    b = attack(max_targets=7, seed=5).evaluate(raw, raw)
    assert a.to_dict() == b.to_dict() and a.n_targets == 7 and a.success_rate == 1.0


def test_truthful_release_is_required():
    raw = frame(scattered(3))
    with pytest.raises(InputError, match="truthful"):
        attack().evaluate(raw, raw.assign(object_id="someone else"))
    with pytest.raises(InputError, match="object_id"):
        attack().evaluate(raw, raw.drop(columns="object_id"))


@pytest.mark.parametrize("kwargs", [
    {"n_points": 0}, {"spatial_tolerance_m": -1.0}, {"temporal_tolerance_s": -5.0}, {"record_key": "uid"},
    {"max_targets": 0}, {"seed": -1}, {"confidence": 1.0},
])
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ParameterError):
        KnownPointsParams(**kwargs)


def test_params_round_trip_and_refuse_unknown_keys():
    params = KnownPointsParams(n_points=2, temporal_tolerance_s=None, seed=4)
    assert KnownPointsParams.from_dict(params.to_dict()) == params
    with pytest.raises(ParameterError, match="tolerance"):
        KnownPointsParams.from_dict({"tolerance": 3})
