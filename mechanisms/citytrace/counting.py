"""True statistics of one partition, each object's contribution bounded (the only code that reads raw data).

ObjTrace's bounding (:mod:`mechanisms.objtrace.counting`): partitions hold whole objects; every histogram gets
each object's own histogram divided by its number of items (L1 norm 1), the record count at most
``max_records_per_object`` per object. Records are written in the fine model cells by DPT's discretisation
(repeats collapsed, jumps filled). The statistics:

- ``length``, ``weekday``, ``hour``, ``pace``: as ObjTrace's, on the fine cells (days of week and hours in the
  dataset's time zone);
- ``end``: how far a record ends from where it starts: the Chebyshev distance between its first and last fine
  cells, in the ``end_edges`` bins;
- ``density``: each object's ``density_cells`` most visited fine cells (by its points), 1/k each
  (:func:`top_cells_histogram`): L1 norm 1 as every histogram, spread over the cells most taxis frequent rather
  than over the points of the few that wait long in one cell; with ``density_model: privtree``, the same over the
  ``fine_cell_m`` cells (a point off the fine grid, at the bbox's edge, counts for none);
- ``moves``: (block, direction) of each move of the record written in blocks of 2**L x 2**L fine cells
  (its first ``max_moves`` moves at that level);
- ``step``: for each fine move of a record, its time relative to the record's pace (seconds per move): the time
  between the points where the record enters a new fine cell, divided by the moves between them, divided by
  the pace, in the ``step_edges`` bins (records with >= 1 move).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms.citytrace.params import HOURS, CityTraceParams, fine_grid
from mechanisms.dpt import Hierarchy, discretise
from mechanisms.dpt.params import N_DIRECTIONS
from mechanisms.objtrace.counting import ObjTraceCounts, length_bin, per_object_histogram
from mechanisms.objtrace.geometry import Geometry, cell_distance
from mechanisms.objtrace.params import WEEKDAYS
from mechanisms.objtrace.quadtree import block_index, blocks_per_row

_NO_JUMP = np.iinfo(np.int64).max // 2


@dataclass
class CityTraceCounts(ObjTraceCounts):
    """ObjTrace's sums over objects of their bounded contributions, and the moves' times relative to their
    record's pace (``step``)."""

    step: np.ndarray



def top_cells_histogram(objects: np.ndarray, cells: np.ndarray, k: int, size: int) -> np.ndarray:
    """``Σ_o`` of 1/k_o on each of the k_o = min(k, n_o) cells holding most of object o's points (n_o its
    distinct cells; ties to the lower cell index): each object's vector is >= 0 with L1 norm 1 and at most k
    non-zero entries, a function of that object's points only (bounded user contribution, each user adding at most
    k keys: Wilson et al., "Differentially Private SQL with Bounded User Contribution", PoPETs 2020, who sample
    a user's keys; here its most visited ones are kept)."""
    if len(cells) == 0:
        return np.zeros(size)
    visits = pd.DataFrame({"object": pd.factorize(objects)[0], "cell": cells}).value_counts().rename("n").reset_index()
    kept = visits.sort_values(["object", "n", "cell"], ascending=[True, False, True], kind="stable").groupby(
        "object").head(k)
    weight = 1.0 / kept.groupby("object")["object"].transform("size").to_numpy()
    return np.bincount(kept["cell"].to_numpy(), weights=weight, minlength=size)


def density_of(df: pd.DataFrame, mcell: np.ndarray, geometry: Geometry, params: CityTraceParams) -> np.ndarray:
    """The ``density`` statistic of the points of ``df`` (module docstring), on the model grid or, for
    ``privtree``, on the fine grid (points in the model grid are in the fine grid: it nests in it)."""
    objects = df["object_id"].astype(str).to_numpy()
    if params.density_model == "privtree":
        fine = fine_grid(geometry, params)
        cells = fine.cell_of(df["x"].to_numpy(), df["y"].to_numpy())
        return top_cells_histogram(objects[cells >= 0], cells[cells >= 0], params.density_cells, fine.n_cells)
    return top_cells_histogram(objects, mcell, params.density_cells, geometry.model.n_cells)


def first_moves(disc, limit: int) -> np.ndarray:
    """Mask of the discretised cells that start one of their record's first ``limit`` moves."""
    pos = np.arange(len(disc.cells)) - np.repeat(disc.offsets[:-1], disc.lengths)
    return (disc.directions >= 0) & (pos < limit)


