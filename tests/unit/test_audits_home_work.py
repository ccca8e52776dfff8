"""audits.home_work: home/work inference (A7) on constructed weeks with known homes and workplaces."""

import numpy as np
import pandas as pd
import pytest

from audits.attack import NotApplicable
from audits.home_work import NAME, HomeWorkInference, HomeWorkParams, infer_places
from audits.planar import planar_coordinates
from trajpub.errors import ParameterError

MONDAY = pd.Timestamp("2024-03-04")


def week(object_id: str, home: tuple[float, float], work: tuple[float, float], tz: str = "UTC",
         seed: int = 0) -> pd.DataFrame:
    """A week of one object in local time ``tz``: at home 22:00-06:00, at work 09:00-17:00 on weekdays, and
    at random places in the evening and at weekends. A point every 30 minutes; t stored in UTC. The places are
    given relative to the centre of a 250 m place square (+125 m), so 10 m of jitter keeps them in one square."""
    rng = np.random.default_rng(seed)
    rows = []
    for day in range(7):
        for half_hour in range(48):
            local = MONDAY + pd.Timedelta(days=day, minutes=30 * half_hour)
            hour = local.hour
            if hour >= 22 or hour < 6:
                x, y = home
            elif 9 <= hour < 17 and day < 5:
                x, y = work
            else:
                x, y = rng.uniform(-30_000, 30_000, 2)
            jitter = rng.normal(0, 10, 2)
            rows.append({"object_id": object_id, "t": local.tz_localize(tz).tz_convert("UTC"),
                         "x": x + jitter[0] + 125.0, "y": y + jitter[1] + 125.0})
    out = pd.DataFrame(rows)
    out["traj_id"], out["seq"] = 0, np.arange(len(out))
    out["lon"], out["lat"] = 116.4, 39.9
    return out


def population(n: int = 12, tz: str = "UTC") -> pd.DataFrame:
    """n objects with homes and workplaces on a 20 km lattice: every place at least 5 km from every other."""
    frames = [week(f"o{i:02d}", (5000.0 * i, 0.0), (5000.0 * i, 50_000.0), tz, seed=i) for i in range(n)]
    return pd.concat(frames, ignore_index=True)


def attack(**kwargs) -> HomeWorkInference:
    return HomeWorkInference(HomeWorkParams(**kwargs))


def test_infer_places_finds_the_constructed_home_and_work():
    raw = population(3)
    raw_xy, _ = planar_coordinates(raw, raw)
    places = infer_places(raw, raw_xy, HomeWorkParams())
    np.testing.assert_allclose(places["home_x"] - 125.0, [0.0, 5000.0, 10_000.0], atol=5)
    np.testing.assert_allclose(places["work_y"] - 125.0, [50_000.0] * 3, atol=5)
    assert (places["home_hours"] == 7 * 8).all()  # 8 night hours (22-06) on 7 nights
    assert (places["work_hours"] == 5 * 8).all()


def test_identical_release_reveals_everyone_beyond_the_baseline():
    raw = population()
    result = attack().evaluate(raw, raw)
    assert (result.attack, result.n_targets, result.success_rate) == (NAME, 12, 1.0)
    assert result.baseline == 0.0  # every other object's places are 5 km away: a population guess never hits
    assert result.risk == 1.0 and result.evidence["home_median_error_m"] == 0.0


def test_moving_the_nights_hides_the_home_but_not_the_work():
    raw = population()
    local_hour = raw["t"].dt.hour
    night = (local_hour >= 22) | (local_hour < 6)
    release = raw.assign(x=raw["x"].where(~night, raw["x"] + 2000.0))  # night points 2 km east
    rates = {success: attack(success=success).evaluate(raw, release).success_rate
             for success in ("home", "work", "either", "both")}
    assert rates == {"home": 0.0, "work": 1.0, "either": 1.0, "both": 0.0}
    assert attack(success="home", radius_m=2500.0).evaluate(raw, release).success_rate == 1.0


def test_the_timezone_decides_what_night_means():
    # Local nights in Beijing (UTC+8) are UTC afternoons: read in UTC, 22:00-06:00 UTC is Beijing 06:00-14:00,
    # when the objects are at work on weekdays or roaming at weekends, so the inferred "home" is the workplace.
    raw = population(tz="Asia/Shanghai")
    raw_xy, _ = planar_coordinates(raw, raw)
    local = infer_places(raw, raw_xy, HomeWorkParams(timezone="Asia/Shanghai"))
    utc = infer_places(raw, raw_xy, HomeWorkParams(timezone="UTC"))
    np.testing.assert_allclose(local["home_y"] - 125.0, 0.0, atol=5)
    np.testing.assert_allclose(utc["home_y"] - 125.0, 50_000.0, atol=5)


