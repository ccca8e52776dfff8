"""Mix-zone anonymisation: coverage, the exact cut rule on a hand-made case, suppression inside zones, and
pseudonyms that reveal neither the input order nor which fragments belong together."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mechanisms.mixzone import (
    MixzoneParams,
    anonymize,
    assign_pseudonyms,
    covering_zone,
    fragment_numbers,
    split_fragments,
)
from mechanisms.mixzone.anonymize import _release


def test_cut_rule_on_a_hand_made_sequence():
    zone = np.array([-1, 0, -1, -1, 1, 1, -1, 0, -1, 2, 2])
    # i4 enters zone 1 with 4 points in the fragment: cut (reference becomes 1); i5 stays in 1: no cut;
    # i7 enters zone 0 (≠ 1) with 3 points: cut; i9 enters zone 2 with only 2 points: no cut; at i10 the
    # fragment has 3 points and zone 2 ≠ reference 0: cut.
    assert fragment_numbers(zone, 3).tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3]
    assert fragment_numbers(zone, 10).tolist() == [0] * 10 + [1]  # i10: 10 points, zone 2 ≠ none
    assert fragment_numbers(zone, 11).tolist() == [0] * 11
    assert fragment_numbers(np.full(5, -1), 1).tolist() == [0] * 5
    # a trip starting inside zone 0 is not cut while it stays there; re-entering it after a cut elsewhere is
    assert fragment_numbers(np.array([0, 0, 0, 0, 1, -1, 0]), 1).tolist() == [0, 0, 0, 0, 1, 1, 2]
    # starting outside, the first zone entry cuts too
    assert fragment_numbers(np.array([-1, -1, 0, 0, -1]), 2).tolist() == [0, 0, 1, 1, 1]


def test_coverage_is_inclusive_and_picks_the_nearest_zone():
    zones = np.array([[0.0, 0.0], [1000.0, 0.0]])
    z = covering_zone(np.array([500.0, 499.0, 501.0, 1500.0, 1501.0, -500.0]), np.zeros(6), zones, 500.0)
    assert z.tolist() == [0, 0, 1, 1, -1, 0]


def line_trajectory(n: int = 60, step: float = 100.0, traj_id: int = 7) -> pd.DataFrame:
    t0 = pd.Timestamp("2008-02-03 08:00", tz="UTC")
    return pd.DataFrame({"object_id": "taxi", "traj_id": np.int64(traj_id), "seq": np.arange(n),
                         "t": t0 + pd.to_timedelta(np.arange(n) * 30, unit="s"),
                         "x": np.arange(n) * step, "y": np.zeros(n)})


ZONES = np.array([[1500.0, 50.0], [3000.0, -50.0], [4500.0, 0.0]])


def test_survey_mode_keeps_every_point_and_cuts_at_zone_entries():
    params = MixzoneParams(radius_m=250.0, suppress_in_zone=False, min_fragment_points=1)
    out, stats = split_fragments(line_trajectory(), ZONES, params)
    assert len(out) == 60 and stats["suppressed_in_zone_points"] == 0
    # zone 0 covers x in [1300, 1700], entered at i = 13; zone 1 is entered at x = 2800 (i = 28), zone 2 at
    # x = 4300 (i = 43): fragments [0, 13), [13, 28), [28, 43), [43, 60), each cut at >= 10 points
    assert out.groupby("fragment").size().tolist() == [13, 15, 15, 17]
    # with min_length 14 the entry into zone 0 comes too early (13 points); the cut happens one point later,
    # still inside zone 0, when the fragment reaches 14 points (as in the survey's code)
    out, _ = split_fragments(line_trajectory(), ZONES, MixzoneParams(radius_m=250.0, suppress_in_zone=False,
                                                                     min_length=14, min_fragment_points=1))
    assert out.groupby("fragment").size().tolist() == [14, 14, 15, 17]
    assert out.groupby("fragment")["x"].min().tolist() == [0.0, 1400.0, 2800.0, 4300.0]


def test_suppression_removes_every_covered_point_and_keeps_the_same_cuts():
    traj = pd.concat([line_trajectory(), line_trajectory(traj_id=8).assign(y=120.0)], ignore_index=True)
    keep = MixzoneParams(radius_m=250.0, suppress_in_zone=False, min_fragment_points=1)
    supp = MixzoneParams(radius_m=250.0, suppress_in_zone=True, min_fragment_points=1)
    a, _ = split_fragments(traj, ZONES, keep)
    b, stats = split_fragments(traj, ZONES, supp)
    d = np.hypot(b["x"].to_numpy()[:, None] - ZONES[:, 0], b["y"].to_numpy()[:, None] - ZONES[:, 1])
    assert d.min() > 250.0
    assert stats["suppressed_in_zone_points"] == len(a) - len(b) > 0
    # same grouping of the surviving points into fragments
    key = ["traj_id", "t"]
    merged = b.merge(a, on=key, suffixes=("_s", "_k"))
    assert len(merged) == len(b)
    pairs = merged[["fragment_s", "fragment_k"]].drop_duplicates()
    assert pairs["fragment_s"].is_unique and pairs["fragment_k"].is_unique


def test_short_fragments_after_suppression_are_dropped_and_counted():
    traj = line_trajectory(n=20)
    zones = np.array([[300.0, 0.0]])  # covers x in [100, 500]: the cut at x = 100 leaves point 0 alone
    out, stats = split_fragments(traj, zones, MixzoneParams(radius_m=200.0, min_length=1, min_fragment_points=2))
    assert out["x"].min() == 600.0 and stats["suppressed_short_fragment_points"] == 1
    assert out["seq"].tolist() == list(range(len(out)))


def test_pseudonyms_are_a_random_permutation_without_order_leak():
    rng = np.random.default_rng(123)
    n = 4000
    ids = assign_pseudonyms(n, rng)
    assert sorted(ids.tolist()) == list(range(1, n + 1))
    # under a uniform permutation Spearman's rho has sd 1/sqrt(n-1): 4 sd bound
    rho = np.corrcoef(np.arange(n), ids)[0, 1]
    assert abs(rho) < 4 / np.sqrt(n - 1)
    # consecutive fragments of the input rarely get consecutive ids (expected 2(n-1)/n ≈ 2 such pairs)
    assert np.sum(np.abs(np.diff(ids)) == 1) <= 10


@pytest.mark.parametrize("suppress", [True, False])
def test_anonymize_publishes_fragments_under_fresh_ids(suppress):
    frames = [line_trajectory(traj_id=i).assign(y=37.0 * i, object_id=f"o{i % 3}") for i in range(30)]
    pts = pd.concat(frames, ignore_index=True)
    out, stats = anonymize(pts, ZONES, MixzoneParams(radius_m=250.0, suppress_in_zone=suppress),
                           np.random.default_rng(1))
    f = out.groupby("traj_id")
    assert (f["source_traj_id"].nunique() == 1).all() and (f["object_id"].nunique() == 1).all()
    assert stats["released_fragments"] == out["traj_id"].nunique() > 30
    assert sorted(out["traj_id"].unique().tolist()) == list(range(1, stats["released_fragments"] + 1))
    # ids are not in input order: the first source trajectory's fragments are not ids 1, 2, 3
    first = sorted(out.loc[out["source_traj_id"] == 0, "traj_id"].unique().tolist())
    assert first != list(range(1, len(first) + 1))
    assert out.equals(out.sort_values(["traj_id", "seq"]).reset_index(drop=True))


def brute_force_cover(x, y, zones, radius):
    d = np.hypot(x[:, None] - zones[:, 0], y[:, None] - zones[:, 1])
    d[d > radius] = np.inf
    best = d.argmin(axis=1)  # the first (smallest) index among equal minima
    return np.where(np.isfinite(d.min(axis=1)), best, -1)


@pytest.mark.parametrize("radius", [0.0, 30.0, 250.0, 5_000.0])
def test_the_bucket_grid_cover_equals_brute_force(radius):
    rng = np.random.default_rng(11)
    # zones on a 50 m lattice (many equidistant ties), points on a 10 m lattice around and beyond them
    zones = rng.integers(0, 40, (120, 2)) * 50.0
    x, y = (rng.integers(-60, 260, (2, 5000)) * 10.0)
    np.testing.assert_array_equal(covering_zone(x, y, zones, radius), brute_force_cover(x, y, zones, radius))
    far = np.array([1e9, -1e9, np.nan])
    assert covering_zone(far, far, zones, radius).tolist() == [-1, -1, -1]


def test_release_equals_a_pandas_recount():
    """The compiled release (suppression, short-fragment drop, renumbering) against the same rules in pandas."""
    rng = np.random.default_rng(4)
    frag = np.sort(rng.integers(0, 300, 3000))
    frag = np.unique(frag, return_inverse=True)[1]  # consecutive fragment numbers
    dropped = rng.random(3000) < 0.6
    for min_points in (1, 2, 5):
        local, seq, n_local, short_f, short_p = _release(frag, dropped, min_points)
        kept = pd.DataFrame({"fragment": frag[~dropped]})
        size = kept.groupby("fragment")["fragment"].transform("size").to_numpy()
        short = size < min_points
        assert (short_f, short_p) == (kept["fragment"][short].nunique(), int(short.sum()))
        released = kept[~short]
        expect_local = np.unique(released["fragment"], return_inverse=True)[1]
        assert n_local == len(np.unique(released["fragment"]))
        np.testing.assert_array_equal(local[~dropped][~short], expect_local)
        np.testing.assert_array_equal(seq[~dropped][~short], released.groupby("fragment").cumcount())
        assert (local[dropped] == -1).all() and (local[~dropped][short] == -1).all()


def test_unsorted_input_gives_the_sorted_input_release():
    frames = [line_trajectory(traj_id=i).assign(y=37.0 * i) for i in range(5)]
    pts = pd.concat(frames, ignore_index=True)
    params = MixzoneParams(radius_m=250.0)
    a, sa = split_fragments(pts, ZONES, params)
    b, sb = split_fragments(pts.sample(frac=1.0, random_state=2), ZONES, params)
    assert sa == sb and a.equals(b)
