"""AdaTrace's three attack-resilience checks on constructed cases (Gursoy et al. CCS 2018, Sec. 5.2; [Ada-code])."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mechanisms.adatrace import (
    AdaptiveGrid,
    AdaTraceParams,
    LocalOracle,
    Synopsis,
    SyntheticSet,
    Trajectories,
    apply_resilience,
    bayesian_defense,
    count_within,
    guarantee,
    jsd,
    knn_outliers,
    outlier_defense,
    release,
    sanitize,
    sniffing_failures,
)
from mechanisms.adatrace.resilience import deniability_drops, posterior_divergence

GRID = AdaptiveGrid((0.0, 0.0, 6000.0, 6000.0), 6, np.ones(36, np.int64))  # 36 leaves of 1 km, leaf = row*6+col


def centre(leaves) -> tuple[np.ndarray, np.ndarray]:
    b = GRID.leaf_bounds[np.asarray(leaves)]
    return (b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2


def synthetic(seqs: list[list[int]], trips: list[int] | None = None, shift: dict | None = None) -> SyntheticSet:
    lengths = [len(s) for s in seqs]
    leaves = np.concatenate([np.asarray(s, np.int64) for s in seqs])
    x, y = centre(leaves)
    for (traj, pos), (dx, dy) in (shift or {}).items():
        i = sum(lengths[:traj]) + pos
        x[i] += dx
        y[i] += dy
    trip = np.asarray(trips if trips is not None else [0] * len(seqs), np.int64)
    return SyntheticSet(np.r_[0, np.cumsum(lengths)].astype(np.int64), leaves, trip, x, y)


def raw(trajs: list[list[tuple[float, float]]]) -> Trajectories:
    rows = [(i, s, x, y) for i, t in enumerate(trajs) for s, (x, y) in enumerate(t)]
    return Trajectories.from_frame(pd.DataFrame(rows, columns=["traj_id", "seq", "x", "y"]))


def synopsis(params: AdaTraceParams, trips: np.ndarray | None = None, leaf: np.ndarray | None = None) -> Synopsis:
    n_top = GRID.n_top
    return Synopsis(GRID, np.full(n_top, 10.0), np.full(36, 10.0) if leaf is None else leaf,
                    np.ones(len(GRID.edges)), np.zeros((n_top, n_top)) if trips is None else trips,
                    np.full(n_top * n_top, 6), 6, params, np.r_[10.0, np.zeros(params.max_length - 1)])


def test_jsd_bounds():
    assert jsd(np.array([0.5, 0.5]), np.array([0.5, 0.5])) == pytest.approx(0.0)
    assert jsd(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(math.log(2))


# --- partial sniffing -----------------------------------------------------------------------------------------

ROW0 = [(x, 500.0) for x in np.arange(250.0, 6000.0, 250.0)]  # crosses leaves 0..5 along y = 500
FAR = [(500.0, 5500.0), (1500.0, 5500.0)]  # leaves 30, 31: never in the sniff region


def test_sniffing_flags_the_closest_synthetic_when_it_shares_enough_cells():
    real = raw([ROW0, FAR])
    copy = [0, 1, 2, 3, 4, 5]  # shares 6 leaves with ROW0
    other = [8, 2, 3]  # crosses leaf 2 at y = 900: farther in DTW, shares 2 leaves
    syn = synthetic([other, copy], shift={(0, 1): (0.0, 400.0)})
    assert sniffing_failures(real, GRID, syn, sniff=2, zone=35, shared_threshold=5).tolist() == [1]
    # without the copy, the closest one shares only 2 cells and avoids the zone: nobody fails
    syn2 = synthetic([other, [30, 31]], shift={(0, 1): (0.0, 400.0)})
    assert sniffing_failures(real, GRID, syn2, sniff=2, zone=35, shared_threshold=5).tolist() == []
    # the closest one fails when it crosses the sensitive zone, however few cells it shares
    syn3 = synthetic([other + [35]], shift={(0, 1): (0.0, 400.0)})
    assert sniffing_failures(real, GRID, syn3, sniff=2, zone=35, shared_threshold=5).tolist() == [0]
    # a real database that never enters the sniff region flags nothing
    assert sniffing_failures(raw([FAR]), GRID, syn, sniff=2, zone=35, shared_threshold=5).tolist() == []


# --- outlier leakage ------------------------------------------------------------------------------------------

def test_knn_outlier_is_the_isolated_point():
    rng = np.random.default_rng(0)
    pts = np.vstack([rng.normal(3000, 50, (30, 2)), [[100.0, 100.0]]])
    assert knn_outliers(pts, k=5, n_out=1).tolist() == [30]


def test_count_within_counts_distances_in_the_window():
    raw_pts = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [10.0, 0.0]])
    # distances from the origin: 0, 1, 2, 3, 10; |d - 1| <= 1 holds for 0, 1, 2
    assert count_within(raw_pts, np.array([[0.0, 0.0]]), np.array([1.0]), 1.0).tolist() == [3]
    assert count_within(raw_pts, np.array([[0.0, 0.0]]), np.array([3.0]), 0.5).tolist() == [1]


@pytest.mark.parametrize(("near_real", "dropped"), [
    ([(120.0, 100.0)], True),  # one real start 20 m away, no plausible alternatives (kappa = 3)
    ([(120.0, 100.0), (100.0, 150.0), (150.0, 100.0), (130.0, 130.0)], False),  # 4 alternatives within beta
    ([], False),  # the closest real start is ~4 km away: farther than 0.1 * diag, cannot be linked
])
def test_plausible_deniability_decides_whether_an_outlier_is_dropped(near_real, dropped):
    rng = np.random.default_rng(1)
    cluster = rng.normal(3000, 30, (30, 2))
    starts = np.vstack([cluster, [[100.0, 100.0]]])
    seqs = [[int(GRID.leaf_of(np.array([x]), np.array([y]))[0])] for x, y in starts]
    syn = SyntheticSet(np.arange(32, dtype=np.int64), np.concatenate(seqs), np.zeros(31, np.int64),
                       starts[:, 0], starts[:, 1])
    real = raw([[p] for p in near_real] + [[(3000.0 + i, 3000.0)] for i in range(10)])
    params = AdaTraceParams(outlier_neighbours=5, deniability_kappa=3, deniability_beta=0.01, closest_fraction=0.1)
    drops = deniability_drops(syn, "start", GRID.diagonal, 1, LocalOracle(real), params)
    assert drops.tolist() == ([30] if dropped else [])


def test_location_outliers_are_trajectories_through_rare_noisy_cells():
    leaf = np.full(36, 10.0)
    leaf[7] = 0.2  # noisy density below rare_leaf_density = 1
    params = AdaTraceParams(n_outliers=0)
    syn = synopsis(params, leaf=leaf)
    s = synthetic([[0, 1, 2], [0, 7, 14], [6, 7], [20, 21]])
    kept, report = outlier_defense(syn, s, LocalOracle(raw([FAR])))
    assert report["dropped_location_outliers"] == 2
    assert not kept.visits(7).any() and kept.n == 2


# --- Bayesian inference ---------------------------------------------------------------------------------------

def _zone_passes(syn: Synopsis, s: SyntheticSet, zone: int) -> bool:
    through = np.flatnonzero(s.visits(zone))
    if len(through) == 0:
        return True
    jt, jm = posterior_divergence(syn, s.subset(through))
    return jt <= syn.params.bayes_threshold and jm <= syn.params.bayes_threshold


@pytest.mark.parametrize("rounds", [0, 3])
def test_bayesian_defense_leaves_no_diverging_posterior_on_the_zone(rounds):
    n_top = GRID.n_top
    trips = np.zeros((n_top, n_top))
    trips[0, 35] = 100.0  # the prior: every trip goes from the bottom-left to the top-right corner
    params = AdaTraceParams(max_resilience_rounds=rounds)
    syn = synopsis(params, trips=trips)
    zone = 14
    # ten synthetic trajectories cross the zone on a trip (0 -> 0) the prior never makes: JSD(trip) = ln 2
    s = synthetic([[0, 7, 14, 7, 0]] * 10 + [[30, 31]] * 5, trips=[0] * 10 + [30 * n_top + 31] * 5)
    assert not _zone_passes(syn, s, zone)
    out, report = bayesian_defense(syn, s, zone, np.random.default_rng(3))
    assert _zone_passes(syn, out, zone)
    assert report["rounds"] <= rounds
    if rounds == 0:
        assert report["dropped"] == 10 and report["passed"] is False and out.n == 5
    else:
        assert report["replaced"] >= 10


def test_bayesian_defense_keeps_everything_when_the_threshold_is_the_maximum():
    params = AdaTraceParams(bayes_threshold=math.log(2))
    trips = np.zeros((36, 36))
    trips[0, 35] = 1.0
    s = synthetic([[0, 7, 14, 7, 0]] * 4)
    out, report = bayesian_defense(synopsis(params, trips=trips), s, 14, np.random.default_rng(0))
    assert out.n == 4 and report["rounds"] == 0 and report["dropped"] == 0


def test_release_with_attack_resilience_keeps_the_target_count():
    rng = np.random.default_rng(2)
    frames = []
    for i in range(400):
        k = int(rng.integers(2, 30))
        xy = np.clip(rng.uniform(500, 5500, 2) + np.cumsum(rng.normal(0, 250, (k, 2)), axis=0), 1, 5999)
        frames.append(pd.DataFrame({"traj_id": i, "seq": np.arange(k), "x": xy[:, 0], "y": xy[:, 1]}))
    params = AdaTraceParams(epsilon=5.0, top_level=3, max_subdivision=3, max_length=30, attack_resilience=True,
                            n_outliers=20, outlier_neighbours=10, deniability_kappa=5, n_synthetic=300)
    result = sanitize(pd.concat(frames), (0.0, 0.0, 6000.0, 6000.0), params, np.random.default_rng(5))
    rep = result.report["resilience"]
    assert result.points["traj_id"].nunique() == 300 and rep["shortfall"] == 0
    removed = (rep["bayesian"]["dropped"] + rep["sniffing_failures"] + rep["dropped_start_outliers"]
               + rep["dropped_end_outliers"] + rep["dropped_length_outliers"] + rep["dropped_location_outliers"])
    assert rep["replacements"] == removed


def test_synopsis_only_resilience_runs_without_the_raw_data_and_keeps_the_proof():
    n_top = GRID.n_top
    trips = np.zeros((n_top, n_top))
    trips[30, 35] = 100.0  # the prior: every trip runs along the top row
    leaf = np.full(36, 10.0)
    leaf[20:29] = 50.0  # nine denser leaves, so that leaf 14 is the 10th densest: the sensitive zone
    leaf[14] = 40.0
    leaf[7] = 0.2
    params = AdaTraceParams(attack_resilience=True, resilience_reads_raw=False, max_resilience_rounds=0)
    syn = synopsis(params, trips=trips, leaf=leaf)
    s = synthetic([[0, 7, 14, 7, 0]] * 3 + [[30, 31, 32]] * 4, trips=[0] * 3 + [30 * 36 + 32] * 4)
    assert syn.leaf_rank(10) == 14
    out, rep = apply_resilience(syn, s, None, 7, np.random.default_rng(1))  # no oracle: no raw data at all
    assert rep["raw_checks"] is False and rep["sniffing_failures"] == 0 and rep["dropped_start_outliers"] == 0
    # the three zone crossers (trip 0 -> 0, never in the prior) are dropped, then 3 fresh ones avoid the zone
    assert rep["bayesian"]["dropped"] == 3 and rep["replacements"] == 3 and out.n == 7
    assert not out.visits(14).any()
    assert guarantee(params).proven is True and "synopsis-only" in guarantee(params).statement
    # the raw-data form refuses to run without an oracle
    with pytest.raises(ValueError, match="oracle"):
        release(synopsis(AdaTraceParams(attack_resilience=True), trips=trips), np.random.default_rng(0), None)