def test_distinct_hours_not_points_choose_the_place():
    # 200 points in one night hour at place P (a burst) against 2 points per night hour, 16 a night, over 7
    # nights at home (112 points): counting points would pick P, counting distinct hours picks home (56 to 1).
    raw = week("a", (0.0, 0.0), (9000.0, 9000.0))
    burst_t = pd.Timestamp("2024-03-05 02:00", tz="UTC") + pd.to_timedelta(np.arange(200), unit="s")
    burst = pd.DataFrame({"object_id": "a", "t": burst_t, "x": 30_000.0, "y": 30_000.0, "traj_id": 1,
                          "seq": np.arange(200), "lon": 116.4, "lat": 39.9})
    frame = pd.concat([raw, burst], ignore_index=True)
    xy, _ = planar_coordinates(frame, frame)
    assert infer_places(frame, xy, HomeWorkParams()).loc["a", "home_x"] == pytest.approx(125.0, abs=5)


def test_baseline_counts_other_objects_whose_inferred_place_lands_near_the_truth():
    # Four objects, homes in two pairs 100 m apart (pairs 10 km apart), workplaces all far apart. For "home",
    # each target's truth is within 500 m of exactly one of the 3 other objects' inferred homes: baseline 1/3.
    homes = [(0.0, 0.0), (100.0, 0.0), (10_000.0, 0.0), (10_100.0, 0.0)]
    raw = pd.concat([week(f"o{i}", h, (3000.0 * i, 40_000.0), seed=i) for i, h in enumerate(homes)],
                    ignore_index=True)
    home = attack(success="home").evaluate(raw, raw)
    assert home.baseline == pytest.approx(1 / 3) and home.risk == pytest.approx(1.0)
    assert attack(success="work").evaluate(raw, raw).baseline == 0.0
    assert attack(success="either").evaluate(raw, raw).baseline == pytest.approx(1 / 3)
    assert attack(success="both").evaluate(raw, raw).baseline == 0.0


def test_a_population_that_lives_and_works_together_leaks_nothing_individual():
    raw = pd.concat([week(f"o{i}", (0.0, 0.0), (20_000.0, 0.0), seed=i) for i in range(6)], ignore_index=True)
    result = attack().evaluate(raw, raw)
    assert result.success_rate == 1.0 and result.baseline == 1.0 and result.risk == 0.0


def test_objects_missing_from_the_release_are_not_targets_and_missing_windows_are_misses():
    raw = population(4)
    release = raw[raw["object_id"] != "o03"]
    daytime = release["t"].dt.hour.between(6, 21)
    release = release[~((release["object_id"] == "o00") & ~daytime)]  # o00 released without its nights
    result = attack(success="home").evaluate(raw, release)
    assert result.n_targets == 3 and result.n_successes == 2
    assert result.evidence["home_inferred_share"] == pytest.approx(2 / 3)


def test_a_release_without_timestamps_or_a_window_without_nights_is_not_applicable():
    raw = population(2)
    with pytest.raises(NotApplicable, match="timestamps"):
        attack().evaluate(raw, raw.assign(t=pd.NaT))
    with pytest.raises(NotApplicable, match="night"):
        attack(success="home", night_hours=(3, 4)).evaluate(raw.iloc[24:30], raw)  # no raw point at 03:00


@pytest.mark.parametrize("kwargs", [
    {"radius_m": 0.0}, {"place_size_m": -1.0}, {"timezone": "Mars/Olympus"}, {"night_hours": (22, 22)},
    {"night_hours": (22, 24)}, {"work_hours": (9,)}, {"work_days": ()}, {"work_days": (7,)},
    {"success": "any"}, {"confidence": 2.0},
])
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ParameterError):
        HomeWorkParams(**kwargs)


def test_params_round_trip():
    params = HomeWorkParams(timezone="Asia/Shanghai", work_days=(0, 1, 2, 3, 4, 5), success="both")
    assert HomeWorkParams.from_dict(params.to_dict()) == params
    with pytest.raises(ParameterError, match="radius"):
        HomeWorkParams.from_dict({"radius": 3})
