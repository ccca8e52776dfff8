"""The client side: randomised response (Alg. 1), ε-LDP by the exact likelihood ratio (Thm 2), the exact
aggregated fast path against the per-client reference (docs/design.md, FASTPub), and the server/client seam."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from mechanisms.fastpub import (
    FastPubParams,
    InMemoryPopulation,
    RoundAnswers,
    RoundPlan,
    combine_answers,
    is_fragment_of,
    noise_factor,
    respond,
    respond_partition,
    respond_partition_per_client,
    run_server,
    split_plan,
)
from mechanisms.fastpub.server import block_starts
from trajpub.errors import InputError

PACKAGE = Path(__file__).resolve().parents[2] / "mechanisms" / "fastpub"


def walks(n: int, n_loc: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random walks on a ring of n_loc cells, steps in {-1, 0, 1}, lengths 2..9."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 10, n)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    steps = rng.integers(-1, 2, offsets[-1])
    starts = rng.choice(n_loc, n, p=rng.dirichlet(np.full(n_loc, 0.5)))
    steps[offsets[:-1]] = 0
    walk = np.cumsum(steps) - np.repeat(np.cumsum(steps)[offsets[:-1]], lengths)
    return offsets, (np.repeat(starts, lengths) + walk) % n_loc


def test_randomised_response_flip_rate():
    # P(b'=1 | b=1) = 1−η and P(b'=1 | b=0) = η. 50,000 bits of each kind; a 5σ binomial interval.
    eta = noise_factor(3.0, 2)
    t = np.array([0, 1, 2, 3])
    bits = respond(t, eta, np.array([[1, 2]] * 50_000 + [[2, 1]] * 50_000), np.random.default_rng(0))
    ones_given_true, ones_given_false = bits[:50_000].mean(), bits[50_000:].mean()
    sigma = math.sqrt(eta * (1 - eta) / 50_000)
    assert abs(ones_given_true - (1 - eta)) < 5 * sigma
    assert abs(ones_given_false - eta) < 5 * sigma


def test_algorithm1_on_the_fig3_client():
    # Fig. 3 with η = 0: the bits are the true answers [T, F, T, F]; the trajectory has a repeated cell.
    t = np.array([1, 3, 4, 5, 2, 1, 1, 4, 3])
    candidates = np.array([[3, 4, 5], [1, 2, 3], [2, 1, 1], [2, 1, 5]])
    assert respond(t, 0.0, candidates, np.random.default_rng(0)).tolist() == [1, 0, 1, 0]
    assert respond(t[:2], 0.0, candidates, np.random.default_rng(0)).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("epsilon", [1.0, 2.0, 10.0])
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_one_clients_answers_are_epsilon_ldp_by_the_exact_likelihood_ratio(epsilon, n):
    # Thm 2: for any two trajectories (truth vectors b, b') and any output y of the n bits,
    # P(y | b) / P(y | b') ≤ e^ε, with equality when b and b' differ in every bit.
    eta = noise_factor(epsilon, n)

    def likelihood(y, b):
        return math.prod((1 - eta) if yi == bi else eta for yi, bi in zip(y, b, strict=True))

    vectors = list(itertools.product((0, 1), repeat=n))
    worst = max(math.log(likelihood(y, b) / likelihood(y, c)) for y in vectors for b in vectors for c in vectors)
    assert worst <= epsilon + 1e-9
    assert worst == pytest.approx(epsilon, abs=1e-9)


def test_a_client_refuses_a_plan_that_overspends():
    base = {"round": 1, "candidates": np.arange(4)[:, None], "n": 2, "epsilon": 1.0, "participants": np.arange(3),
                "first_candidate": np.zeros(3, np.int64), "n_locations": 4}
    RoundPlan(eta=noise_factor(1.0, 2), **base)
    with pytest.raises(InputError, match="epsilon"):
        RoundPlan(eta=noise_factor(1.0, 2) * 0.9, **base)  # less noise than ε allows
    with pytest.raises(InputError, match="noise-free"):
        RoundPlan(eta=0.0, **base)
    with pytest.raises(InputError, match="n ="):
        RoundPlan(eta=noise_factor(1.0, 5), **{**base, "n": 5})  # more candidates than exist


def _plan_and_truth(seed: int):
    """A fixed round-2 plan over 600 clients (40 distinct trajectories × 15) and the exact (m_f, h_f)."""
    offsets, cells = walks(40, 6, seed)
    mult = np.full(40, 15)
    rng = np.random.default_rng(seed + 1)
    candidates = np.array(list(itertools.product(range(6), repeat=2)))[rng.choice(36, 10, replace=False)]
    participants = np.sort(rng.choice(600, 300, replace=False))
    first = rng.permutation(block_starts(300, 10, 3))
    plan = RoundPlan(round=2, candidates=candidates, n=3, eta=noise_factor(3.0, 3), epsilon=3.0,
                     participants=participants, first_candidate=first, n_locations=6)
    owner = np.repeat(np.arange(40), mult)[participants]
    m, h = np.zeros(10), np.zeros(10)
    for u, f in zip(owner, first, strict=True):
        for g in plan.block(int(f)):
            m[g] += 1
            h[g] += is_fragment_of(candidates[g], cells[offsets[u]:offsets[u + 1]])
    return offsets, cells, mult, plan, m, h


def _exact_pmf(m: int, h: int, eta: float) -> np.ndarray:
    """pmf of Y = Bin(h, 1−η) + Bin(m−h, η) on 0..m."""
    return np.convolve(stats.binom.pmf(np.arange(h + 1), h, 1 - eta), stats.binom.pmf(np.arange(m - h + 1),
                                                                                       m - h, eta))


def _bins_of_at_least(expected: np.ndarray, minimum: float) -> np.ndarray:
    """Labels merging consecutive values into bins of >= ``minimum`` expected draws (the tail joins the last)."""
    labels, label, acc = np.empty(len(expected), dtype=np.int64), 0, 0.0
    for i, e in enumerate(expected):
        labels[i] = label
        acc += e
        if acc >= minimum:
            label, acc = label + 1, 0.0
    if acc < minimum and label > 0:
        labels[labels == label] = label - 1
    return labels


def test_fast_path_and_per_client_path_agree_in_distribution():
    # Given the assignment, Y_f = Bin(h_f, 1−η) + Bin(m_f − h_f, η) independently over
    # f, for the aggregated fast path AND for 300 clients running Algorithm 1 one by one.
    offsets, cells, mult, plan, m, h = _plan_and_truth(7)
    assert 0 < h.sum() < m.sum()  # the plan mixes holders and non-holders
    eta = plan.eta
    runs = {"aggregated": 3000, "per_client": 300}
    draws = {}
    for path, reps in runs.items():
        fn = respond_partition if path == "aggregated" else respond_partition_per_client
        rngs = np.random.default_rng(11).spawn(reps)
        answers = [fn(offsets, cells, plan, g, mult) for g in rngs]
        assert all(np.array_equal(a.asked, m) for a in answers)  # m_f is fixed by the plan
        draws[path] = np.array([a.yes for a in answers], dtype=float)
    mean, var = h * (1 - eta) + (m - h) * eta, m * eta * (1 - eta)
    for path, y in draws.items():
        reps = len(y)
        # each candidate's mean within 4.5 standard errors (20 tests: family-wise false alarm < 2e-4)
        assert np.all(np.abs(y.mean(axis=0) - mean) < 4.5 * np.sqrt(var / reps)), path
        # pooled Σ (Y−E)²/Var is χ² with reps·G degrees of freedom (the Y_f are independent): ±4.5 sd
        chi2 = (((y - mean) ** 2) / var).sum()
        dof = y.size
        assert abs(chi2 - dof) < 4.5 * math.sqrt(2 * dof), path
    # goodness of fit of the per-client draws of the most-asked candidate to the exact pmf (α = 0.001)
    g = int(np.argmax(m))
    pmf = _exact_pmf(int(m[g]), int(h[g]), eta)
    counts = np.bincount(draws["per_client"][:, g].astype(int), minlength=len(pmf))
    expected = pmf * runs["per_client"]
    labels = _bins_of_at_least(expected, 10.0)
    obs, exp = np.bincount(labels, weights=counts), np.bincount(labels, weights=expected)
    assert len(obs) >= 5
    assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-3
    # and the two paths against each other (two-sample KS on the standardised draws, α = 0.001)
    z = {p: ((y - mean) / np.sqrt(var)).ravel() for p, y in draws.items()}
    assert stats.ks_2samp(z["aggregated"], z["per_client"]).pvalue > 1e-3


def test_noise_free_paths_and_partitions_give_identical_counts():
    # η = 0: both paths are deterministic and must give the exact counts; splitting the plan over partitions
    # and summing (what a Dask population does) changes nothing.
    offsets, cells, mult, plan, m, h = _plan_and_truth(3)
    plan = dataclasses.replace(plan, eta=0.0, epsilon=math.inf)
    rng = np.random.default_rng(0)
    agg = respond_partition(offsets, cells, plan, rng, mult)
    ref = respond_partition_per_client(offsets, cells, plan, rng, mult)
    assert np.array_equal(agg.yes, h) and np.array_equal(ref.yes, h) and np.array_equal(agg.asked, m)
    ends = np.cumsum(mult)
    edges = [0, 7, 8, 25, 40]
    parts = split_plan(plan, [0] + [int(ends[e - 1]) for e in edges[1:]])
    answers = [respond_partition(offsets[a:b + 1] - offsets[a], cells[offsets[a]:offsets[b]], p, rng, mult[a:b])
               for (a, b), p in zip(itertools.pairwise(edges), parts, strict=True)]
    total = combine_answers(answers)
    assert np.array_equal(total.yes, h) and np.array_equal(total.asked, m)
    assert total.n_clients == len(plan.participants)


# ---- the seam --------------------------------------------------------------------------------------------

SERVER_MODULES = ("server", "triehh", "sfp", "protocol", "database", "result", "fragments", "params", "sketch",
                  "sampling")


def _imports(module: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
    return names


@pytest.mark.parametrize("module", SERVER_MODULES)
def test_server_side_modules_do_not_import_the_client_side(module):
    imported = _imports(module)
    forbidden = {"mechanisms.fastpub.client", "mechanisms.fastpub.population", "mechanisms.fastpub.metrics",
                 "mechanisms.fastpub.mechanism", "mechanisms.fastpub"}
    assert not imported & forbidden
    assert not any(name.split(".")[0] in {"dask", "distributed", "prefect", "sqlalchemy"} for name in imported)


def test_answers_carry_counts_only():
    assert [f.name for f in dataclasses.fields(RoundAnswers)] == ["round", "asked", "yes", "n_clients"]
    offsets, cells, mult, plan, _m, _h = _plan_and_truth(5)
    answer = respond_partition(offsets, cells, plan, np.random.default_rng(0), mult)
    assert answer.asked.shape == answer.yes.shape == (plan.n_candidates,)
    assert answer.asked.dtype == answer.yes.dtype == np.int64
    with pytest.raises(InputError):
        RoundAnswers(round=1, asked=np.array([1, 2]), yes=np.array([2, 0]), n_clients=1)  # yes > asked
    bad = cells.copy()
    bad[0] = -1  # a point outside the grid must be dropped before the mechanism
    with pytest.raises(InputError, match="cells"):
        respond_partition(offsets, bad, plan, np.random.default_rng(0), mult)


class StrictPopulation:
    """Exposes only size() and respond(); records the plans and checks each answer is counts only."""

    def __init__(self, inner):
        self._inner = inner
        self.plans = []

    def size(self):
        return self._inner.size()

    def respond(self, plan):
        self.plans.append(plan)
        answer = self._inner.respond(plan)
        assert set(vars(answer)) == {"round", "asked", "yes", "n_clients"}
        return answer


def test_server_talks_to_the_population_through_plans_and_answers_only():
    offsets, cells = walks(300, 6, 1)
    inner = InMemoryPopulation(offsets, cells, 6, np.random.default_rng(1), np.full(300, 200),
                               trajectories_per_partition=70)
    assert inner.n_partitions == 5
    population = StrictPopulation(inner)
    result = run_server(FastPubParams(k=3000, l_max=3), population, 6, np.random.default_rng(2))
    assert len(population.plans) == 3 and all(isinstance(p, RoundPlan) for p in population.plans)
    assert result.status == "published"
    # the server object holds no reference to trajectories: nothing in the result is the size of the raw data
    assert not any(isinstance(v, np.ndarray) and v.size == len(cells) for v in vars(result).values())
