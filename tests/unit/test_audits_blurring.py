"""The attacks that see through blurring (membership by time and by shape) against the blurring controls."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audits.attack import NotApplicable
from audits.controls import hold_out
from audits.registry import attacks_for
from audits.shape_match import NAME as SHAPE_NAME
from audits.shape_match import ShapeMatch, ShapeMatchParams, nearest, procrustes, shapes
from audits.time_match import NAME as TIME_NAME
from audits.time_match import Fixes, TimeMatch, TimeMatchParams, release_precision_s
from tests.controls.blurring import TRANSFORMS, blurred

METRES = 111_320.0
WEEK_START = pd.Timestamp("2008-02-02", tz="UTC")


def walks(n_objects: int, seed: int, per_object: int = 3, points: int = 30, prefix: str = "o") -> pd.DataFrame:
    """Random walks of a 30 km square: steps of 200-1500 m, turns of N(0, 0.8 rad), fixes 60-300 s apart from a
    start anywhere in a week (whole seconds). One object: ``per_object`` walks."""
    rng = np.random.default_rng(seed)
    n = n_objects * per_object
    heading = rng.uniform(0, 2 * np.pi, (n, 1)) + np.cumsum(rng.normal(0, 0.8, (n, points - 1)), axis=1)
    step = rng.uniform(200, 1500, (n, points - 1))
    x = np.c_[rng.uniform(0, 30_000, n), rng.uniform(0, 30_000, n)]
    dx = np.cumsum(np.c_[np.zeros(n), step * np.cos(heading)], axis=1) + x[:, :1]
    dy = np.cumsum(np.c_[np.zeros(n), step * np.sin(heading)], axis=1) + x[:, 1:]
    seconds = np.cumsum(np.c_[rng.integers(0, 7 * 86_400, n), rng.integers(60, 300, (n, points - 1))], axis=1)
    trip = np.repeat(np.arange(n), points)
    objects = np.array([f"{prefix}{o:03d}" for o in range(n_objects)])
    return pd.DataFrame({"object_id": objects[trip // per_object], "traj_id": [f"{prefix}{t}" for t in trip],
                         "seq": np.tile(np.arange(points), n),
                         "t": WEEK_START + pd.to_timedelta(seconds.ravel(), unit="s"),
                         "lon": 116 + dx.ravel() / (METRES * np.cos(np.radians(39.9))),
                         "lat": 39.9 + dy.ravel() / METRES})


def split(raw: pd.DataFrame, seed: int = 9) -> pd.DataFrame:
    controls = hold_out(raw["object_id"].unique(), 0.3, np.random.default_rng(seed))
    return raw.assign(member=~raw["object_id"].isin(controls))


def as_released(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as a release: no owner, times floored to the minute (the flow's default precision)."""
    return frame.drop(columns=["object_id", "member"], errors="ignore").assign(t=frame["t"].dt.floor("60s"))


def with_blurred_members(raw: pd.DataFrame, transform: str, seed: int) -> tuple[pd.DataFrame, int]:
    """A release of the population's own walks (none of the raw ones) plus one record of every tenth member,
    blurred, and the number of members blurred."""
    rng = np.random.default_rng(seed)
    members = np.sort(raw.loc[raw["member"], "object_id"].unique())[::10]
    parts = [walks(300, 2, prefix="s")]
    for i, obj in enumerate(members):
        records = [g for _, g in raw[raw["object_id"] == obj].groupby("traj_id")]
        other = raw[raw["traj_id"] == raw["traj_id"].iloc[0]]  # the splice's second half: another object's
        out = blurred(records[0], transform, rng, other)
        parts.append(out.assign(traj_id=f"b{i}", seq=np.arange(len(out))))
    return as_released(pd.concat(parts, ignore_index=True)), len(members)


ATTACKS = (TIME_NAME, SHAPE_NAME)


def attack(name: str) -> TimeMatch | ShapeMatch:
    return TimeMatch(TimeMatchParams()) if name == TIME_NAME else ShapeMatch(ShapeMatchParams())


@pytest.fixture(scope="module")
def raw() -> pd.DataFrame:
    return split(walks(200, 1))


def test_both_attacks_run_on_every_release_without_owners():
    assert {TIME_NAME, SHAPE_NAME} <= set(attacks_for("synthetic"))
    assert not {TIME_NAME, SHAPE_NAME} & set(attacks_for("truthful") + attacks_for("aggregate"))


@pytest.mark.parametrize("transform", ["rotate", "mirror", "translate", "reverse"])
def test_shape_distance_is_zero_under_rigid_motions_and_reversal(raw, transform):
    record = raw[raw["traj_id"] == "o5"]
    moved = blurred(record, transform, np.random.default_rng(3)).assign(traj_id="m", seq=np.arange(len(record)))
    _, z = shapes(pd.concat([record, moved]), lat0=39.9)
    both = np.stack([z[1], z[1][::-1]])
    radius = np.sqrt((np.abs(z[0]) ** 2).sum())  # the walk's RMS distance from its centroid, km
    # the control turns the walk in its first point's projection, the attack reads it in one at 39.9 N: the two
    # differ by a stretch of |cos(lat) / cos(39.9) - 1| < 0.2% over the walk's latitudes
    assert procrustes(z[0], both).min() <= 0.002 * radius
    assert radius > 1000


