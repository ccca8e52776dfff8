"""DPT noisy model and synthesis: noise scales, model selection, Markov reproduction, direction weighting."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.dpt import (
    DptParams,
    Hierarchy,
    NoisyModel,
    count_discretised,
    direction_weights,
    discretise,
    fit,
    select_heights,
    synthesize_from_model,
)
from mechanisms.dpt.synthesis import start_weights
from trajpub.errors import ParameterError

EAST, NORTH = 0, 2


def _counts(trajs, params: DptParams, hier: Hierarchy):
    ids = np.concatenate([np.full(len(t), i) for i, t in enumerate(trajs)])
    cells = np.array([r * hier.n_cols + c for t in trajs for c, r in t], dtype=np.int64)
    disc = discretise(ids, cells, hier, params.max_transitions, params.jump_tolerance)
    return count_discretised(disc, hier.n_levels, [hier.n_cells(k) for k in range(hier.n_levels)],
                             params.max_height)


def _dense(counts, name, size) -> np.ndarray:
    out = np.zeros(size)
    keys, c = counts.get(*name)
    out[keys] = c
    return out


def test_laplace_noise_has_the_stated_scale() -> None:
    """E|Laplace(b)| = b and sd|Laplace(b)| = b, so the mean absolute noise over n entries is within 5·b/√n of b
    (5 standard errors)."""
    hier = Hierarchy(40, 40, 1)
    params = DptParams(epsilon=3.0, n_levels=1, max_order=1, max_transitions=6, snr=0.0)
    rng = np.random.default_rng(11)
    trajs = [[(int(c), int(r)) for c, r in zip(range(x, x + 5), [y] * 5, strict=True)]
             for x, y in rng.integers(0, 30, (300, 2))]
    counts = _counts(trajs, params, hier)
    model = fit(counts, hier, params, np.random.default_rng(5))
    assert model.heights.tolist() == [2]
    checks = [
        (model.nodes[(0, 2)] - _dense(counts, ("node", 0, 2), 1600 * 8), params.tree_scale(2)),
        (model.noisy_starts[0] - _dense(counts, ("start", 0, 0), 1600), params.start_scale()),
    ]
    assert params.tree_scale(2) == pytest.approx(6 / params.budget()["tree"])
    for noise, b in checks:
        n = len(noise)
        assert abs(np.abs(noise).mean() - b) <= 5 * b / np.sqrt(n)
        assert abs(noise.mean()) <= 5 * np.sqrt(2) * b / np.sqrt(n)  # Var Laplace(b) = 2b²


def test_model_selection_keeps_depths_with_enough_signal_and_drops_noisy_systems() -> None:
    params = DptParams(epsilon=5.0, n_levels=3, max_order=2, max_transitions=10, snr=1.0)
    b2, b3 = params.tree_scale(2), params.tree_scale(3)
    lengths = np.zeros((3, 12))
    lengths[0, 11] = 1000  # 1000 records of 11 cells: 10 windows at depth 2, 9 at depth 3
    lengths[1, 11] = 1000
    lengths[2, 3] = 2      # a tiny system
    distinct = np.array([
        [10_000 / (2 * b2), 9_000 / (2 * b3)],   # depth 2 and 3 both well above snr·b(3)
        [10_000 / (2 * b3), 9_000 / (0.5 * b3)],  # depth 2 fine, depth 3 too thin: order 1 only
        [4.0, 2.0],                              # 4 windows in 4 nodes: below the noise, dropped
    ])
    assert select_heights(lengths, distinct, params).tolist() == [3, 2, 0]
    # all systems too small: the largest one is kept at order 1 (post-processing only)
    small = np.zeros((3, 12))
    small[1, 2], small[2, 2] = 3, 1
    assert select_heights(small, np.full((3, 2), 1e6), params).tolist() == [0, 2, 0]


def test_model_size_is_refused_from_public_inputs() -> None:
    params = DptParams(max_order=4, max_nodes=1_000_000)
    with pytest.raises(ParameterError) as err:
        fit(_counts([[(0, 0), (1, 0)]], params, Hierarchy(100, 100, 1)), Hierarchy(100, 100, 1), params,
            np.random.default_rng(0))
    assert err.value.where == "dpt.max_order"


def _tolerance(p: float, n: int) -> float:
    """5 binomial standard errors."""
    return 5 * np.sqrt(p * (1 - p) / n)


def test_markov_sampling_reproduces_transitions_when_epsilon_is_huge() -> None:
    """Order 1: from the start cell E/N/W with 0.6/0.3/0.1. Order 2: the cell C=(10,10) is entered from the west
    or from the south, and the data always continues straight; an order-1 model would turn half of the time."""
    hier = Hierarchy(21, 21, 1)
    params = DptParams(epsilon=1e9, n_levels=1, max_order=2, max_transitions=4, direction_decay=1.0,
                       n_synthetic=20_000)
    trajs = ([[(10, 10), (11, 10)]] * 600 + [[(10, 10), (10, 11)]] * 300 + [[(10, 10), (9, 10)]] * 100)
    model = fit(_counts(trajs, params, hier), hier, params, np.random.default_rng(1))
    synth = synthesize_from_model(model, np.random.default_rng(2))
    n = len(synth.level)
    assert n == 20_000 and np.all(np.diff(synth.offsets) == 2) and np.all(synth.cells[0::2] == 10 * 21 + 10)
    second = synth.cells[1::2]
    for cell, p in ((10 * 21 + 11, 0.6), (11 * 21 + 10, 0.3), (10 * 21 + 9, 0.1)):
        assert abs(np.mean(second == cell) - p) <= _tolerance(p, n)

    straight = [[(9, 10), (10, 10), (11, 10)]] * 500 + [[(10, 9), (10, 10), (10, 11)]] * 500
    model = fit(_counts(straight, params, hier), hier, params, np.random.default_rng(3))
    assert model.heights.tolist() == [3]
    synth = synthesize_from_model(model, np.random.default_rng(4))
    cells = synth.cells.reshape(-1, 3)
    from_west = cells[:, 0] == 10 * 21 + 9
    assert abs(from_west.mean() - 0.5) <= _tolerance(0.5, len(cells))
    assert np.all(cells[from_west, 2] == 10 * 21 + 11) and np.all(cells[~from_west, 2] == 11 * 21 + 10)


def _uniform_model(decay: float, n: int) -> NoisyModel:
    """A hand-made released model: every move equally likely everywhere, start at the centre, 3 cells."""
    hier = Hierarchy(21, 21, 1)
    params = DptParams(epsilon=1.0, n_levels=1, max_order=1, max_transitions=4, direction_decay=decay,
                       n_synthetic=n)
    lengths = np.zeros((1, 6))
    lengths[0, 3] = 100.0
    starts = np.zeros(21 * 21)
    starts[10 * 21 + 10] = 100.0
    return NoisyModel(params, hier, np.zeros((1, 1)), lengths, [starts], np.array([2]),
                      {(0, 2): np.full(21 * 21 * 8, 50.0)})


def test_direction_weights_are_decay_to_the_turn() -> None:
    w = direction_weights(np.array([0, 2, -1]), 0.5)
    np.testing.assert_allclose(w[0], [1, 0.5, 0.25, 0.125, 0.0625, 0.125, 0.25, 0.5])
    np.testing.assert_allclose(w[1], [0.25, 0.5, 1, 0.5, 0.25, 0.125, 0.0625, 0.125])
    np.testing.assert_allclose(w[2], np.ones(8))


@pytest.mark.parametrize("decay", [1.0, 0.5, 0.2])
def test_direction_weighting_makes_straight_moves_likelier(decay: float) -> None:
    """With uniform Markov probabilities the second move goes straight with probability
    1 / Σ_j c_j·γ^j, c = (1, 2, 2, 2, 1) moves turning by j·45° (1/8 without weighting)."""
    n = 20_000
    synth = synthesize_from_model(_uniform_model(decay, n), np.random.default_rng(9))
    cells = synth.cells.reshape(-1, 3)
    first, second = cells[:, 1] - cells[:, 0], cells[:, 2] - cells[:, 1]
    p = 1.0 / sum(c * decay**j for j, c in enumerate((1, 2, 2, 2, 1)))
    assert abs(np.mean(first == second) - p) <= _tolerance(p, n)
    u_turn = decay**4 * p
    assert abs(np.mean(first == -second) - u_turn) <= _tolerance(u_turn, n)


def test_start_threshold_suppresses_pure_noise_cells() -> None:
    model = _uniform_model(1.0, 10)
    model.noisy_starts[0] = np.r_[np.full(21 * 21 - 1, 0.9 * model.params.start_scale() * np.log(441)), 5000.0]
    w = start_weights(model, 0)
    assert w[-1] == 5000.0 and np.count_nonzero(w) == 1


def test_a_one_cell_system_yields_one_cell_trajectories() -> None:
    """No move stays inside a 1x1 system, so every walk ends at its start whatever length was drawn."""
    hier = Hierarchy(1, 1, 1)
    params = DptParams(epsilon=1.0, n_levels=1, max_order=1, max_transitions=4, n_synthetic=50)
    lengths = np.zeros((1, 6))
    lengths[0, 5] = 10.0
    model = NoisyModel(params, hier, np.zeros((1, 1)), lengths, [np.ones(1)], np.array([2]), {(0, 2): np.ones(8)})
    synth = synthesize_from_model(model, np.random.default_rng(0))
    assert np.diff(synth.offsets).tolist() == [1] * 50 and (synth.cells == 0).all()


def test_direction_weights_skip_higher_order_contexts_by_default() -> None:
    """Order-2 model with uniform counts everywhere: with weight_order1_only the second move is unweighted
    (straight with probability 1/8); without it, straight with probability 1/Σ c_j γ^j."""
    for only, decay in ((True, 0.5), (False, 0.5)):
        model = _uniform_model(decay, 20_000)
        model.params = DptParams(epsilon=1.0, n_levels=1, max_order=2, max_transitions=4, direction_decay=decay,
                                 n_synthetic=20_000, weight_order1_only=only, snr=0.0)
        model.heights = np.array([3])
        model.nodes[(0, 3)] = np.full(21 * 21 * 64, 50.0)
        synth = synthesize_from_model(model, np.random.default_rng(13))
        cells = synth.cells.reshape(-1, 3)
        first, second = cells[:, 1] - cells[:, 0], cells[:, 2] - cells[:, 1]
        p = 1 / 8 if only else 1.0 / sum(c * decay**j for j, c in enumerate((1, 2, 2, 2, 1)))
        assert abs(np.mean(first == second) - p) <= _tolerance(p, len(cells))
