"""Neighbouring datasets and output statistics for auditing each mechanism's privacy claim with
:mod:`audits.dp_audit`.

Every scenario runs the mechanism's own code (its DP step, below) on a small dataset (tens of objects, a small
grid) and on a neighbour that differs in one object, chosen adversarially:

- "outlier": the extra object goes where no other object goes (its count moves from 0 to 1);
- "duplicate": the extra object repeats an existing one (a count moves from c to c + 1);
- "max contribution": the extra object holds ``RECORDS`` trajectory records on the outlier path, the most a
  record-level mechanism lets one object contribute here (ε per record, so up to RECORDS·ε per object);
  for ObjTrace, whose claim is per object, 3× its per-object record cap (it must stay within ε).

The statistic is the noisy value of the count the extra object moves, read from the DP part of the mechanism
(the noisy tree of ``build_tree``, the noisy model of ``fit``, the noisy synopsis of ``noisy_synopsis``, run
on the true counts of the pair): everything the mechanisms release is post-processing of those, so a bound
on them is a bound on the release, and skipping the synthesis keeps 10⁴ runs affordable. Runs are batched where
the mechanism allows it exactly (see each ``_run``): one call on R disjoint copies of the dataset gives R
independent draws of the statistic. The configurations put most of ε on that single count
(height 1, a budget split that favours it), so the claim is nearly tight there and a mechanism that used half
the noise it claims (run at 2ε, audited against ε) is caught.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from audits.dp_audit import AuditOutcome, audit_pair
from trajpub.errors import ParameterError

RECORDS = 3  # records of the "max contribution" object
N_OBJECTS = 20

Run = Callable[[int, int, float, np.random.Generator], np.ndarray]


@dataclass(frozen=True)
class Scenario:
    """One neighbouring pair of one mechanism. ``run(which, n, epsilon, rng)`` returns n statistics of
    independent runs on dataset ``which`` (0 or 1) with the mechanism configured for ``epsilon``."""

    mechanism: str
    neighbours: str
    model: str  # "epsilon-DP", "epsilon-LDP", "Pufferfish", "(k-Psi)"
    unit: str  # the unit the claim is stated in: the claim for this pair is the mechanism's ε
    object_factor: float  # the object-level claim for this pair: ε·object_factor (group privacy)
    run: Run
    tight: bool  # the negative control (run at 2ε) should be caught


def _batched(n: int, per_call: int, call: Callable[[int], np.ndarray]) -> np.ndarray:
    """n statistics from calls that each return up to ``per_call`` independent ones."""
    out = [call(min(per_call, n - done)) for done in range(0, n, per_call)]
    return np.concatenate(out) if out else np.empty(0)


def _record_level(mechanism: str, outlier: Run, duplicate: Run, most: Run) -> list[Scenario]:
    """The three pairs of a record-level ε-DP mechanism; only the single-record ones are tight."""
    unit = "one trajectory record"
    return [Scenario(mechanism, "outlier", "epsilon-DP", unit, 1, outlier, True),
            Scenario(mechanism, "duplicate", "epsilon-DP", unit, 1, duplicate, True),
            Scenario(mechanism, f"max contribution ({RECORDS} records)", "epsilon-DP", unit, RECORDS, most,
                     False)]


# -- prefix tree (Chen, Fung, Desai 2012) -------------------------------------------------------------------

_PT_LOCATIONS, _PT_OUTLIER, _PT_BATCH = 8, 7, 2000


def _pt_base() -> list[list[int]]:
    rng = np.random.default_rng(20121)
    return [[int(v)] for v in rng.integers(0, _PT_LOCATIONS - 2, N_OBJECTS)]


def _prefix_tree_run(extra: list[list[int]], label: int) -> Run:
    """Height 1 (one level: ε on every location count), literal expansion, no consistency step. A batch of R
    runs is one tree over R disjoint blocks of ``_PT_LOCATIONS`` locations, each holding a copy of the dataset:
    every level-1 candidate gets its own noise (explicit or Thm 4.1) with a scale that does not depend on the
    number of locations, so the R block counts are R independent runs."""
    from mechanisms.prefix_tree import PrefixTreeParams, build_tree, count_level

    datasets = (_pt_base(), _pt_base() + extra)

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        params = PrefixTreeParams(epsilon=epsilon, height=1, expansion_policy="literal", consistency="none")

        def call(r: int) -> np.ndarray:
            records = [[loc + b * _PT_LOCATIONS for loc in rec] for b in range(r) for rec in datasets[which]]
            offsets = np.concatenate(([0], np.cumsum([len(x) for x in records]))).astype(np.int64)
            locs = np.concatenate(records).astype(np.int64)
            n_loc = r * _PT_LOCATIONS
            tree = build_tree(lambda level, tr: count_level(offsets, locs, n_loc, level, tr), n_loc, params, rng)
            out = np.full(r, -np.inf)
            level1 = np.flatnonzero((tree.depth == 1) & (tree.label % _PT_LOCATIONS == label))
            out[tree.label[level1] // _PT_LOCATIONS] = tree.count[level1]
            return out

        return _batched(n, _PT_BATCH, call)

    return run


def prefix_tree_scenarios() -> list[Scenario]:
    dup = _pt_base()[0]
    return _record_level("prefix_tree", _prefix_tree_run([[_PT_OUTLIER]], _PT_OUTLIER),
                         _prefix_tree_run([dup], dup[0]), _prefix_tree_run([[_PT_OUTLIER]] * RECORDS, _PT_OUTLIER))


# -- DPT (He et al. 2015) -----------------------------------------------------------------------------------

_DPT_COLS, _DPT_ROWS, _DPT_BATCH = 8, 6, 1000


def _dpt_base() -> list[list[tuple[int, int]]]:
    """N_OBJECTS random walks of 4 fixes, (col, row), in the left half of an 8 × 6 grid."""
    rng = np.random.default_rng(20151)
    walks = []
    for _ in range(N_OBJECTS):
        c, r = int(rng.integers(0, _DPT_COLS // 2)), int(rng.integers(0, _DPT_ROWS))
        walk = []
        for _ in range(4):
            walk.append((c, r))
            c = int(np.clip(c + rng.integers(-1, 2), 0, _DPT_COLS // 2 - 1))
            r = int(np.clip(r + rng.integers(-1, 2), 0, _DPT_ROWS - 1))
        walks.append(walk)
    return walks


def _dpt_run(extra_kind: str) -> Run:
    """One reference system, start histograms on 90 % of ε. The extra object stays two fixes in one cell: the
    outlier corner (right half, never visited), or the first walk's start ("duplicate"). A batch of R runs is
    one model over R grids side by side (no move crosses a block; every start cell has its own noise)."""
    from mechanisms.dpt import DptParams, Hierarchy, fit
    from mechanisms.dpt.mechanism import count_points

    base = _dpt_base()
    cell = (_DPT_COLS - 1, _DPT_ROWS - 1) if extra_kind != "duplicate" else base[0][0]
    datasets = (base, base + [[cell, cell]] * (RECORDS if extra_kind == "max" else 1))

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        params = DptParams(epsilon=epsilon, n_levels=1, max_order=1, select_fraction=0.02, length_fraction=0.03,
                           start_fraction=0.9, n_synthetic=1)

        def call(r: int) -> np.ndarray:
            hierarchy = Hierarchy(_DPT_COLS * r, _DPT_ROWS, 1)
            rows = [(b * len(datasets[which]) + i, s, row * hierarchy.n_cols + b * _DPT_COLS + col)
                    for b in range(r) for i, walk in enumerate(datasets[which]) for s, (col, row) in enumerate(walk)]
            counts = count_points(pd.DataFrame(rows, columns=["traj_id", "seq", "cell"]), hierarchy, params)
            starts = fit(counts, hierarchy, params, rng).noisy_starts[0]
            return starts[cell[1] * hierarchy.n_cols + np.arange(r) * _DPT_COLS + cell[0]]

        return _batched(n, _DPT_BATCH, call)

    return run


def dpt_scenarios() -> list[Scenario]:
    return _record_level("dpt", _dpt_run("outlier"), _dpt_run("duplicate"), _dpt_run("max"))


# -- AdaTrace (Gursoy et al. 2018) --------------------------------------------------------------------------

_ADA_TILE, _ADA_TILES = 4000.0, 8  # a batch: 8 × 8 tiles of 4 km, each a 2 × 2 top grid


def _ada_base() -> list[np.ndarray]:
    """N_OBJECTS walks of 5 points in the lower-left top cell of a 4 km tile (metres)."""
    rng = np.random.default_rng(20181)
    return [np.clip(rng.uniform(100, 1900, 2) + np.cumsum(rng.normal(0, 150, (5, 2)), axis=0), 1, 1999)
            for _ in range(N_OBJECTS)]


def _adatrace_run(extra_kind: str) -> Run:
    """Trip counts on 90 % of ε. The extra trajectory (two fixes at one point) is a trip from the outlier top
    cell to itself, or repeats the first walk's start ("duplicate"). A batch is one synopsis over 8 × 8 tiles
    (top level 16), each tile a copy of the dataset: every trip count gets its own noise, of a scale that does
    not depend on the extent, so the tiles' counts are independent runs."""
    from mechanisms.adatrace import (
        AdaTraceParams,
        Trajectories,
        adaptive_grid,
        feature_counts,
        noisy_synopsis,
        noisy_top_density,
        top_density,
        top_grid,
    )

    base = _ada_base()
    point = base[0][0] if extra_kind == "duplicate" else np.array([3500.0, 3500.0])
    datasets = (base, base + [np.array([point, point])] * (RECORDS if extra_kind == "max" else 1))
    level = 2 * _ADA_TILES
    extent = (0.0, 0.0, _ADA_TILE * _ADA_TILES, _ADA_TILE * _ADA_TILES)
    tiles = np.array([(i, j) for j in range(_ADA_TILES) for i in range(_ADA_TILES)], dtype=float) * _ADA_TILE
    frames = []
    for walks in datasets:
        xy = np.concatenate([w + t for t in tiles for w in walks])
        lengths = np.array([len(w) for _ in tiles for w in walks])
        frames.append(pd.DataFrame({"traj_id": np.repeat(np.arange(len(lengths)), lengths),
                                    "seq": np.concatenate([np.arange(k) for k in lengths]),
                                    "x": xy[:, 0], "y": xy[:, 1]}))
    top = ((tiles[:, 1] + point[1]) // (_ADA_TILE / 2)).astype(np.int64) * level \
        + ((tiles[:, 0] + point[0]) // (_ADA_TILE / 2)).astype(np.int64)
    trip = top * level ** 2 + top

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        params = AdaTraceParams(epsilon=epsilon, top_level=level, max_subdivision=2, max_length=10,
                                n_synthetic=1, budget_split=(0.04, 0.03, 0.9, 0.03))
        trajs = Trajectories.from_frame(frames[which])
        true_top = top_density(trajs, top_grid(extent, params))

        def call(r: int) -> np.ndarray:
            noisy_top = noisy_top_density(true_top, params, rng)
            grid = adaptive_grid(extent, noisy_top, params)
            counts = feature_counts(trajs, grid, params.transition_cap, params.max_length)
            return noisy_synopsis(grid, noisy_top, counts, params, rng).noisy_trips.ravel()[trip[:r]]

        return _batched(n, len(tiles), call)

    return run


def adatrace_scenarios() -> list[Scenario]:
    return _record_level("adatrace", _adatrace_run("outlier"), _adatrace_run("duplicate"), _adatrace_run("max"))


# -- ObjTrace: ε-DP per object, each object's contribution bounded ------------------------------

_OT_BBOX = (116.30, 39.90, 116.33, 39.92)  # 3 × 3 model cells of 1 km
_OT_CAP = 2  # max_records_per_object
_OT_VISITED, _OT_OUTLIER = (0, 1, 3, 4), 5  # model cells the base objects use; one nobody uses
_OT_PACE_EDGES = (0, 60, 120, 300, 600, 1200)
_OT_BATCH = 1000


def _ot_params(epsilon: float, focus: str):
    """Small public bins; 90 % of ε on the part ``focus``, the rest split evenly."""
    from mechanisms.objtrace import PARTS, ObjTraceParams

    shares = tuple(0.9 if p == focus else 0.1 / (len(PARTS) - 1) for p in PARTS)
    return ObjTraceParams(epsilon=epsilon, cell_size_m=1000.0, region_size_m=8000.0, quadtree_levels=0,
                          max_displacement=1, length_edges=(0, 1, 2, 4), max_records_per_object=_OT_CAP,
                          pace_edges_s=_OT_PACE_EDGES, shares=shares)


@functools.cache
def _ot_geometry():
    from mechanisms.objtrace import geometry_of
    from trajpub.grid import GridSpec

    return geometry_of(GridSpec(_OT_BBOX, 1000.0), _ot_params(1.0, "records"))


def _ot_object(object_id: str, cells: list[int], hours: list[float], pace_s: float, records: int) -> list[dict]:
    """``records`` records of one object, each through ``cells`` (3 points per cell, near its centre), record
    i starting at ``hours[i % len(hours)]`` UTC on day i, its points evenly spaced so that a record that moves
    takes ``pace_s`` seconds per move."""
    from mechanisms.objtrace.geometry import centre_xy

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
    from mechanisms.objtrace import ObjTraceCounts, count_points, fit

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

        return _batched(n, _OT_BATCH, call)

    return run


def objtrace_scenarios() -> list[Scenario]:
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


# -- FASTPub's local randomiser (Alg. 1, RESPOND) -----------------------------------------------------------

def _fastpub_run() -> Run:
    from mechanisms.fastpub.client import respond
    from mechanisms.fastpub.params import noise_factor

    candidates = np.array([[0, 1], [1, 2], [5, 6], [6, 7]])
    trajectories = (np.array([0, 1, 2]), np.array([5, 6, 7]))  # hold disjoint halves of the candidates
    target = np.array([0, 0, 1, 1])  # the true answers of trajectory 1

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        eta = noise_factor(epsilon, len(candidates))
        bits = respond(trajectories[which], eta, np.tile(candidates, (n, 1)), rng).reshape(n, len(candidates))
        return (bits == target).sum(axis=1).astype(float)

    return run


def fastpub_scenarios() -> list[Scenario]:
    return [Scenario("fastpub", "two trajectories of one client, all answers differ", "epsilon-LDP",
                     "one client's trajectory", 1, _fastpub_run(), True)]


# -- FGS-Pufferfish (Ou et al. 2018): not DP; its secrets are two objects' temporal correlations -------------

def _fgs_run(statistic: str) -> Run:
    from mechanisms.fgs_pufferfish.mechanism import release_object
    from mechanisms.fgs_pufferfish.params import FgsParams
    from mechanisms.fgs_pufferfish.privacy import noise_calibration, object_correlation
    from mechanisms.fgs_pufferfish.simulate import ar1_series

    rng = np.random.default_rng(20182)
    # a jittery object (correlation time 1 slot) and a smooth one (8 slots), 6 days of 32 slots, metres
    objects = [np.moveaxis(ar1_series((6, 2), 32, tau, rng), 1, 2) * 300.0 for tau in (1.0, 8.0)]

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        params = FgsParams(n_slots=32, epsilon=epsilon)
        b_c0 = noise_calibration(params, np.stack([object_correlation(o, params) for o in objects]))
        out = np.empty(n)
        for i in range(n):
            released = release_object(objects[which], params, rng, b_c0=b_c0)[0]
            if statistic == "mean":  # what any reader sees: the published mean trajectory's first x
                out[i] = released.mean[0, 0]
            else:  # the claim's own adversary: the lag-1 correlation of the released x deviations
                x = released.deviation[..., 0]
                out[i] = (x[:, 1:] * x[:, :-1]).mean() / max((x * x).mean(), 1e-300)
        return out

    return run


def fgs_scenarios() -> list[Scenario]:
    unit = "the temporal correlation of one object"
    return [Scenario("fgs_pufferfish", "the two objects (secret pair), lag-1 correlation statistic", "Pufferfish",
                     unit, 1, _fgs_run("correlation"), False),
            Scenario("fgs_pufferfish", "the two objects (secret pair), published-mean statistic", "Pufferfish",
                     unit, 1, _fgs_run("mean"), False)]


# -- (k-Psi)-anonymity (Chen, Li, Zhang 2020): not DP; ε per location of its Laplace perturbation ------------

def _kpsi_run() -> Run:
    from mechanisms.kpsi_anonymity import KPsiParams, anonymize

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        params = KPsiParams(k=4, epsilon=epsilon, epsilon_semantics="per_location", psi_mode="constant",
                            delta_m=200.0, road_aware=False)
        x = 1000.0 + 100.0 * which  # the real location, moved 100 m east in the neighbour (inside Ψ)
        frame = pd.DataFrame({"object_id": np.arange(n), "traj_id": 1, "seq": 0,
                              "t": pd.Timestamp("2020-01-01", tz="UTC"), "x": x, "y": 1000.0})
        published = anonymize(frame, None, params, rng).published  # one independent set per object
        return published.groupby("set_id")["x"].mean().to_numpy()  # the set's centroid

    return run


def kpsi_scenarios() -> list[Scenario]:
    return [Scenario("kpsi_anonymity", "the real location moved 100 m inside its disc", "(k-Psi)",
                     "one location", 1, _kpsi_run(), False)]


def all_scenarios() -> list[Scenario]:
    """Every mechanism's scenarios."""
    return (prefix_tree_scenarios() + dpt_scenarios() + adatrace_scenarios() + objtrace_scenarios()
            + fastpub_scenarios() + fgs_scenarios() + kpsi_scenarios())


@dataclass(frozen=True)
class AuditedClaim:
    """One scenario run at ``run_epsilon`` and audited against the claim the mechanism makes at ``epsilon``
    (in the scenario's unit, and for the whole object)."""

    scenario: Scenario
    epsilon: float
    run_epsilon: float
    claim: float
    object_claim: float
    outcome: AuditOutcome


def audit_mechanism(mechanism: str, epsilon: float, *, run_epsilon: float | None = None, tight_only: bool = False,
                    selection_runs: int = 2000, runs: int = 10_000, seed: int = 0) -> list[AuditedClaim]:
    """Every scenario of ``mechanism`` audited against its claim at ``epsilon`` (the small datasets of this
    module, not a release's data). ``run_epsilon`` (default ``epsilon``) is the ε the mechanism really runs
    at: 2·``epsilon`` is the negative control, meaningful on the ``tight`` scenarios. For the non-DP claims
    (``fgs_pufferfish``, ``kpsi_anonymity``) this is the empirical lower bound a review can print next to the
    claimed ε."""
    chosen = [s for s in all_scenarios() if s.mechanism == mechanism and (s.tight or not tight_only)]
    if not chosen and not tight_only:
        raise ParameterError(f"no audit scenario for mechanism {mechanism!r}", "dp_scenarios.audit_mechanism")
    run_eps = epsilon if run_epsilon is None else run_epsilon
    rng = np.random.default_rng(seed)
    out = []
    for s in chosen:
        outcome = audit_pair(lambda which, n, r, s=s: s.run(which, n, run_eps, r), selection_runs, runs, rng)
        out.append(AuditedClaim(s, epsilon, run_eps, epsilon, epsilon * s.object_factor, outcome))
    return out
