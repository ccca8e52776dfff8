"""The output suite (expectations/release_points.json) on candidate frames: it fails a release that would publish
a raw object identifier, an extra private column, a column its shape does not publish, or timestamps more
precise than the policy."""

import pandas as pd
import pytest

from tasks.check_output import check, check_points, coarsen_times, published_frame
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import PolicyError


def candidate(shape: Shape = Shape.TRUTHFUL, **extra) -> CandidateRelease:
    t = pd.to_datetime(["2008-02-02 10:00:17", "2008-02-02 10:03:41", "2008-02-02 10:07:02"], utc=True)
    return CandidateRelease(shape, pd.DataFrame({
        "object_id": ["taxi-1"] * 3, "traj_id": [1, 1, 1], "seq": [0, 1, 2], "cell": [5, 6, 6], "t": t,
        "lon": [116.1, 116.2, 116.3], "lat": [39.9, 39.9, 40.0], "x": 0.0, "y": 0.0, **extra}), {})


def test_a_coarsened_candidate_passes_and_keeps_its_points():
    coarse = coarsen_times(candidate(), 60)
    frame = published_frame(coarse.points)
    assert list(frame.columns) == ["traj_id", "seq", "cell", "t", "lon", "lat"]
    assert frame["t"].dt.second.eq(0).all() and len(frame) == 3
    assert all(o["success"] for o in check(coarse, 60))


def test_raw_timestamp_precision_fails():
    with pytest.raises(PolicyError, match="more precise than the release policy"):
        check(candidate(), 60)


def test_a_raw_object_identifier_column_fails():
    with pytest.raises(PolicyError, match="a column it may not publish"):
        check_points(coarsen_times(candidate(), 60).points.drop(columns=["x", "y"]), Shape.TRUTHFUL, 60)


def test_a_private_column_added_by_a_mechanism_fails():
    with pytest.raises(PolicyError, match="a column it may not publish"):
        check(coarsen_times(candidate(is_real=True), 60), 60)


def test_a_column_of_another_shape_fails():
    """A set identifier is published with anonymity sets; on a truthful release it is a column too many."""
    with_sets = coarsen_times(candidate(set_id=4), 60)
    with pytest.raises(PolicyError, match="a column it may not publish"):
        check(with_sets, 60)
    assert all(o["success"] for o in check_points(published_frame(with_sets.points), Shape.ANONYMITY_SETS, 60))


def test_untimed_releases_and_anonymity_sets_pass():
    untimed = candidate().points.assign(t=pd.NaT).drop(columns="object_id")
    assert all(o["success"] for o in check(CandidateRelease(Shape.SYNTHETIC, untimed, {}), 60))
    sets = coarsen_times(candidate(Shape.ANONYMITY_SETS, set_id=4), 60)
    assert all(o["success"] for o in check(sets, 60))


def test_generalised_samples_keep_a_span_that_covers_the_original_one():
    t_end = pd.to_datetime(["2008-02-02 10:05:10", "2008-02-02 10:09:00", "2008-02-02 10:30:59"], utc=True)
    region = {"lon_min": 116.0, "lat_min": 39.8, "lon_max": 116.4, "lat_max": 40.1}
    raw = candidate(Shape.GENERALISED, t_end=t_end, set_id=2, **region)
    coarse = coarsen_times(raw, 60)
    frame = coarse.points
    assert (frame["t"] <= raw.points["t"]).all() and (frame["t_end"] >= raw.points["t_end"]).all()
    assert list(frame["t_end"].dt.strftime("%H:%M:%S")) == ["10:06:00", "10:09:00", "10:31:00"]
    assert all(o["success"] for o in check(coarse, 60))
    with pytest.raises(PolicyError, match="time span ends more precisely"):
        check_points(published_frame(frame).assign(t_end=t_end), Shape.GENERALISED, 60)
