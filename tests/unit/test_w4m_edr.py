"""EDR (Chen, Özsu, Oria 2005) with W4M's time tolerance: hand-checked values, the vectorised batch against the
textbook recurrence, the exactness of the pruning, and the alignment's cost."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.w4m import Trajectories, alignment, candidate_pairs, edr, edr_batch, matches


def _naive(a, b, eps, tau):
    """The recurrence of Chen et al. (2005) Def. 3, cell by cell."""
    n, m = len(a[0]), len(b[0])
    d = np.zeros((n + 1, m + 1), dtype=int)
    d[:, 0], d[0, :] = np.arange(n + 1), np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            same = (abs(a[1][i - 1] - b[1][j - 1]) <= eps and abs(a[2][i - 1] - b[2][j - 1]) <= eps
                    and abs(a[0][i - 1] - b[0][j - 1]) <= tau)
            d[i, j] = min(d[i - 1, j - 1] + (0 if same else 1), d[i - 1, j] + 1, d[i, j - 1] + 1)
    return d[n, m]


def _tr(t, x, y):
    return np.asarray(t, float), np.asarray(x, float), np.asarray(y, float)


def _random_set(seed: int, n: int, max_len: int, spread: float) -> Trajectories:
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, max_len, n)
    off = np.r_[0, np.cumsum(lens)].astype(np.int64)
    t = np.concatenate([rng.uniform(0, 3000) + np.cumsum(rng.integers(20, 200, k)) for k in lens]).astype(float)
    x, y = rng.normal(0, spread, off[-1]), rng.normal(0, spread, off[-1])
    return Trajectories(off, x, y, np.arange(n), t, np.array([f"o{i}" for i in range(n)], dtype=object))


def test_hand_checked_values():
    r = _tr([0, 60, 120], [0, 10, 20], [0, 0, 0])
    assert edr(r, r, 1.0, 10.0) == 0
    assert edr(r, _tr([0, 120], [0, 20], [0, 0]), 1.0, 10.0) == 1  # delete the middle point
    late = _tr([1000, 1060, 1120], [0, 10, 20], [0, 0, 0])
    assert edr(r, late, 1.0, 300.0) == 3  # same places, 1000 s later: nothing matches
    assert edr(r, late, 1.0, 1000.0) == 0
    # the threshold is per axis (Chen et al.): 200 m apart on both axes (283 m) still matches at 250 m
    assert edr(_tr([0], [0], [0]), _tr([0], [200], [200]), 250.0, 1.0) == 0
    assert edr(_tr([0], [0], [0]), _tr([0], [251], [0]), 250.0, 1.0) == 1
    assert edr(r, _tr([], [], []), 1.0, 1.0) == 3


def test_batch_equals_the_textbook_recurrence():
    tr = _random_set(3, 40, 35, 300.0)
    pairs = np.array([(i, j) for i in range(tr.n) for j in range(i + 1, tr.n)])
    got = edr_batch(tr, pairs, 200.0, 150.0)
    want = np.array([_naive(tr.points(i), tr.points(j), 200.0, 150.0) for i, j in pairs])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(edr_batch(tr, pairs[:, ::-1], 200.0, 150.0), want)  # symmetric


def test_batches_wider_than_the_cell_budget(monkeypatch):
    import sys

    monkeypatch.setattr(sys.modules["mechanisms.w4m.edr"], "BATCH_CELLS", 64)
    tr = _random_set(5, 12, 90, 200.0)
    pairs = np.array([(i, j) for i in range(tr.n) for j in range(i + 1, tr.n)])
    want = np.array([edr(tr.points(i), tr.points(j), 150.0, 200.0) for i, j in pairs])
    np.testing.assert_array_equal(edr_batch(tr, pairs, 150.0, 200.0), want)


def test_pruning_is_exact():
    tr = _random_set(11, 60, 25, 2000.0)
    cand = {tuple(p) for p in candidate_pairs(tr, 250.0, 120.0)}
    n_pruned = 0
    for i in range(tr.n):
        for j in range(i + 1, tr.n):
            a, b = tr.points(i), tr.points(j)
            any_match = matches(a[0][:, None], a[1][:, None], a[2][:, None], b[0][None], b[1][None], b[2][None],
                                250.0, 120.0).any()
            if any_match:
                assert (i, j) in cand
            if (i, j) not in cand:
                n_pruned += 1
                assert _naive(a, b, 250.0, 120.0) == max(len(a[0]), len(b[0]))  # the maximum EDR
    assert 0 < n_pruned < tr.n * (tr.n - 1) // 2  # the check bites both ways


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_alignment_costs_exactly_the_edr(seed):
    tr = _random_set(seed, 10, 30, 150.0)
    for i in range(tr.n - 1):
        a, b = tr.points(i), tr.points(i + 1)
        ia, jb, matched = alignment(a, b, 200.0, 300.0, substitutions=True)
        assert np.all(np.diff(ia) > 0) and np.all(np.diff(jb) > 0)
        assert np.array_equal(matches(a[0][ia], a[1][ia], a[2][ia], b[0][jb], b[1][jb], b[2][jb], 200.0, 300.0),
                              matched)
        cost = (~matched).sum() + (len(a[0]) - len(ia)) + (len(b[0]) - len(jb))
        assert cost == edr(a, b, 200.0, 300.0)
        ma, mb = alignment(a, b, 200.0, 300.0)
        np.testing.assert_array_equal(ma, ia[matched])
        np.testing.assert_array_equal(mb, jb[matched])