def test_the_index_finds_the_exact_nearest_shape():
    """Branch and bound on the centroid distances gives what a brute-force search gives."""
    _, z = shapes(walks(60, 4), lat0=39.9)
    query, target = z[:40], z[40:]
    brute = procrustes(query[:, None, :], target[None, :, :]).min(axis=1)
    np.testing.assert_allclose(nearest(query, target), brute)
    lower = np.sqrt(((np.abs(query)[:, None, :] - np.abs(target)[None]) ** 2).sum(-1))
    assert (lower <= procrustes(query[:, None, :], target[None]) + 1e-9).all()


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_a_blurred_member_is_linked_by_time_or_shape(raw, transform):
    """Every blurring control, one record of every tenth member among the population's walks: one of the two
    attacks links the blurred members beyond the controls (which it links only by chance, as the population's
    walks link members: :func:`test_a_release_of_the_population_links_members_and_controls_alike`)."""
    release, n = with_blurred_members(raw, transform, seed=7)
    chance = {name: attack(name).evaluate(raw, as_released(walks(300, 2, prefix="s"))) for name in ATTACKS}
    results = {name: attack(name).evaluate(raw, release) for name in ATTACKS}
    best = max(results.values(), key=lambda r: r.risk_ci_low)
    assert best.risk_ci_low > 0
    assert best.n_successes >= n + chance[best.attack].n_successes - 1  # the blurred members, beyond chance
    assert best.baseline == chance[best.attack].baseline


@pytest.mark.parametrize("name", ATTACKS)
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_a_release_of_the_population_links_members_and_controls_alike(raw, name, seed):
    """Independent walks of the same population, at the same times of the week: what the attacks link they link
    by chance (a start and an end in the same minutes), members and controls alike: the risk's interval holds 0."""
    result = attack(name).evaluate(raw, as_released(walks(300, seed, prefix="s")))
    assert result.risk_ci_low == 0.0
    assert result.success_rate < 0.1


def test_the_time_attack_reads_the_releases_precision_and_needs_timestamps(raw):
    release = as_released(walks(10, 2, prefix="s"))
    assert release_precision_s(release) % 60 == 0
    assert release_precision_s(release.assign(t=release["t"] + pd.Timedelta(seconds=1))) == 1
    with pytest.raises(NotApplicable, match="no timestamps"):
        TimeMatch(TimeMatchParams()).evaluate(raw, release.assign(t=pd.NaT))


def test_a_record_shifted_in_time_and_moved_escapes_time_but_not_shape(raw):
    release, n = with_blurred_members(raw, "time_shift", seed=8)
    chance = TimeMatch(TimeMatchParams()).evaluate(raw, as_released(walks(300, 2, prefix="s")))
    assert TimeMatch(TimeMatchParams()).evaluate(raw, release).n_successes == chance.n_successes
    assert ShapeMatch(ShapeMatchParams()).evaluate(raw, release).n_successes == n


@pytest.mark.parametrize(("transform", "needs"), [("reverse", {}), ("resample", {"max_skip": 3})])
def test_runs_of_fixes_are_read_backwards_and_every_few_fixes(raw, transform, needs):
    """A walk reversed over the same times, or thinned to every third fix, then moved: its runs of fixes keep the
    raw times and the lengths between the raw fixes they came from; without reading every third fix
    (``max_skip`` 1) the thinned walk's runs are not found."""
    record = raw[raw["traj_id"] == "o5"]
    out = blurred(record, transform, np.random.default_rng(5))
    release = as_released(out.assign(traj_id="b", seq=np.arange(len(out))))
    raw_fixes, released = Fixes.of(raw, 60), Fixes.of(release, 60)
    target = list(raw_fixes.ids).index("o5")
    owner = owners(raw, raw_fixes)
    assert target in TimeMatch(TimeMatchParams(**needs))._runs(raw_fixes, released, owner)
    if transform == "resample":
        assert target not in TimeMatch(TimeMatchParams(max_skip=1))._runs(raw_fixes, released, owner)


def owners(raw: pd.DataFrame, fixes: Fixes) -> np.ndarray:
    """Each raw record's object, as the attack codes it."""
    return pd.factorize(raw.groupby("traj_id")["object_id"].first().reindex(fixes.ids))[0]


def test_a_signature_shared_by_two_objects_links_neither(raw):
    """A released record whose times and runs match the records of two raw objects (a second object holding a copy
    of o5's record) singles out neither: the match links no record, by times or by runs; without the copy it links
    o5 by both."""
    record = raw[raw["traj_id"] == "o5"]
    out = blurred(record, "translate", np.random.default_rng(5))
    release = as_released(out.assign(traj_id="b", seq=np.arange(len(out))))
    twin = record.assign(object_id="twin", traj_id="twin5")
    attack = TimeMatch(TimeMatchParams())
    for frame, linked in ((raw, True), (pd.concat([raw, twin], ignore_index=True), False)):
        raw_fixes, released = Fixes.of(frame, 60), Fixes.of(release, 60)
        target, owner = list(raw_fixes.ids).index("o5"), owners(frame, raw_fixes)
        assert (target in attack._times(raw_fixes, released, owner)) is linked
        assert (target in attack._runs(raw_fixes, released, owner)) is linked
