"""The server loop (Alg. 2): budget ledger, one participation, assignment, the estimator, the (k, ξ)
false-admission bound (Thm 3), the closed-form threshold (eq. 17), the deterministic limit, Apriori closure (Thm 1),
Markov cleaning (eq. 13–14), termination and reproducibility (Wang et al. 2022, Alg. 2)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mechanisms.fastpub import (
    FastPubParams,
    InMemoryPopulation,
    admission_margin,
    admission_threshold,
    fastpub,
    noise_factor,
    run_server,
    support_counts,
    unbiased_estimate,
)
from mechanisms.fastpub.fragments import encode
from trajpub.errors import InputError


def walks(n: int, n_loc: int, seed: int, max_len: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Random walks on a ring of n_loc cells, steps in {-1, 0, 1}, lengths 2..max_len−1."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, max_len, n)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    steps = rng.integers(-1, 2, offsets[-1])
    starts = rng.choice(n_loc, n, p=rng.dirichlet(np.full(n_loc, 0.5)))
    steps[offsets[:-1]] = 0
    walk = np.cumsum(steps) - np.repeat(np.cumsum(steps)[offsets[:-1]], lengths)
    return offsets, (np.repeat(starts, lengths) + walk) % n_loc


def constant(cells_per_client: list[int], counts: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clients holding one-cell trajectories: counts[i] clients hold (cells_per_client[i],)."""
    return (np.arange(len(counts) + 1, dtype=np.int64), np.asarray(cells_per_client, np.int64),
            np.asarray(counts, np.int64))


class Recording:
    def __init__(self, inner):
        self.inner, self.plans = inner, []

    def size(self):
        return self.inner.size()

    def respond(self, plan):
        self.plans.append(plan)
        return self.inner.respond(plan)


@pytest.fixture(scope="module")
def run4():
    """A 4-round run on 120,000 clients (300 distinct walks on 5 cells × 400) with cleaning, participants
    recorded."""
    offsets, cells = walks(300, 5, 1, max_len=14)
    mult = np.full(300, 400)
    params = FastPubParams(k=3000, l_max=4, rho=0.25, lam=0.8)
    population = Recording(InMemoryPopulation(offsets, cells, 5, np.random.default_rng(10), mult))
    result = run_server(params, population, 5, np.random.default_rng(20), record_participants=True)
    return offsets, cells, mult, params, population, result


def test_budget_ledger_and_one_participation(run4):
    # η_l = 1/(1+e^{ε/n_l}), n_l·ln((1−η)/η) = ε; each participant spends exactly ε, others 0;
    # the rounds' participant sets are disjoint and of size ⌊ρN⌋.
    _, _, _, params, _population, result = run4
    assert result.status == "published" and len(result.rounds) == 4
    seen = np.zeros(result.n_clients, dtype=int)
    for log in result.rounds:
        assert log.eta == noise_factor(params.epsilon, log.n)
        assert log.n * math.log((1 - log.eta) / log.eta) == pytest.approx(params.epsilon, abs=1e-9)
        assert len(log.participants) == math.floor(params.rho * result.n_clients) == 30_000
        seen[log.participants] += 1
    assert seen.max() == 1
    spent = result.spent_epsilon()
    assert np.allclose(spent[seen == 1], params.epsilon, rtol=0, atol=1e-12)
    assert np.all(spent[seen == 0] == 0)


def test_assignment_is_distinct_balanced_and_within_the_candidates(run4):
    # n_l = min(C, |C_l|) distinct candidates per client, query counts differ by at most one.
    _, _, _, params, population, result = run4
    for plan, log in zip(population.plans, result.rounds, strict=True):
        assert plan.n == min(params.max_candidates, plan.n_candidates)
        blocks = np.stack([plan.block(f) for f in plan.first_candidate[:500]])
        assert all(len(set(b)) == plan.n for b in blocks.tolist())
        assert log.asked.max() - log.asked.min() <= 1
        assert log.asked.sum() == plan.n * len(plan.participants)
        assert np.array_equal(np.sort(encode(plan.candidates, 5)), np.sort(encode(log.candidates, 5)))


def test_assignment_does_not_depend_on_the_data():
    # same server seed and same C_l (round 1: all locations) on different data → the same plan.
    plans = []
    for seed in (1, 2):
        offsets, cells = walks(500, 6, seed)
        pop = Recording(InMemoryPopulation(offsets, cells, 6, np.random.default_rng(seed)))
        run_server(FastPubParams(k=50, l_max=2), pop, 6, np.random.default_rng(99))
        plans.append(pop.plans[0])
    a, b = plans
    assert np.array_equal(a.participants, b.participants)
    assert np.array_equal(a.first_candidate, b.first_candidate)
    assert np.array_equal(a.candidates, b.candidates)


