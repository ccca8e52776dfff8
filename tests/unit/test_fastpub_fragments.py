"""Fragments, keys, the Apriori join (eq. 12, Thm 1), the counting database (eq. 13) and the metrics."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mechanisms.fastpub import (
    CountingDatabase,
    apriori_join,
    group_duplicates,
    is_fragment_of,
    median_relative_error,
    precision_recall_f1,
    support_counts,
)
from mechanisms.fastpub.fragments import check_key_space, decode, encode
from trajpub.errors import ParameterError


def csr(trajectories):
    offsets = np.concatenate(([0], np.cumsum([len(t) for t in trajectories]))).astype(np.int64)
    return offsets, np.concatenate([np.asarray(t, np.int64) for t in trajectories])


def test_fig3_client_truths():
    # Fig. 3: t = a1 a3 a4 a5 a2 a1 a1 a4 a3; true answers [T, F, T, F].
    t = [1, 3, 4, 5, 2, 1, 1, 4, 3]
    candidates = [(3, 4, 5), (1, 2, 3), (2, 1, 1), (2, 1, 5)]
    assert [is_fragment_of(c, t) for c in candidates] == [True, False, True, False]
    assert not is_fragment_of((1, 3, 4, 5, 2, 1, 1, 4, 3, 0), t)


def test_apriori_example_of_section_5_2():
    # a1a2a3 and a2a3a4 in P_3 give a1a2a3a4 in C_4, and nothing else.
    out = apriori_join(np.array([[1, 2, 3], [2, 3, 4]]), n_locations=5)
    assert out.tolist() == [[1, 2, 3, 4]]


def test_round_two_candidates_are_all_ordered_pairs_with_self_pairs():
    out = apriori_join(np.array([[0], [3], [5]]), n_locations=6)
    assert sorted(map(tuple, out.tolist())) == sorted(itertools.product([0, 3, 5], repeat=2))


def test_apriori_join_equals_the_brute_force_definition():
    # eq. 12: C_l = {h ∈ Ω_l : h[:-1] ∈ P_{l-1} and h[1:] ∈ P_{l-1}}
    rng = np.random.default_rng(3)
    n_loc = 5
    omega = np.array(list(itertools.product(range(n_loc), repeat=2)))
    admitted = omega[rng.random(len(omega)) < 0.4]
    got = {tuple(h) for h in apriori_join(admitted, n_loc).tolist()}
    members = {tuple(f) for f in admitted.tolist()}
    expected = {h for h in itertools.product(range(n_loc), repeat=3) if h[:-1] in members and h[1:] in members}
    assert got == expected and len(got) > 10


def test_presence_counts_each_client_once():
    # (a, a, a) holds (a, a) once; S counts clients, weighted by multiplicity.
    offsets, cells = csr([[2, 2, 2], [2, 2], [1, 2]])
    frags, counts = support_counts(offsets, cells, 2, 3)
    assert dict(zip(map(tuple, frags.tolist()), counts.tolist(), strict=True)) == {(2, 2): 2, (1, 2): 1}
    frags, counts = support_counts(offsets, cells, 2, 3, multiplicity=np.array([10, 1, 7]))
    assert dict(zip(map(tuple, frags.tolist()), counts.tolist(), strict=True)) == {(2, 2): 11, (1, 2): 7}


def test_keys_round_trip_and_overflow_guard():
    frags = np.array([[0, 63, 7], [63, 63, 63], [1, 0, 0]])
    assert decode(encode(frags, 64), 3, 64).tolist() == frags.tolist()
    check_key_space(64, 10)  # 64^10 = 2^60
    with pytest.raises(ParameterError):
        check_key_space(64, 11)


def test_group_duplicates_keeps_the_multiset():
    offsets, cells = csr([[1, 2], [3], [1, 2], [1, 2, 3], [3]])
    off2, cells2, mult = group_duplicates(offsets, cells)
    groups = {tuple(cells2[off2[i]:off2[i + 1]].tolist()): int(mult[i]) for i in range(len(mult))}
    assert groups == {(1, 2): 2, (3,): 2, (1, 2, 3): 1}


def test_query_fallback_follows_the_markov_recursion():
    # Q reproduces Q(f[:-1])·Q(f[1:])/Q(f[1:-1]); base cases of the authors' code; never divides by zero.
    db = CountingDatabase(n_locations=4, n_clients=1000, k=50)
    db.set(np.array([[0], [1], [2]]), np.array([400.0, 300.0, 200.0]))
    db.set(np.array([[0, 1], [1, 2]]), np.array([150.0, 120.0]))
    assert db.query((0, 1)) == 150.0
    assert db.query((0, 1, 2)) == pytest.approx(150.0 * 120.0 / 300.0)
    assert db.query((3,)) == 50.0  # unknown single location: k
    assert db.query((2, 0)) == pytest.approx(200.0 * 400.0 / 1000)  # unknown pair: Q(a)Q(b)/N
    q12_3 = 50.0 * 200.0 / 1000  # Q((2,3)) from the pair rule
    assert db.query((1, 2, 3)) == pytest.approx(120.0 * q12_3 / 200.0)
    long = (3, 3, 3, 3, 3)
    assert np.isfinite(db.query(long)) and db.query(long) > 0
    assert db.query_many([(0, 1, 2), (3,)]).tolist() == pytest.approx([db.query((0, 1, 2)), 50.0])
    assert db.markov_estimate(np.array([[0, 1, 2]]))[0] == pytest.approx(150.0 * 120.0 / 300.0)


def test_f1_and_relative_error_on_hand_made_sets():
    # P = {x, y}, GT = {y, z} gives p = r = F1 = 0.5; empty P is "inv"; exact counts give error 0.
    x, y, z = [0, 1, 2], [1, 2, 3], [2, 3, 0]
    score = precision_recall_f1(np.array([x, y]), np.array([y, z]), 4)
    assert (score.precision, score.recall, score.f1) == (0.5, 0.5, 0.5)
    assert precision_recall_f1(np.empty((0, 3)), np.array([y]), 4) is None
    assert median_relative_error(np.array([10.0, 20.0]), np.array([10.0, 20.0])) == 0.0
    assert median_relative_error(np.array([12.0, 20.0, 5.0]), np.array([10.0, 20.0, 10.0])) == 0.2
