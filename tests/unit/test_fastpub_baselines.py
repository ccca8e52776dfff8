"""The paper's baselines (Wang et al. 2022, §6.1, as the authors' code runs them): TrieHH's trie, output and suffix DB
on a hand-made example, and SFP's count-mean sketch (unbiased, with its exact variance) and puzzle decoding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms.fastpub import FastPubParams, SfpPlan, fastpub, guarantee, respond_partition
from mechanisms.fastpub.fragments import encode
from mechanisms.fastpub.sketch import HashFamily, estimate, flip_probability, sketch_matrix


def csr(trajectories):
    offsets = np.concatenate(([0], np.cumsum([len(t) for t in trajectories]))).astype(np.int64)
    return offsets, np.concatenate([np.asarray(t, np.int64) for t in trajectories])


def test_triehh_on_a_hand_made_population():
    # ρ = 1 samples every client, so θ = k and the trie holds exactly the prefixes with ≥ k clients:
    # (0): 10, (1): 3; (0,1): 9, (1,2): 3; (0,1,2): 5, (0,1,3): 4, (1,2,3): 3. (0,2) has 1 vote, (0,1,?) …
    offsets, cells = csr([[0, 1, 2], [0, 1, 3], [1, 2, 3], [0, 2]])
    mult = np.array([5, 4, 3, 1])
    params = FastPubParams(k=3, l_max=3, rho=1.0, method="triehh")
    result = fastpub(offsets, cells, 4, params, np.random.default_rng(0), mult)
    assert result.status == "published"
    assert {p.cells for p in result.published} == {(0, 1, 2), (0, 1, 3), (1, 2, 3)}
    db = result.queries
    # each accepted node's estimate v·N/⌊ρN⌋ = v is added to every suffix of its path (the authors' code)
    expected = {(0,): 10, (1,): 3 + 9, (0, 1): 9, (1, 2): 3 + 5, (2,): 3 + 5, (0, 1, 2): 5, (0, 1, 3): 4,
                (1, 3): 4, (3,): 4 + 3, (1, 2, 3): 3, (2, 3): 3}
    assert {f: db.get(f) for f in expected} == expected
    assert db.get((0, 2)) is None
    assert [r.metadata()["n_added"] for r in result.rounds] == [2, 2, 3]
    assert guarantee(params).model == "none (baseline)"


def test_triehh_stops_when_no_child_is_added_and_publishes_leaf_windows():
    offsets, cells = csr([[0, 1, 2, 3], [0, 1]])
    result = fastpub(offsets, cells, 4, FastPubParams(k=2, l_max=2, rho=1.0, method="triehh", triehh_rounds=4),
                     np.random.default_rng(0), np.array([1, 1]))
    # (0) and (0,1) have 2 votes; (0,1,2) has 1: round 3 adds nothing and the run stops there
    assert [r.metadata()["n_added"] for r in result.rounds] == [1, 1, 0]
    assert {p.cells for p in result.published} == {(0, 1)}


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_cms_estimate_is_unbiased_with_its_exact_variance(epsilon):
    # Every client holds the same trajectory, so each client's CMS-A coordinate at h_j(word) is the truth v = +1
    # flipped with probability q: f̃ = m/(m−1)·(Σ_i (c_ε/2·ṽ_i + 1/2) − n/m) has mean n and variance
    # (m/(m−1))²·n·(c_ε² − 1)/4 exactly. 300 runs: mean within 4 SE, variance within ±30% (sd ≈ √(2/299) = 8%).
    n_clients, reps, rows, cols = 2000, 300, 8, 1024
    offsets, cells = csr([[1, 2, 3, 0]])
    plan = SfpPlan(participants=np.arange(n_clients), trim_length=4, n_locations=4, rows=rows, columns=cols,
                   word_buckets=256, word_epsilon=epsilon, piece_epsilon=epsilon, hash_seed=0)
    word = np.array([2, 3, 4, 1])  # cells + 1
    key = encode(word[None, :], 5)
    family = HashFamily(0, 0, rows, cols)
    rngs = np.random.default_rng(5).spawn(reps)
    est = np.array([
        estimate(sketch_matrix(a.ones[0], a.clients[0], epsilon), n_clients, family, key)[0]
        for a in (respond_partition(offsets, cells, plan, g, np.array([n_clients])) for g in rngs)
    ])
    c_eps = (math.exp(epsilon / 2) + 1) / (math.exp(epsilon / 2) - 1)
    var = (cols / (cols - 1)) ** 2 * n_clients * (c_eps**2 - 1) / 4
    assert abs(est.mean() - n_clients) < 4 * math.sqrt(var / reps)
    assert abs(est.var(ddof=1) / var - 1) < 0.30
    assert flip_probability(epsilon) == pytest.approx(1 / (1 + math.exp(epsilon / 2)))


def test_sfp_finds_a_dominant_trajectory():
    # 70% of the clients hold 1→2→3→0, the rest hold random walks: SFP's puzzle recovers the word and publishes
    # its two 3-windows; a count query on a published fragment is within 20% of its support.
    rng = np.random.default_rng(2)
    others = [list(rng.integers(0, 4, rng.integers(2, 7))) for _ in range(300)]
    offsets, cells = csr([[1, 2, 3, 0]] + others)
    mult = np.r_[7000, np.full(300, 10)]
    params = FastPubParams(k=2000, l_max=3, method="sfp", sfp_rows=16)
    result = fastpub(offsets, cells, 4, params, np.random.default_rng(3), mult)
    published = {p.cells for p in result.published}
    assert {(1, 2, 3), (2, 3, 0)} <= published
    truth = 7000 + sum(10 for t in others if any(t[i:i + 3] == [1, 2, 3] for i in range(len(t))))
    assert result.answer_count_query((1, 2, 3)) == pytest.approx(truth, rel=0.2)
    assert math.isnan(result.answer_count_query((1, 2, 3, 0, 1)))  # longer than T = 4: SFP cannot answer
    assert guarantee(params).epsilon == 10.0