def test_estimator_is_unbiased_with_the_predicted_variance():
    # The estimator: 20,000 clients, 8 locations held by S(a) clients; ρ = 0.2, C = 5 → D = 4000, m = Dn/G = 2500 for
    # every candidate. The m clients asked about a are a uniform m-subset (without replacement), so
    # Var(Ŝ) = N²·[η(1−η)/(1−2η)² + π(1−π)(N−m)/(N−1)]/m. 1200 runs: each mean within 4 SE; the variance
    # ratio pooled over the 8 candidates within ±10% (its sd is ≈ √(2/1199/8) ≈ 1.4%), each within ±20%.
    support = [6000, 4000, 3000, 2500, 2000, 1500, 800, 200]
    offsets, cells, mult = constant(list(range(8)), support)
    n_clients, eps, reps = 20_000, 4.0, 1200
    params = FastPubParams(k=1000, l_max=1, epsilon=eps)
    population = InMemoryPopulation(offsets, cells, 8, np.random.default_rng(1), mult)
    server = np.random.default_rng(2)
    est = np.empty((reps, 8))
    for r in range(reps):
        log = run_server(params, population, 8, server).rounds[0]
        assert np.all(log.asked == 2500)
        est[r, log.candidates[:, 0]] = log.estimate
    eta, m = noise_factor(eps, 5), 2500
    pi = np.asarray(support) / n_clients
    var = n_clients**2 * (eta * (1 - eta) / (1 - 2 * eta) ** 2 + pi * (1 - pi) * (n_clients - m) / (n_clients - 1)) / m
    assert np.all(np.abs(est.mean(axis=0) - support) < 4 * np.sqrt(var / reps))
    ratio = est.var(axis=0, ddof=1) / var
    assert abs(ratio.mean() - 1) < 0.10 and np.all(np.abs(ratio - 1) < 0.20)


def test_noise_free_full_participation_reproduces_the_counts():
    # η = 0, ρ = 1: with C ≥ L every client answers every location, m = N, Ŝ = S, and
    # P_1 = {a : S(a)/N ≥ k/N + √(ln(1/ξ)/(2N))}.
    offsets, cells = walks(2000, 7, 4)
    params = FastPubParams(k=700, l_max=1, rho=1.0, max_candidates=7)
    result = fastpub(offsets, cells, 7, params, np.random.default_rng(0), noise_free=True)
    log = result.rounds[0]
    frags, counts = support_counts(offsets, cells, 1, 7)
    truth = dict(zip(frags[:, 0].tolist(), counts.tolist(), strict=True))
    assert log.eta == 0 and np.all(log.asked == 2000)
    assert {int(c): float(e) for c, e in zip(log.candidates[:, 0], log.estimate, strict=True)} == {
        a: float(truth.get(a, 0)) for a in range(7)}
    bar = 700 / 2000 + math.sqrt(math.log(100) / 4000)
    expected = {a for a, s in truth.items() if s / 2000 >= bar}
    assert {f.cells[0] for f in result.published} == expected
    assert 0 < len(expected) < 7
    assert result.metadata()["epsilon_per_client"] is None  # the test hook is not a release


def test_false_admission_rate_is_at_most_xi():
    # location 0 is held by k − 1 clients; its admission rate over 400 runs must not exceed ξ by
    # more than 3 binomial sd (≤ 4 + 6 = 10 runs). Location 1, held by 90% of clients, is admitted every time,
    # so a threshold without Hoeffding's δ (which would admit location 0 about half the time) would fail here.
    k, n_clients, reps = 2000, 20_000, 400
    offsets, cells, mult = constant([0, 1], [k - 1, n_clients - k + 1])
    params = FastPubParams(k=k, l_max=1)
    population = InMemoryPopulation(offsets, cells, 4, np.random.default_rng(3), mult)
    server = np.random.default_rng(4)
    admitted = {0: 0, 1: 0}
    for _ in range(reps):
        result = run_server(params, population, 4, server)
        for f in result.published:
            admitted[f.cells[0]] = admitted.get(f.cells[0], 0) + 1
    assert admitted[0] <= params.xi * reps + 3 * math.sqrt(params.xi * (1 - params.xi) * reps)
    assert admitted[1] == reps


def test_threshold_closed_form_and_database_values_exceed_k(run4):
    # Y ≥ S_l ⇔ Ŝ_N ≥ k + N·δ/(1−2η) (away from floating-point ties), and every DB value is > k.
    rng = np.random.default_rng(5)
    n_clients, k, xi = 1_000_000, 30_000, 0.01
    for eta in (0.0, 0.05, 0.3):
        asked = rng.integers(1, 50_000, 5000)
        yes = rng.binomial(asked, rng.uniform(0, 1, 5000))
        by_threshold = yes >= admission_threshold(asked, eta, k, n_clients, xi)
        estimate = unbiased_estimate(yes, asked, eta, n_clients)
        closed = k + admission_margin(asked, eta, n_clients, xi)
        clear = np.abs(estimate - closed) > 1e-6 * closed
        assert np.array_equal(by_threshold[clear], (estimate >= closed)[clear])
        assert 0 < by_threshold.sum() < len(asked)
    _, _, _, params, _, result = run4
    for length in range(1, 5):
        _, values = result.queries.entries(length)
        assert np.all(values > params.k)