def step_ratios(traj: np.ndarray, cells: np.ndarray, seconds: np.ndarray, n_cols: int,
                pace: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per cell change of each record (points sorted by record and time): its record, the time per move since
    the previous change (or the record's first point) relative to the record's ``pace`` (indexed by record),
    and its number of moves (the Chebyshev distance between the two cells, as the discretisation fills it)."""
    first = np.r_[True, traj[1:] != traj[:-1]]
    change = ~first & np.r_[False, cells[1:] != cells[:-1]]
    anchor = first | change
    idx = np.flatnonzero(anchor)
    prev = idx[:-1][~first[idx[1:]]]  # the anchor before each change of the same record
    at = idx[1:][~first[idx[1:]]]
    moves = cell_distance(cells[at], cells[prev], n_cols)
    rec_pace = pace.reindex(traj[at]).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):  # a record of pace 0: dropped below
        ratio = (seconds[at] - seconds[prev]) / moves / rec_pace
    ok = np.isfinite(ratio) & (rec_pace > 0)
    return traj[at][ok], ratio[ok], moves[ok]


def count_points(points: pd.DataFrame, geometry: Geometry, params: CityTraceParams,
                 timezone: str = "UTC") -> CityTraceCounts:
    """The bounded statistics of one partition: ``points`` has ``object_id, traj_id, seq, t, x, y`` and holds
    every point of each of its objects; days of week and hours are read in ``timezone`` (the dataset's, public)."""
    df = points.sort_values(["traj_id", "seq"], kind="stable")
    grid = geometry.model
    cells = grid.cell_of(df["x"].to_numpy(), df["y"].to_numpy())
    df = df[cells >= 0].assign(mcell=cells[cells >= 0])
    traj = df["traj_id"].to_numpy()
    first = np.r_[True, traj[1:] != traj[:-1]] if len(df) else np.zeros(0, bool)
    mcell = df["mcell"].to_numpy()
    disc = discretise(traj, mcell, Hierarchy(grid.n_cols, grid.n_rows, 1), _NO_JUMP, 1.0)
    moves_full = disc.lengths - 1
    heads = df[first]
    owner = heads["object_id"].astype(str).to_numpy()  # one per record, in record order
    record = heads["traj_id"].to_numpy()
    spans = df.groupby("traj_id", sort=False)["t"].agg(["first", "last"])
    duration = (spans["last"] - spans["first"]).dt.total_seconds().to_numpy()

    # moves between blocks of 2**L x 2**L fine cells
    level = params.moves_level
    block, n_blocks = block_index(grid.n_cols, grid.n_rows, level)
    per_row = blocks_per_row(grid.n_cols, level)
    coarse = discretise(traj, block[mcell], Hierarchy(per_row, n_blocks // per_row, 1), _NO_JUMP, 1.0)
    moving = first_moves(coarse, params.max_moves)
    moves = per_object_histogram(np.repeat(owner, coarse.lengths)[moving],
                                 coarse.cells[moving] * N_DIRECTIONS + coarse.directions[moving],
                                 n_blocks * N_DIRECTIONS)

    local = pd.to_datetime(heads["t"], utc=True).dt.tz_convert(timezone)
    region = geometry.region.cell_of(heads["x"].to_numpy(), heads["y"].to_numpy())
    hour_key = np.maximum(region, 0) * HOURS + local.dt.hour.to_numpy()
    has_moves = moves_full > 0
    pace = duration[has_moves] / moves_full[has_moves]
    pace_bin = np.searchsorted(np.asarray(params.pace_edges_s), pace, side="right") - 1

    seconds = (pd.to_datetime(df["t"], utc=True) - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    step_rec, ratio, step_moves = step_ratios(traj, mcell, seconds, grid.n_cols,
                                              pd.Series(pace, index=record[has_moves]))
    step_owner = pd.Series(owner, index=record).reindex(step_rec).to_numpy()
    step_bin = np.searchsorted(np.asarray(params.step_edges), ratio, side="right") - 1
    n_records = pd.Series(owner).value_counts().to_numpy()
    return CityTraceCounts(
        records=float(np.minimum(n_records, params.max_records_per_object).sum()),
        length=per_object_histogram(owner, length_bin(moves_full, params.length_edges), len(params.length_edges)),
        end=per_object_histogram(owner, length_bin(cell_distance(disc.cells[disc.offsets[:-1]],
                                                                 disc.cells[disc.offsets[1:] - 1], grid.n_cols),
                                                   params.end_edges), len(params.end_edges)),
        density=density_of(df, mcell, geometry, params),
        moves=moves,
        weekday=per_object_histogram(owner, local.dt.weekday.to_numpy(), WEEKDAYS),
        hour=per_object_histogram(owner, hour_key, geometry.region.n_cells * HOURS),
        pace=per_object_histogram(owner[has_moves], pace_bin, len(params.pace_edges_s)),
        step=per_object_histogram(np.repeat(step_owner, step_moves), np.repeat(step_bin, step_moves),
                                  len(params.step_edges)),
    )
