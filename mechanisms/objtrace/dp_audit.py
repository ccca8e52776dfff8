"""The neighbouring pairs on which the DP audit (:mod:`audits.dp_scenarios`) tests the claim of
ObjTrace: ε-DP per object, each object's contribution bounded
(:mod:`trajpub.dp_scenario` says how a pair is chosen and what is measured)."""

from __future__ import annotations

import dataclasses
import functools
import types

import numpy as np
import pandas as pd

from mechanisms.objtrace import PARTS, ObjTraceCounts, ObjTraceParams, count_points, fit, geometry_of
from mechanisms.objtrace.geometry import centre_xy
from trajpub.dp_scenario import N_OBJECTS, Run, Scenario, batched
from trajpub.grid import GridSpec

_OT_BBOX = (116.30, 39.90, 116.33, 39.92)  # 3 × 3 model cells of 1 km
_OT_CAP = 2  # max_records_per_object
_OT_VISITED, _OT_OUTLIER = (0, 1, 3, 4), 5  # model cells the base objects use; one nobody uses
_OT_PACE_EDGES = (0, 60, 120, 300, 600, 1200)
_OT_BATCH = 1000


def _ot_params(epsilon: float, focus: str):
    """Small public bins; 90 % of ε on the part ``focus``, the rest split evenly."""
    shares = tuple(0.9 if p == focus else 0.1 / (len(PARTS) - 1) for p in PARTS)
    return ObjTraceParams(epsilon=epsilon, cell_size_m=1000.0, region_size_m=8000.0, quadtree_levels=0,
                          max_displacement=1, length_edges=(0, 1, 2, 4), max_records_per_object=_OT_CAP,
                          pace_edges_s=_OT_PACE_EDGES, shares=shares)


@functools.cache
def _ot_geometry():
    return geometry_of(GridSpec(_OT_BBOX, 1000.0), _ot_params(1.0, "records"))


def _ot_object(object_id: str, cells: list[int], hours: list[float], pace_s: float, records: int) -> list[dict]:
    """``records`` records of one object, each through ``cells`` (3 points per cell, near its centre), record
    i starting at ``hours[i % len(hours)]`` UTC on day i, its points evenly spaced so that a record that moves
    takes ``pace_s`` seconds per move."""
    x, y = centre_xy(_ot_geometry().model, np.repeat(cells, 3))
    jitter = np.tile([-200.0, 0.0, 200.0], len(cells))
    step_s = pace_s * max(len(cells) - 1, 1) / (len(x) - 1)
    rows = []
    for i in range(records):
        start = pd.Timestamp("2020-01-01", tz="UTC") + pd.Timedelta(days=i, hours=hours[i % len(hours)])
        rows += [{"object_id": object_id, "traj_id": f"{object_id}/{i}", "seq": j,
                  "t": start + pd.Timedelta(seconds=j * step_s), "x": x[j] + jitter[j], "y": y[j]}
                 for j in range(len(x))]
    return rows


def _ot_base_objects() -> list[tuple[list[int], list[float], float]]:
    """N_OBJECTS objects (cells, start hours, pace) of 2 records (the cap) each: half stay in one cell, half
    move to a neighbouring cell at 60–120 s per move; they start between 08:00 and 18:00."""
    rng = np.random.default_rng(20261)
    neighbour = {0: 1, 1: 0, 3: 4, 4: 3}
    objects = []
    for i in range(N_OBJECTS):
        cell = int(rng.choice(_OT_VISITED))
        objects.append(([cell] if i % 2 == 0 else [cell, neighbour[cell]], list(rng.uniform(8, 18, 2)),
                        float(rng.uniform(60, 120))))
    return objects


def _ot_base() -> list[dict]:
    return [r for i, (cells, hours, pace) in enumerate(_ot_base_objects())
            for r in _ot_object(f"o{i}", cells, hours, pace, _OT_CAP)]


def _objtrace_run(extra: list[dict], part: str, key: int) -> Run:
    """The noisy value of bin ``key`` of part ``part`` of ObjTrace's noisy model (:func:`mechanisms.objtrace.fit`,
    the DP step: the synthesis is post-processing of it), with 90 % of ε on that part, from the true counts of
    :func:`mechanisms.objtrace.count_points` (where the contribution bound is applied). A batch of R runs is one
    fit on R copies of those counts, as R disjoint copies of the dataset would give them: every value of every
    part (the record count included) gets its own noise at the part's scale (the density as R model grids stacked
    vertically, at quadtree level 0, the only shape fit reads from the geometry); only the snapping grid of
    :func:`trajpub.noise.laplace_real` depends on the number of values, and it keeps ε exact at any size."""
    model = _ot_geometry().model
    counts = [count_points(pd.DataFrame(rows), _ot_geometry(), _ot_params(1.0, part))  # ε plays no part here
              for rows in (_ot_base(), _ot_base() + extra)]

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        params = _ot_params(epsilon, part)

        def call(r: int) -> np.ndarray:
            tiled = ObjTraceCounts(**{f.name: np.tile(np.atleast_1d(getattr(counts[which], f.name)), r)
                                      for f in dataclasses.fields(ObjTraceCounts)})
            stacked = types.SimpleNamespace(model=types.SimpleNamespace(n_cols=model.n_cols, n_rows=model.n_rows * r))
            return fit(tiled, stacked, params, rng).noisy[part].reshape(r, -1)[:, key]

        return batched(n, _OT_BATCH, call)

    return run


def scenarios() -> list[Scenario]:
    """Per-object pairs, all tight at ε: the claim is per object, so even the object with 3× the record cap
    must stay within ε (its record count moves by the cap m, noised at m / ε_records)."""
    most = 3 * _OT_CAP
    pace_bin = len(_OT_PACE_EDGES) - 1  # ≥ 1200 s per move; the base objects take 60–120 s
    stay = _ot_base_objects()[0]  # an object that stays in one cell
    pairs = [
        ("outlier (point density)", _ot_object("x", [_OT_OUTLIER], [12.0], 90.0, _OT_CAP), "density", _OT_OUTLIER),
        ("duplicate (point density)", _ot_object("x", *stay, _OT_CAP), "density", stay[0][0]),
        (f"max contribution ({most} records, cap {_OT_CAP}; record count)",
         _ot_object("x", [_OT_OUTLIER], [12.0], 90.0, most), "records", 0),
        (f"max contribution ({most} records; point density)",
         _ot_object("x", [_OT_OUTLIER], [12.0], 90.0, most), "density", _OT_OUTLIER),
        ("outlier start hour (03:00; timestamps)", _ot_object("x", [0], [3.25], 90.0, _OT_CAP), "hour", 3),
        ("outlier pace (1500 s per move; timestamps)", _ot_object("x", [0, 1], [12.0], 1500.0, _OT_CAP), "pace",
         pace_bin),
    ]
    return [Scenario("objtrace", name, "epsilon-DP", "one object", 1, _objtrace_run(extra, part, key), True)
            for name, extra, part, key in pairs]
