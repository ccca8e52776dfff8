"""The neighbouring pairs on which the DP audit (:mod:`audits.dp_scenarios`) tests the claim of CityTrace: ε-DP per
object, each object's contribution bounded (:mod:`trajpub.dp_scenario` says how a pair is chosen and what is
measured).

The statistic is read from CityTrace's released model (:func:`mechanisms.citytrace.fit`, on the true counts of
:func:`mechanisms.citytrace.count_points`, where the contribution bound is applied; everything else it publishes is
post-processing of that model), one ``fit`` per run; for a PrivTree density, from its DP step alone
(:func:`mechanisms.citytrace.model.privtree_density`: the leaves and their noisy counts; ``fit`` adds the other
parts' independent noise and the post-processed fine estimate). Each configuration puts 90 % of ε on the part the extra object
moves. The pairs (worst cases for a per-object claim): the object with the most records (3x the cap), an outlier
far from every other object, and an object in the densest cell, the one the PrivTree split depends on: its leaf's
noisy count (tight: the cell is split down to the fine level on both sides, so the count has Laplace noise at the
leaves' ε) and the split itself (the level of the leaf that holds the cell, the dense cell's path placed at its
split thresholds; not tight: PrivTree's bound adds up a leaf and its ancestors, which no one output attains, so the
2ε control is not run on it).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from mechanisms.citytrace import PARTS, CityTraceParams, count_points, fit, geometry_of, privtree
from mechanisms.citytrace.model import NoisyModel, privtree_density
from mechanisms.citytrace.params import fine_grid
from trajpub.dp_scenario import N_OBJECTS, Run, Scenario
from trajpub.grid import GridSpec

_BBOX = (116.30, 39.90, 116.33, 39.92)  # 3 x 3 model cells of 1 km, 11 x 9 fine cells of 250 m
_CAP = 2  # max_records_per_object
_FINE_M = 250.0


def _params(epsilon: float, focus: str, density_model: str = "quadtree", tree_share: float = 0.3
            ) -> CityTraceParams:
    """Small public bins, each object's density on its one most visited cell; 90 % of ε on the part ``focus``,
    the rest split evenly; for a PrivTree density, ``tree_share`` of it on the split tests, no sub-level."""
    shares = tuple(0.9 if p == focus else 0.1 / (len(PARTS) - 1) for p in PARTS)
    return CityTraceParams(epsilon=epsilon, cell_size_m=1000.0, region_size_m=8000.0, quadtree_levels=0,
                           density_cells=1, moves_level=0, end_edges=(0, 1, 2), length_edges=(0, 1, 2, 4),
                           max_records_per_object=_CAP, pace_edges_s=(0, 60, 120, 300), step_edges=(0, 1, 2),
                           shares=shares, density_model=density_model, fine_cell_m=_FINE_M, tree_share=tree_share,
                           sub_levels=0)


@functools.cache
def _geometry():
    return geometry_of(GridSpec(_BBOX, 1000.0), _params(1.0, "records"))


@functools.cache
def _fine() -> GridSpec:
    return fine_grid(_geometry(), _params(1.0, "records", "privtree"))


def _object(object_id: str, fine_cells: list[int], records: int) -> list[dict]:
    """``records`` records of one object through ``fine_cells`` (2 points near each cell's centre), a minute
    apart, record i on day i at noon UTC."""
    fine = _fine()
    x0, y0, _, _ = fine.extent
    cells = np.repeat(fine_cells, 2)
    x = x0 + (cells % fine.n_cols + 0.5) * _FINE_M + np.tile([-20.0, 20.0], len(fine_cells))
    y = y0 + (cells // fine.n_cols + 0.5) * _FINE_M
    rows = []
    for i in range(records):
        start = pd.Timestamp("2020-01-01 12:00", tz="UTC") + pd.Timedelta(days=i)
        rows += [{"object_id": object_id, "traj_id": f"{object_id}/{i}", "seq": j,
                  "t": start + pd.Timedelta(minutes=j), "x": x[j], "y": y[j]} for j in range(len(x))]
    return rows


def _cell(col: int, row: int) -> int:
    return row * _fine().n_cols + col


DENSE = (1, 1)  # the densest fine cell (south-west corner)
OUTLIER = (10, 8)  # a fine cell in the north-east corner, far from every base object


def _base(dense: int) -> list[dict]:
    """N_OBJECTS objects of 2 records: ``dense`` of them stay in the dense cell, the others in the south-west
    model cell's other fine cells (16 of them, so none is as dense)."""
    rows = []
    for i in range(N_OBJECTS):
        cell = DENSE if i < dense else (i % 4, (i // 4) % 4)
        if i >= dense and cell == DENSE:
            cell = (3, 3)
        rows += _object(f"o{i}", [_cell(*cell)], _CAP)
    return rows


def _run(base: list[dict], extra: list[dict], params_of, read) -> Run:
    """Runs of ``fit`` on the counts of ``base`` (dataset 0) and ``base + extra`` (dataset 1), each run's
    statistic ``read(model)``; ``params_of(epsilon)`` configures it."""
    counts = {}

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        params = params_of(epsilon)
        key = (which, params.density_model)
        if key not in counts:  # ε plays no part in the counts
            counts[key] = count_points(pd.DataFrame(base + (extra if which else [])), _geometry(), params)
        return np.array([read(_released(counts[key], params, rng)) for _ in range(n)], dtype=float)

    return run


def _released(counts, params: CityTraceParams, rng: np.random.Generator) -> NoisyModel:
    if params.density_model == "privtree":
        leaves, noisy = privtree_density(np.asarray(counts.density, dtype=float), _fine(), params, rng)
        return NoisyModel(params, _geometry(), noisy, leaves)
    return fit(counts, _geometry(), params, rng)


def _leaf_of(model, cell: int) -> int:
    fine = _fine()
    return int(privtree.leaf_of_cell(model.leaves, fine.n_cols, fine.n_rows)[cell])


def scenarios() -> list[Scenario]:
    """Per-object pairs of CityTrace's model (module docstring)."""
    dense, outlier = _cell(*DENSE), _cell(*OUTLIER)
    most = 3 * _CAP
    # the dense cell's path at its split thresholds at ε = 1: its level-1 block (depth R - 1) holds c objects
    # with c - (R - 1)δ near 0 (δ of the tests' ε = 0.9 · 0.95)
    top = privtree.root_level(_fine().n_cols, _fine().n_rows)
    _, delta = privtree.calibration(0.9 * 0.95, top)
    at_threshold = min(N_OBJECTS - 2, round((top - 1) * delta))

    def quadtree(eps):
        return _params(eps, "density")

    def leaves(eps):  # every leaf that can hold the dense cell holds all N objects: its count is one Laplace
        return _params(eps, "density", "privtree", 0.05)

    def tests(eps):
        return _params(eps, "density", "privtree", 0.95)

    x_model = int(_geometry().model.cell_of(*_xy(outlier))[0])
    pairs = [
        (f"max contribution ({most} records, cap {_CAP}; record count)", _base(N_OBJECTS // 2),
         _object("x", [outlier], most), lambda eps: _params(eps, "records"), lambda m: m.noisy["records"][0], True),
        ("outlier far from the rest (quadtree density)", _base(N_OBJECTS // 2), _object("x", [outlier], _CAP),
         quadtree, lambda m: m.noisy["density"][x_model], True),
        ("outlier far from the rest (PrivTree leaf count)", _base(N_OBJECTS // 2), _object("x", [outlier], _CAP),
         lambda eps: _params(eps, "density", "privtree", 0.5), lambda m: m.noisy["density"][_leaf_of(m, outlier)],
         False),
        ("in the densest cell (PrivTree leaf count)", _base(N_OBJECTS), _object("x", [dense], _CAP), leaves,
         lambda m: m.noisy["density"][_leaf_of(m, dense)], True),
        ("in the densest cell, its path at the split thresholds (PrivTree split)", _base(at_threshold),
         _object("x", [dense], most), tests, lambda m: m.leaves.level[_leaf_of(m, dense)], False),
    ]
    return [Scenario("citytrace", name, "epsilon-DP", "one object", 1, _run(base, extra, params_of, read), tight)
            for name, base, extra, params_of, read, tight in pairs]


def _xy(fine_cell: int) -> tuple[np.ndarray, np.ndarray]:
    fine = _fine()
    x0, y0, _, _ = fine.extent
    return (np.array([x0 + (fine_cell % fine.n_cols + 0.5) * _FINE_M]),
            np.array([y0 + (fine_cell // fine.n_cols + 0.5) * _FINE_M]))