def test_apriori_closure(run4):
    # h[:-1], h[1:] ∈ P_{l−1} for every h ∈ C_l; all sub-fragments of a published fragment are in the
    # P_j; P_l ⊆ C_l; lengths and locations are in range.
    _, _, _, _params, _, result = run4
    admitted = {}
    for log in result.rounds:
        cands = {tuple(c) for c in log.candidates.tolist()} | {tuple(c) for c in log.removed.tolist()}
        assert all(len(c) == log.round and all(0 <= a < 5 for a in c) for c in cands)
        if log.round > 1:
            prev = admitted[log.round - 1]
            assert all(c[:-1] in prev and c[1:] in prev for c in cands)
        admitted[log.round] = {tuple(c) for c in log.candidates[log.admitted].tolist()}
        assert admitted[log.round] <= cands
    assert {p.cells for p in result.published} == admitted[4] and admitted[4]
    for f in admitted[4]:
        for i, j in itertools.combinations(range(5), 2):
            assert f[i:j] in admitted[j - i]


def test_markov_cleaning_removes_exactly_the_candidates_below_lambda_k(run4):
    # removed iff DB[h[:-1]]·DB[h[1:]]/DB[h[1:-1]] < λk; no cleaning in rounds 1–2; λ = 0 removes
    # nothing; the removed set is disjoint from the surviving candidates.
    offsets, cells, mult, params, _, result = run4
    db = result.queries
    removed_any = False
    for log in result.rounds:
        if log.round <= 2:
            assert len(log.removed) == 0
            continue
        assert log.n_apriori == len(log.candidates) + len(log.removed)
        if len(log.removed):
            removed_any = True
            assert np.all(db.markov_estimate(log.removed) < params.lam * params.k)
        assert np.all(db.markov_estimate(log.candidates) >= params.lam * params.k)
        assert not {tuple(c) for c in log.removed.tolist()} & {tuple(c) for c in log.candidates.tolist()}
    assert removed_any
    population = InMemoryPopulation(offsets, cells, 5, np.random.default_rng(10), mult)
    no_clean = run_server(FastPubParams(k=3000, l_max=4, rho=0.25, lam=0.0), population, 5,
                          np.random.default_rng(20))
    assert all(len(log.removed) == 0 for log in no_clean.rounds)


def test_termination_without_candidates_draws_no_more_clients():
    # nothing frequent at round 1 → C_2 empty → "no_candidates" at round 2, one plan only; with
    # l_max = 1 the same data ends "none_admitted". Nothing is published either way.
    offsets, cells = walks(500, 6, 2)
    pop = Recording(InMemoryPopulation(offsets, cells, 6, np.random.default_rng(0)))
    result = run_server(FastPubParams(k=501, l_max=3), pop, 6, np.random.default_rng(1))
    assert (result.status, result.stopped_round, len(pop.plans)) == ("no_candidates", 2, 1)
    assert result.published == () and len(result.published_fragments) == 0
    assert result.rounds[-1].n_participants == 0
    single = run_server(FastPubParams(k=501, l_max=1), pop, 6, np.random.default_rng(1))
    assert single.status == "none_admitted" and single.published == ()
    with pytest.raises(InputError, match="rho"):
        run_server(FastPubParams(k=5, l_max=1, rho=0.001), pop, 6, np.random.default_rng(1))


def test_same_seed_same_output_and_metadata_is_json_safe():
    offsets, cells = walks(400, 6, 7)
    mult = np.full(400, 50)
    params = FastPubParams(k=1000, l_max=3)
    a = fastpub(offsets, cells, 6, params, np.random.default_rng(3), mult)
    b = fastpub(offsets, cells, 6, params, np.random.default_rng(3), mult)
    c = fastpub(offsets, cells, 6, params, np.random.default_rng(4), mult)
    assert a.published == b.published and a.published
    assert [p.estimated_count for p in a.published] != [p.estimated_count for p in c.published]
    import json

    meta = json.loads(json.dumps(a.metadata(), allow_nan=False))
    assert meta["status"] == "published" and meta["n_clients"] == 20_000
    assert all(r["admission_count_min"] > params.k for r in meta["rounds"])  # Ŝ must exceed k + N·δ/(1−2η)
    assert meta["theorem4_bound_per_fragment"] == pytest.approx(1.0001000001)
    assert "seed" not in json.dumps(meta).replace("sfp_hash_seed", "")
    assert a.answer_count_query(a.published[0].cells) == a.published[0].estimated_count
