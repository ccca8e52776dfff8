"""CityTrace's PrivTree density (mechanisms/citytrace/privtree.py): the split follows the data, its thresholds come
from ε alone, each object's contribution is bounded, the decomposition's privacy loss stays under its ε on
worst-case neighbours, and points are drawn from the fine density inside their model cell."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench.utility_data import TDRIVE_WINDOW
from mechanisms import citytrace
from mechanisms.citytrace import privtree
from mechanisms.citytrace.counting import top_cells_histogram
from mechanisms.citytrace.params import fine_grid
from mechanisms.citytrace.synthesis import density_weights, model_cell_of_fine
from trajpub.errors import ParameterError
from trajpub.grid import GridSpec

BBOX = (116.3, 39.85, 116.5, 40.0)  # about 17 x 17 km


def grid_of(cols: int, rows: int, hot: dict[int, float]) -> np.ndarray:
    fine = np.zeros(cols * rows)
    for cell, mass in hot.items():
        fine[cell] = mass
    return fine


def log_prob(fine: np.ndarray, cols: int, rows: int, leaves: privtree.Leaves, epsilon: float) -> float:
    """ln P[the decomposition outputs ``leaves``] on ``fine`` with continuous Laplace noise (the paper's law):
    every node above a leaf was split, every leaf above level 0 was not."""
    top = privtree.root_level(cols, rows)
    lam, delta = privtree.calibration(epsilon, top)
    leaf_key = set(zip(leaves.level.tolist(), leaves.block.tolist(), strict=True))
    total, active = 0.0, np.zeros(1, dtype=np.int64)
    for level in range(top, 0, -1):
        counts = privtree.level_counts(fine, cols, rows, level)[active]
        biased = np.maximum(counts - (top - level) * delta, -delta)
        # P[b + Lap(λ) > 0] = 1 - ½exp(-b/λ) for b >= 0, ½exp(b/λ) below
        p_split = np.where(biased >= 0, 1 - 0.5 * np.exp(-biased / lam), 0.5 * np.exp(biased / lam))
        is_leaf = np.array([(level, int(b)) in leaf_key for b in active], dtype=bool)
        total += float(np.log(np.where(is_leaf, 1 - p_split, p_split)).sum())
        active = privtree.children(active[~is_leaf], level, cols, rows)
    return total


def test_a_dense_region_splits_deeper_than_a_sparse_one():
    # 64 x 64 fine cells (R = 6): 200 objects' mass in one 2 x 2 corner block, one object's spread thinly over
    # the opposite half. With ε = 1, δ = λ ln 4 + 1 + 2s ≈ 4.2, so the corner's ancestors (count 200 >> 6 δ) are split
    # down to the fine cells unless Laplace noise of scale λ ≈ 2.3 falls ~170 below; an empty node splits with
    # probability ½exp(-δ/λ) < 1/8, so reaching level 0 there takes 6 such splits in a row (< 8**-6).
    cols = rows = 64
    fine = np.zeros(cols * rows)
    for r in (0, 1):
        fine[r * cols:(r * cols) + 2] = 50.0
    fine[32 * cols:] += 1.0 / (32 * cols)
    leaves = privtree.decompose(fine, cols, rows, 1.0, np.random.default_rng(3))
    leaf = privtree.leaf_of_cell(leaves, cols, rows)
    assert (leaf >= 0).all() and len(np.unique(leaf)) == len(leaves.level)  # a partition
    corner = [0, 1, cols, cols + 1]
    assert (leaves.level[leaf[corner]] == 0).all()
    sparse = leaves.level[leaf[32 * cols:]]
    assert sparse.min() >= 2 and sparse.mean() > 3


def test_the_thresholds_come_from_epsilon_alone():
    # λ ε = (2β - 1)/(β - 1) + R s and δ = λ ln β + 1 + 2s: nothing of the data; on an all-zero grid the root
    # (biased count max(0 - 0·δ, -δ) = 0) splits with probability P[Lap(λ) > 0] = 1/2, and each of its children
    # (biased -δ) with probability ½exp(-δ/λ) = exp(-(1 + 2s)/λ)/8.
    s = privtree.SNAP
    for eps in (0.5, 1.0, 3.0):
        lam, delta = privtree.calibration(eps, 3)
        assert lam * eps == pytest.approx(7 / 3 + 3 * s) and delta == pytest.approx(lam * math.log(4) + 1 + 2 * s)
    cols = rows = 8
    empty = np.zeros(cols * rows)
    rng = np.random.default_rng(11)
    n, eps = 4000, 1.0
    lam, delta = privtree.calibration(eps, privtree.root_level(cols, rows))
    splits = children_split = 0
    for _ in range(n):
        leaves = privtree.decompose(empty, cols, rows, eps, rng)
        root_split = not (len(leaves.level) == 1 and leaves.level[0] == 3)
        splits += root_split
        if root_split:
            children_split += int((leaves.level < 2).any())
    p = 0.5
    assert abs(splits / n - p) < 4 * math.sqrt(p * (1 - p) / n)
    # a split root has 4 children: P[at least one splits] = 1 - (1 - q)^4, q = ½exp(-δ/λ)
    q = 1 - (1 - math.exp(-delta / lam) / 2) ** 4
    assert abs(children_split / splits - q) < 4 * math.sqrt(q * (1 - q) / splits)


def test_each_object_adds_at_most_one_unit_to_every_partition():
    rng = np.random.default_rng(5)
    fine_cols = fine_rows = 32
    objects = np.repeat(np.array(["a", "b", "c"]), [500, 40, 3])
    cells = np.r_[rng.integers(0, 40, 500), rng.integers(0, fine_cols * fine_rows, 40), np.array([5, 5, -1])]
    on = cells >= 0  # count_points drops the points off the fine grid first

    def density(keep: np.ndarray) -> np.ndarray:
        return top_cells_histogram(objects[keep & on], cells[keep & on], 20, fine_cols * fine_rows)

    with_all = density(np.ones(len(objects), bool))
    diff = with_all - density(objects != "a")
    assert (diff >= 0).all() and diff.sum() == pytest.approx(1.0) and np.count_nonzero(diff) == 20
    # every level of the tree, the leaves and each sub-level depth are partitions: o moves each by <= 1 in L1
    leaves = privtree.decompose(with_all, fine_cols, fine_rows, 2.0, rng)
    leaf = privtree.leaf_of_cell(leaves, fine_cols, fine_rows)
    for level in range(privtree.root_level(fine_cols, fine_rows) + 1):
        assert np.abs(privtree.level_counts(diff, fine_cols, fine_rows, level)).sum() <= 1 + 1e-9
    for depth in (0, 1, 2):
        node = privtree.sub_nodes(leaves, leaf, fine_cols, fine_rows, depth)
        assert np.abs(np.bincount(node, weights=diff)).sum() <= 1 + 1e-9


def path_leaves(cols: int, rows: int, stop: int) -> privtree.Leaves:
    """The output that splits the blocks holding fine cell 0 down to level ``stop`` (a leaf there), every other
    child a leaf."""
    top = privtree.root_level(cols, rows)
    levels, blocks = [], []
    for level in range(top, stop, -1):
        kids = privtree.children(np.zeros(1, dtype=np.int64), level, cols, rows)
        levels += [level - 1] * (len(kids) - 1)
        blocks += kids[kids != 0].tolist()
    return privtree.Leaves(np.array([*levels, stop]), np.array([*blocks, 0]))


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_the_decompositions_privacy_loss_stays_under_its_epsilon(eps):
    # worst-case neighbours: one hot cell whose count puts the nodes of its path at their thresholds (the count
    # swept over [0, (R + 1)δ]), the removed object's unit of mass on it, and every output that splits its path
    # down to some level: the loss must stay <= ε and, at the worst, come near it (up to 2/λ ≈ 0.86 ε: a leaf and its
    # parent at the threshold, PrivTree's bound less the geometric tail)
    cols = rows = 16
    top = privtree.root_level(cols, rows)
    _, delta = privtree.calibration(eps, top)
    worst = 0.0
    for count in np.linspace(0, (top + 1) * delta, 41):
        base = np.zeros(cols * rows)
        base[0] = count
        unit = np.zeros(cols * rows)
        unit[0] = 1.0
        for stop in range(top + 1):
            leaves = path_leaves(cols, rows, stop)
            loss = abs(log_prob(base + unit, cols, rows, leaves, eps) - log_prob(base, cols, rows, leaves, eps))
            worst = max(worst, loss)
    assert 0.5 * eps < worst <= eps
    # the unit spread over several paths, outputs drawn from the mechanism
    rng = np.random.default_rng(7)
    base = np.zeros(cols * rows)
    base[rng.choice(cols * rows, 8, replace=False)] = rng.uniform(0, 5 * delta, 8)
    unit = np.zeros(cols * rows)
    unit[rng.choice(cols * rows, 4, replace=False)] = rng.dirichlet(np.ones(4))
    for draw in range(40):
        leaves = privtree.decompose(base + unit, cols, rows, eps, np.random.default_rng(draw))
        assert abs(log_prob(base + unit, cols, rows, leaves, eps) - log_prob(base, cols, rows, leaves, eps)) <= eps


def test_points_are_drawn_from_the_fine_density_inside_their_cell():
    grid = GridSpec(BBOX, 1000.0)
    params = citytrace.CityTraceParams(density_model="privtree", cell_size_m=1000.0, fine_cell_m=125.0)
    geometry = citytrace.geometry_of(grid, params)
    fine = fine_grid(geometry, params)
    assert (fine.n_cols + 7) // 8 == geometry.model.n_cols and (fine.n_rows + 7) // 8 == geometry.model.n_rows
    # the fine cells nest in the model cells
    xs = fine.extent[0] + (np.arange(fine.n_cells) % fine.n_cols + 0.5) * fine.cell_size_m
    ys = fine.extent[1] + (np.arange(fine.n_cells) // fine.n_cols + 0.5) * fine.cell_size_m
    model = citytrace.NoisyModel(params, geometry, {}, privtree.Leaves(np.zeros(0, int), np.zeros(0, int)),
                                 np.zeros(fine.n_cells))
    assert (model_cell_of_fine(model) == geometry.model.cell_of(xs, ys)).all()
    # one fine cell of a central model cell holds all the weight there; its neighbour model cell has none
    cell = geometry.model.n_cols * (geometry.model.n_rows // 2) + geometry.model.n_cols // 2
    inner = np.flatnonzero(model_cell_of_fine(model) == cell)
    weights = np.zeros(fine.n_cells)
    weights[inner[10]] = 3.0
    model = citytrace.NoisyModel(params, geometry, {}, model.leaves, weights)
    assert density_weights(model)[cell] == pytest.approx(3.0)
    from mechanisms.citytrace.points import fine_positions

    cells = np.r_[np.full(2000, cell), np.full(2000, cell + 1)]
    x, y, _, _ = fine_positions(model, cells, grid, np.random.default_rng(2))
    assert (fine.cell_of(x[:2000], y[:2000]) == inner[10]).all()
    assert (geometry.model.cell_of(x, y) == cells).all()
    # uniform in the empty model cell: no pile on its edges (a tenth of the cell's width holds ~a tenth)
    x0 = geometry.model.extent[0] + ((cell + 1) % geometry.model.n_cols) * 1000.0
    near_edge = np.mean((x[2000:] - x0 < 50) | (x0 + 1000 - x[2000:] < 50))
    assert abs(near_edge - 0.1) < 4 * math.sqrt(0.09 / 2000)


def test_a_privtree_release_runs_end_to_end_and_refuses_a_bad_fine_cell():
    with pytest.raises(ParameterError, match="power of two"):
        citytrace.CityTraceParams(density_model="privtree", cell_size_m=1000.0, fine_cell_m=300.0)
    with pytest.raises(ParameterError, match="density_model"):
        citytrace.CityTraceParams(density_model="kdtree")
    rng = np.random.default_rng(0)
    grid = GridSpec(BBOX, 500.0)
    n = 60
    x0, y0, x1, y1 = grid.extent
    rows = []
    for o in range(n):
        cx, cy = rng.uniform(x0 + 3000, x1 - 3000), rng.uniform(y0 + 3000, y1 - 3000)
        for r in range(2):
            k = 30
            xs, ys = cx + np.cumsum(rng.normal(0, 150, k)), cy + np.cumsum(rng.normal(0, 150, k))
            t = pd.Timestamp("2008-02-04T01:00:00Z") + pd.to_timedelta(np.arange(k) * 60 + r * 7200, unit="s")
            rows.append(pd.DataFrame({"object_id": str(o), "traj_id": 2 * o + r, "seq": np.arange(k), "t": t,
                                      "x": xs, "y": ys}))
    points = pd.concat(rows, ignore_index=True)
    params = citytrace.CityTraceParams(density_model="privtree", cell_size_m=500.0, n_synthetic=40,
                                       point_spacing_m=250.0)
    result = citytrace.synthesize(points, grid, params, TDRIVE_WINDOW, rng)
    meta = result.model.metadata()
    assert sum(meta["density_privtree_epsilons"]["sub_levels"]) + meta["density_privtree_epsilons"]["tests"] + \
        meta["density_privtree_epsilons"]["leaves"] == pytest.approx(params.budget()["density"])
    assert result.points["traj_id"].nunique() == 40
    assert (grid.cell_of(result.points["x"].to_numpy(), result.points["y"].to_numpy()) >= 0).all()
    same = result.points["traj_id"].eq(result.points["traj_id"].shift()).to_numpy()[1:]
    step = np.hypot(np.diff(result.points["x"].to_numpy()), np.diff(result.points["y"].to_numpy()))[same]
    assert (step <= 250.0 + 1e-6).all() and (result.points["t"].diff().dt.total_seconds().to_numpy()[1:][same] >= 0).all()
    assert "PrivTree" in citytrace.guarantee(params).statement


def test_the_densest_cells_leaf_count_meets_its_claim_and_a_2x_lie_is_caught():
    # CityTrace's DP-audit pair (mechanisms/citytrace/dp_audit.py): one object more in the densest cell, whose
    # every possible leaf holds all the objects, so its noisy count is one Laplace draw at 0.9·0.95 ε; run at 2ε
    # and audited against ε, the loss (≈ 1.7) is caught
    from audits.dp_audit import audit_pair
    from mechanisms.citytrace.dp_audit import scenarios

    [scenario] = [s for s in scenarios() if s.neighbours == "in the densest cell (PrivTree leaf count)"]
    assert scenario.tight

    def at(epsilon):
        return lambda which, n, rng: scenario.run(which, n, epsilon, rng)

    honest = audit_pair(at(1.0), 300, 2000, np.random.default_rng(11))
    liar = audit_pair(at(2.0), 300, 2000, np.random.default_rng(12))
    assert honest.lower_bound <= 1.0 < liar.lower_bound, (honest, liar)
