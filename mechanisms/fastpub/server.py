"""SERVER side of FASTPub (Alg. 2): candidate generation, cleaning, assignment, aggregation, filtering.

The server never sees a trajectory. It talks to a :class:`~mechanisms.fastpub.protocol.ClientPopulation`
through plans and aggregated answers only; this module imports nothing from ``client`` or ``population``
(a unit test checks it). Paper: Wang, Zhu, Wang, Han, IEEE TMC 2022, §5, Alg. 1–2; our choices: docs/design.md, FASTPub.

Round l = 1..l_max (Alg. 2):
1. Candidates. l = 1: every location. l ≥ 2: the Apriori join of P_{l−1} (eq. 12, Thm 1).
2. Markov cleaning, l ≥ 3 and λ > 0: remove h when DB[h[:−1]]·DB[h[1:]]/DB[h[1:−1]] < λk (eq. 13–14, strict <).
3. C_l empty: stop, publish nothing (Alg. 2 lines 10–11); no later round draws clients.
4. n = min(C, |C_l|), η = 1/(1+e^{ε/n}) (Thm 2 with equality).
5. Participants: the next ⌊ρN⌋ ids of one permutation of 0..N−1 drawn at the start (disjoint rounds, each
   client answers at most once, as §6.1 says and the authors' code does).
6. Assignment (ours; the paper says only "random and unbiased", the authors' code can hand a
   client a duplicate at the wrap): shuffle C_l into A; the j-th participant of the round answers the cyclic
   block A[(j·n + i) mod |C_l|], i < n. Blocks hold n distinct candidates, loads differ by at most one, and the
   assignment depends only on (seed, C_l, N): each round has its own generator stream, spawned up front.
7. Estimate (§5.4, "inverse calculation of (15)"; scaling by N from the authors' code):
   Ŝ_N(f) = N·(Y_f/m_f − η)/(1 − 2η), with the real m_f (the authors' code plugs in the average ρNn/|C_l|).
8. Admit (Thm 3, eq. 17, with "M" read as m_f, the number asked about f): Y_f ≥ S_l = m_f·(k/N·(1−η) + (N−k)/N·η + δ),
   δ = √(ln(1/ξ)/(2m_f)); equivalently Ŝ_N(f) ≥ k + N·δ/(1−2η). A candidate nobody was asked about (m_f = 0,
   possible only when ⌊ρN⌋·n < |C_l|) is not admitted. DB[f] = Ŝ_N(f) for every admitted f.
"""

from __future__ import annotations

import math

import numpy as np

from mechanisms.fastpub.database import CountingDatabase
from mechanisms.fastpub.fragments import apriori_join, check_key_space, encode
from mechanisms.fastpub.params import FastPubParams, noise_factor
from mechanisms.fastpub.protocol import ClientPopulation, RoundAnswers, RoundPlan
from mechanisms.fastpub.result import FastPubResult, PublishedFragment, RoundLog
from mechanisms.fastpub.sampling import sorted_ids
from trajpub.errors import InputError


