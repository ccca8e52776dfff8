"""True statistics of one partition, each object's contribution bounded (the only code that reads raw data).

Partitions hold whole objects (the flow reads each partition as a list of objects), so an object's
contribution is bounded here, on the worker: for every histogram, an object adds its own records' histogram
divided by its number of items (L1 norm exactly 1 if it has any item, else 0); to the record count it adds
``min(its records, max_records_per_object)``. The driver sums the partitions (:meth:`ObjTraceCounts.add`) and
noises the sums (:mod:`.model`); adding or removing one object moves each histogram by at most 1 in L1 and the
record count by at most ``max_records_per_object``.

A record is written in the model's reference system (DPT's discretisation, :func:`mechanisms.dpt.discretise`,
one system of ``cell_size_m`` cells): repeats collapsed, jumps filled by a straight line of neighbouring cells, so
every move is one of 8 directions. The statistics:

- ``length``: moves per record, clipped to ``max_moves``, in the ``length_edges`` bins;
- ``end``: the displacement (d_col, d_row) from the record's first to its last model cell, clipped to
  [-D, D]² (D = ``max_displacement``), key ``(d_row + D) * (2D + 1) + d_col + D``;
- ``density``: the model cell of every raw point (points, not visits: a waiting vehicle weighs where it waits);
- ``moves``: (cell, direction) of each of the record's first ``max_moves`` moves (first-order Markov counts);
- ``weekday``: the local day of week (Monday 0) of the record's first point, in the dataset's time zone;
- ``hour``: (start region, local hour of the record's first point);
- ``pace``: the record's duration / its number of moves (records with >= 1 move), in the ``pace_edges_s`` bins.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms.dpt import Hierarchy, discretise
from mechanisms.dpt.params import N_DIRECTIONS
from mechanisms.objtrace.geometry import Geometry
from mechanisms.objtrace.params import HOURS, WEEKDAYS, ObjTraceParams
from trajpub.executor import Counts


@dataclass
class ObjTraceCounts(Counts):
    """Sums over objects of their bounded contributions (dense arrays over public key spaces)."""

    records: float
    length: np.ndarray
    end: np.ndarray
    density: np.ndarray
    moves: np.ndarray
    weekday: np.ndarray
    hour: np.ndarray
    pace: np.ndarray



def per_object_histogram(objects: np.ndarray, keys: np.ndarray, size: int) -> np.ndarray:
    """``Σ_o hist(keys of o) / |keys of o|``: each object's histogram normalised to L1 norm 1."""
    if len(keys) == 0:
        return np.zeros(size)
    codes = pd.factorize(objects)[0]
    weight = 1.0 / np.bincount(codes)[codes]
    return np.bincount(keys, weights=weight, minlength=size)


def length_bin(moves: np.ndarray, edges: tuple[int, ...]) -> np.ndarray:
    """Bin of each number of moves: ``edges[b] <= moves < edges[b + 1]``, the last bin = ``moves >= edges[-1]``."""
    return np.searchsorted(np.asarray(edges), moves, side="right") - 1


def displacement_key(start: np.ndarray, end: np.ndarray, n_cols: int, d_max: int) -> np.ndarray:
    """Key of the displacement from ``start`` to ``end`` cells (row-major, ``n_cols`` columns), clipped."""
    d_col = np.clip(end % n_cols - start % n_cols, -d_max, d_max)
    d_row = np.clip(end // n_cols - start // n_cols, -d_max, d_max)
    return (d_row + d_max) * (2 * d_max + 1) + d_col + d_max


def count_points(points: pd.DataFrame, geometry: Geometry, params: ObjTraceParams,
                 timezone: str = "UTC") -> ObjTraceCounts:
    """The bounded statistics of one partition: ``points`` has ``object_id, traj_id, seq, t, x, y`` and holds
    every point of each of its objects; days of week and hours are read in ``timezone`` (the dataset's, public)."""
    df = points.sort_values(["traj_id", "seq"], kind="stable")
    cells = geometry.model.cell_of(df["x"].to_numpy(), df["y"].to_numpy())
    df = df[cells >= 0].assign(mcell=cells[cells >= 0])
    traj = df["traj_id"].to_numpy()
    first = np.r_[True, traj[1:] != traj[:-1]] if len(df) else np.zeros(0, bool)
    disc = discretise(traj, df["mcell"].to_numpy(), Hierarchy(geometry.model.n_cols, geometry.model.n_rows, 1),
                      np.iinfo(np.int64).max // 2, 1.0)
    moves_full = disc.lengths - 1
    heads = df[first]
    owner = heads["object_id"].astype(str).to_numpy()  # one per record, in discretisation order
    spans = df.groupby("traj_id", sort=False)["t"].agg(["first", "last"])
    duration = (spans["last"] - spans["first"]).dt.total_seconds().to_numpy()

    # the first max_moves moves of each record
    n_cells = geometry.model.n_cells
    pos = np.arange(len(disc.cells)) - np.repeat(disc.offsets[:-1], disc.lengths)
    moving = (disc.directions >= 0) & (pos < params.max_moves)
    move_owner = np.repeat(owner, disc.lengths)[moving]
    moves = per_object_histogram(move_owner, disc.cells[moving] * N_DIRECTIONS + disc.directions[moving],
                                 n_cells * N_DIRECTIONS)

    region = geometry.region.cell_of(heads["x"].to_numpy(), heads["y"].to_numpy())
    local = pd.to_datetime(heads["t"], utc=True).dt.tz_convert(timezone)
    hour_key = np.maximum(region, 0) * HOURS + local.dt.hour.to_numpy()
    has_moves = moves_full > 0
    pace = duration[has_moves] / moves_full[has_moves]
    pace_bin = np.searchsorted(np.asarray(params.pace_edges_s), pace, side="right") - 1
    n_records = pd.Series(owner).value_counts().to_numpy()
    return ObjTraceCounts(
        records=float(np.minimum(n_records, params.max_records_per_object).sum()),
        length=per_object_histogram(owner, length_bin(moves_full, params.length_edges), len(params.length_edges)),
        end=per_object_histogram(owner, displacement_key(disc.cells[disc.offsets[:-1]],
                                                         disc.cells[disc.offsets[1:] - 1], geometry.model.n_cols,
                                                         params.max_displacement), (2 * params.max_displacement + 1) ** 2),
        density=per_object_histogram(df["object_id"].astype(str).to_numpy(), df["mcell"].to_numpy(), n_cells),
        moves=moves,
        weekday=per_object_histogram(owner, local.dt.weekday.to_numpy(), WEEKDAYS),
        hour=per_object_histogram(owner, hour_key, geometry.region.n_cells * HOURS),
        pace=per_object_histogram(owner[has_moves], pace_bin, len(params.pace_edges_s)),
    )
