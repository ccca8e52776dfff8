"""GeneratePrivateRelease (Sec. IV-B): release invariants, ε → ∞, rounding (G9)."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np
import pytest

from mechanisms.prefix_tree import (
    PrefixTreeParams,
    generate_release,
    release,
    sanitize,
    terminating_counts,
)
from mechanisms.prefix_tree.release import round_counts
from trajpub.errors import InputError, ParameterError


def as_multiset(offsets, locs, multiplicity=None):
    rows = [tuple(locs[offsets[i] : offsets[i + 1]].tolist()) for i in range(len(offsets) - 1)]
    if multiplicity is None:
        return Counter(rows)
    return Counter(dict(zip(rows, multiplicity.tolist(), strict=True)))


def truncated_input(offsets, locs, height):
    return Counter(
        tuple(locs[offsets[i] : min(offsets[i + 1], offsets[i] + height)].tolist())
        for i in range(len(offsets) - 1)
        if offsets[i + 1] > offsets[i]
    )


def node_prefixes(tree):
    out = {0: ()}
    for v in range(1, len(tree.parent)):
        out[v] = (*out[int(tree.parent[v])], int(tree.label[v]))
    return out


@pytest.fixture(scope="module", params=["none", "paper", "projected"])
def result(request, random_walk_csr):
    offsets, locs = random_walk_csr(20000, 60, 4.0, seed=21)
    params = PrefixTreeParams(epsilon=1.0, height=5, consistency=request.param)
    return sanitize(offsets, locs, 60, params, np.random.default_rng(22))


def test_release_invariants(result):
    # Lengths in [1, h], each output a node's prefix, multiplicities max(0, round(n(v))).
    tree, rel, h = result.tree, result.release, result.params.height
    lengths = np.diff(rel.offsets)
    assert np.all((lengths >= 1) & (lengths <= h))
    prefix = node_prefixes(tree)
    n = terminating_counts(tree, result.estimates)
    expected = {prefix[v]: math.floor(n[v] + 0.5) for v in range(1, len(prefix)) if n[v] >= 0.5}
    assert as_multiset(rel.offsets, rel.locs, rel.multiplicity) == Counter(expected)
    assert rel.n_records == sum(expected.values()) == int(np.maximum(np.floor(n[1:] + 0.5), 0).sum())
    if result.params.consistency != "none":
        internal = tree.n_children() > 0
        internal[0] = False
        assert np.all(n[internal] >= -1e-9)


def test_expanded_release_is_the_same_multiset(result):
    rel = result.release
    offsets, locs = rel.expanded()
    assert len(offsets) - 1 == rel.n_records
    assert as_multiset(offsets, locs) == as_multiset(rel.offsets, rel.locs, rel.multiplicity)


def test_release_metadata(result):
    meta = result.metadata()
    assert meta["n_released_records"] == result.release.n_records
    assert meta["consistency"] == result.params.consistency and meta["rounding"] == "half_up"


@pytest.mark.parametrize("policy", ["literal", "parent_bound"])
@pytest.mark.parametrize("consistency", ["none", "paper", "projected"])
def test_huge_epsilon_releases_the_truncated_input(prefix_tree_toy, random_walk_csr, policy, consistency):
    # At ε = 1e9 the release equals {D_i[:h]} as a multiset; spurious nodes (p_θ does not depend on
    # ε) have counts ≈ θ ≈ 0 and emit nothing.
    cases = [(prefix_tree_toy, 4, 3), (random_walk_csr(3000, 8, 4.0, seed=31), 8, 3)]
    cases.append((random_walk_csr(3000, 8, 4.0, seed=32), 8, 5))
    for (offsets, locs), n_locations, h in cases:
        params = PrefixTreeParams(epsilon=1e9, height=h, expansion_policy=policy, consistency=consistency)
        out = sanitize(offsets, locs, n_locations, params, np.random.default_rng(h))
        got = as_multiset(out.release.offsets, out.release.locs, out.release.multiplicity)
        assert got == truncated_input(offsets, locs, h)


def test_rounding_rules():
    n = np.array([2.5, 2.49, -0.5, -3.0, 0.5, 7.0])
    assert round_counts(n, "half_up", np.random.default_rng(0)).tolist() == [3, 2, 0, 0, 1, 7]
    # Stochastic rounding is unbiased for n ≥ 0: mean within 5 standard errors of sqrt(f(1 − f)/R).
    reps = 20000
    values = np.array([2.3, 0.75, 5.0])
    rng = np.random.default_rng(1)
    draws = np.stack([round_counts(values, "stochastic", rng) for _ in range(reps)])
    frac = values - np.floor(values)
    se = np.sqrt(frac * (1 - frac) / reps)
    assert np.all(np.abs(draws.mean(axis=0) - values) <= 5 * se + 1e-12)
    assert set(np.unique(draws[:, 0]).tolist()) == {2, 3}
    assert np.all(round_counts(np.array([-0.4, -2.7]), "stochastic", rng) == 0)


def test_release_from_a_tree_matches_sanitize_and_allows_basic_from_the_same_tree(random_walk_csr):
    offsets, locs = random_walk_csr(5000, 40, 4.0, seed=41)
    params = PrefixTreeParams(epsilon=1.0, height=4)
    rng = np.random.default_rng(42)
    out = sanitize(offsets, locs, 40, params, rng)
    again = release(out.tree, params, np.random.default_rng(0))
    assert as_multiset(again.offsets, again.locs, again.multiplicity) == as_multiset(
        out.release.offsets, out.release.locs, out.release.multiplicity
    )
    basic = release(out.tree, dataclasses.replace(params, consistency="none"), np.random.default_rng(0))
    direct = generate_release(out.tree, out.tree.count, "half_up", np.random.default_rng(0))
    assert as_multiset(basic.offsets, basic.locs, basic.multiplicity) == as_multiset(
        direct.offsets, direct.locs, direct.multiplicity
    )
    with pytest.raises(ParameterError, match="build parameters"):
        release(out.tree, dataclasses.replace(params, epsilon=2.0), np.random.default_rng(0))


def test_sanitize_is_deterministic_per_seed(random_walk_csr):
    # Determinism per seed for the whole pipeline, with stochastic rounding drawing from the same generator.
    offsets, locs = random_walk_csr(5000, 40, 4.0, seed=51)
    params = PrefixTreeParams(epsilon=1.0, height=4, rounding="stochastic")
    a, b, c = (sanitize(offsets, locs, 40, params, np.random.default_rng(s)) for s in (3, 3, 4))
    for name in ("offsets", "locs", "multiplicity"):
        assert np.array_equal(getattr(a.release, name), getattr(b.release, name))
    assert as_multiset(a.release.offsets, a.release.locs, a.release.multiplicity) != as_multiset(
        c.release.offsets, c.release.locs, c.release.multiplicity
    )


def test_sanitize_rejects_locations_outside_the_universe(prefix_tree_toy):
    offsets, locs = prefix_tree_toy
    with pytest.raises(InputError, match="public universe"):
        sanitize(offsets, locs, 3, PrefixTreeParams(), np.random.default_rng(0))