def unbiased_estimate(yes: np.ndarray, asked: np.ndarray, eta: float, n_clients: int) -> np.ndarray:
    """Ŝ_N(f) = N·(Y_f/m_f − η)/(1 − 2η) (§5.4, inverting eq. 15); NaN where m_f = 0."""
    yes, asked = np.asarray(yes, float), np.asarray(asked, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        freq = np.where(asked > 0, yes / asked, np.nan)
    return n_clients * (freq - eta) / (1 - 2 * eta)


def admission_threshold(asked: np.ndarray, eta: float, k: float, n_clients: int, xi: float) -> np.ndarray:
    """S_l of Thm 3 (eq. 17) per candidate, M = m_f: m·(k/N·(1−η) + (N−k)/N·η + √(−ln ξ/(2m))); inf at m = 0."""
    m = np.asarray(asked, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = np.sqrt(math.log(1 / xi) / (2 * m))
        s = m * (k / n_clients * (1 - eta) + (n_clients - k) / n_clients * eta + delta)
    return np.where(m > 0, s, np.inf)


def admission_margin(asked: np.ndarray, eta: float, n_clients: int, xi: float) -> np.ndarray:
    """N·δ/(1 − 2η): how far above k an estimate must be to be admitted (closed form of eq. 17)."""
    m = np.asarray(asked, float)
    with np.errstate(divide="ignore"):
        return n_clients * np.sqrt(math.log(1 / xi) / (2 * m)) / (1 - 2 * eta)


def block_starts(n_participants: int, n_candidates: int, n: int) -> np.ndarray:
    """first_candidate of the j-th participant: (j·n) mod |C_l| (docs/design.md, FASTPub)."""
    return (np.arange(n_participants, dtype=np.int64) * n) % n_candidates


def run_server(params: FastPubParams, population: ClientPopulation, n_locations: int, rng: np.random.Generator,
               *, noise_free: bool = False, record_participants: bool = False) -> FastPubResult:
    """Run FASTPub (or the baseline ``params.method`` names) against ``population``.

    rng: the *server's* generator (participant order, candidate shuffles). The clients' coins live in the
    population. noise_free: test hook, η = 0 (ε = ∞, no privacy); never for a release.
    record_participants: keep every round's participant ids in the log (the budget ledger of tests).
    """
    if params.method == "triehh":
        from mechanisms.fastpub.triehh import run_triehh

        return run_triehh(params, population, n_locations, rng)
    if params.method == "sfp":
        from mechanisms.fastpub.sfp import run_sfp

        return run_sfp(params, population, n_locations, rng)
    return _run_fastpub(params, population, n_locations, rng, noise_free, record_participants)


def _run_fastpub(params: FastPubParams, population: ClientPopulation, n_locations: int,
                 rng: np.random.Generator, noise_free: bool, record_participants: bool) -> FastPubResult:
    n_clients = int(population.size())
    per_round = params.participants_per_round(n_clients)
    if per_round < 1:
        raise InputError(f"floor(rho * N) = 0 clients per round with N = {n_clients}", "fastpub.rho")
    check_key_space(n_locations, params.l_max)
    order_rng, *round_rngs = rng.spawn(1 + params.l_max)
    order = order_rng.permutation(n_clients)
    k, eps = params.k, (math.inf if noise_free else params.epsilon)
    db = CountingDatabase(n_locations, n_clients, k)
    logs: list[RoundLog] = []
    admitted = np.empty((0, 0), dtype=np.int64)
    status, stopped = "published", params.l_max

    for level in range(1, params.l_max + 1):
        if level == 1:
            candidates = np.arange(n_locations, dtype=np.int64)[:, None]
        else:
            candidates = apriori_join(admitted, n_locations)
        n_apriori = len(candidates)
        removed = np.empty((0, level), dtype=np.int64)
        if level >= 3 and params.lam > 0 and len(candidates):
            clean = db.markov_estimate(candidates) < params.lam * k
            removed, candidates = candidates[clean], candidates[~clean]
        if len(candidates) == 0:
            logs.append(RoundLog(round=level, n_apriori=n_apriori, removed=removed, candidates=candidates))
            status, stopped = "no_candidates", level
            break

        g = len(candidates)
        n = min(params.max_candidates, g)
        eta = noise_factor(eps, n)
        shuffled = candidates[round_rngs[level - 1].permutation(g)]
        ids = order[(level - 1) * per_round: level * per_round]
        first = block_starts(len(ids), g, n)
        members, by_id = sorted_ids(ids, n_clients)
        plan = RoundPlan(round=level, candidates=shuffled, n=n, eta=eta, epsilon=eps, participants=members,
                         first_candidate=first[by_id], n_locations=n_locations)
        answers = population.respond(plan)
        _check_answers(answers, plan)

        estimate = unbiased_estimate(answers.yes, answers.asked, eta, n_clients)
        threshold = admission_threshold(answers.asked, eta, k, n_clients, params.xi)
        admit = (answers.asked > 0) & (answers.yes >= threshold)
        db.set(shuffled[admit], estimate[admit])
        admitted = shuffled[admit]
        admitted = admitted[np.argsort(encode(admitted, n_locations))]
        logs.append(RoundLog(
            round=level, n_apriori=n_apriori, removed=removed, candidates=shuffled, n=n, eta=eta, epsilon=eps,
            n_participants=len(ids), asked=answers.asked, yes=answers.yes, threshold=threshold,
            estimate=estimate, admitted=admit, admission_count=k + admission_margin(answers.asked, eta, n_clients,
                                                                                   params.xi), participants=plan.participants if record_participants else None,
        ))
    else:
        if len(admitted) == 0:
            status = "none_admitted"

    published: tuple[PublishedFragment, ...] = ()
    if status == "published":
        values = db.lookup(admitted)
        published = tuple(PublishedFragment(tuple(int(a) for a in f), float(v), params.l_max)
                          for f, v in zip(admitted, values, strict=True))
    return FastPubResult(params=params, status=status, n_clients=n_clients, n_locations=n_locations,
                         published=published, rounds=tuple(logs), queries=db, stopped_round=stopped,
                         noise_free=noise_free)


def _check_answers(answers: RoundAnswers, plan: RoundPlan) -> None:
    where = f"fastpub round {plan.round} answers"
    if not isinstance(answers, RoundAnswers) or answers.round != plan.round:
        raise InputError("the population answered another plan", where)
    if answers.asked.shape != (plan.n_candidates,):
        raise InputError("one answer count per candidate expected", where)
    if answers.asked.sum() > plan.n * len(plan.participants):
        raise InputError("more answers than questions asked", where)
