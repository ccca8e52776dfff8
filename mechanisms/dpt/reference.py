"""Hierarchical reference systems (DPT, Sec. 3 of He et al. 2015, as we implement them).

System k is the release grid coarsened by 2**k in each direction: its cell (row_k, col_k) is the block of base
cells with ``row >> k == row_k`` and ``col >> k == col_k``. A trajectory is written in ONE system, chosen from its
own speed profile (a function of that trajectory alone, so the choice costs no privacy budget): the finest system
in which at most ``jump_tolerance`` of its moves jump over a cell. In that system repeated cells are collapsed
(the object stays), remaining jumps are filled by a straight line of neighbouring cells, and the sequence is
truncated to its first ``max_transitions`` moves. Every move is then one of the eight neighbour moves
(:data:`~mechanisms.dpt.params.DIRECTIONS`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.dpt.params import DIRECTIONS, N_DIRECTIONS

# direction index of a move (d_col, d_row) in {-1,0,1}²: table[(d_col+1)*3 + (d_row+1)]; -1 for "no move"
_DIRECTION_OF = np.full(9, -1, dtype=np.int64)
for _i, (_dc, _dr) in enumerate(DIRECTIONS):
    _DIRECTION_OF[(_dc + 1) * 3 + (_dr + 1)] = _i
_DCOL = np.array([d[0] for d in DIRECTIONS], dtype=np.int64)
_DROW = np.array([d[1] for d in DIRECTIONS], dtype=np.int64)


@dataclass(frozen=True)
class Hierarchy:
    """The public geometry: the base grid's ``n_cols`` × ``n_rows`` and the number of systems."""

    n_cols: int
    n_rows: int
    n_levels: int

    def shape(self, level: int) -> tuple[int, int]:
        """``(n_cols_k, n_rows_k)`` of system ``level``."""
        f = 1 << level
        return -(-self.n_cols // f), -(-self.n_rows // f)

    def n_cells(self, level: int) -> int:
        c, r = self.shape(level)
        return c * r

    def move(self, level: int, cells: np.ndarray, direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The cells one move away in ``direction``, and whether they are inside system ``level``."""
        n_c, n_r = self.shape(level)
        col = cells % n_c + _DCOL[direction]
        row = cells // n_c + _DROW[direction]
        inside = (col >= 0) & (col < n_c) & (row >= 0) & (row < n_r)
        return np.where(inside, row * n_c + col, -1), inside

    def block_centre(self, level: int, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Centres of system-``level`` cells in base-cell units (column, row), the block clipped to the grid."""
        n_c, _ = self.shape(level)
        f = 1 << level
        col, row = cells % n_c, cells // n_c
        c_lo, r_lo = col * f, row * f
        c_hi, r_hi = np.minimum(c_lo + f, self.n_cols), np.minimum(r_lo + f, self.n_rows)
        return (c_lo + c_hi) / 2.0, (r_lo + r_hi) / 2.0


@dataclass(frozen=True)
class Discretised:
    """Trajectories in their reference systems, CSR: trajectory j is ``cells[offsets[j]:offsets[j+1]]`` in
    system ``level[j]``; ``directions[i]`` is the move from ``cells[i]`` to ``cells[i+1]`` (-1 at a
    trajectory's last cell)."""

    level: np.ndarray
    offsets: np.ndarray
    cells: np.ndarray
    directions: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def choose_levels(traj_start: np.ndarray, col: np.ndarray, row: np.ndarray, n_levels: int,
                  jump_tolerance: float) -> np.ndarray:
    """The system of each trajectory: the finest k where jumps (Chebyshev step > 1) ≤ tolerance × moves.

    ``traj_start`` flags the first fix of each trajectory (points sorted by trajectory then time); ``col``,
    ``row`` are base-grid indices. A trajectory meeting the rule nowhere goes to the coarsest system.
    """
    n_traj = int(traj_start.sum())
    owner = np.cumsum(traj_start) - 1
    level = np.full(n_traj, n_levels - 1, dtype=np.int64)
    undecided = np.ones(n_traj, dtype=bool)
    same = ~traj_start[1:]
    for k in range(n_levels - 1):
        ck, rk = col >> k, row >> k
        step = np.maximum(np.abs(np.diff(ck)), np.abs(np.diff(rk)))
        step = np.where(same, step, 0)
        moves = np.bincount(owner[1:], weights=step > 0, minlength=n_traj)
        jumps = np.bincount(owner[1:], weights=step > 1, minlength=n_traj)
        ok = undecided & (jumps <= jump_tolerance * moves)
        level[ok] = k
        undecided &= ~ok
    return level


def discretise(traj_ids: np.ndarray, base_cells: np.ndarray, hierarchy: Hierarchy, max_transitions: int,
               jump_tolerance: float) -> Discretised:
    """Points (sorted by trajectory, then time; base cells ≥ 0) to :class:`Discretised` trajectories.

    Pure per-trajectory transformation: the result for one trajectory depends on that trajectory only.
    """
    traj_ids = np.asarray(traj_ids)
    base_cells = np.asarray(base_cells, dtype=np.int64)
    if len(base_cells) == 0:
        e = np.empty(0, np.int64)
        return Discretised(e, np.zeros(1, np.int64), e, e)
    if base_cells.min() < 0:
        raise ValueError("points outside the grid (cell -1) must be dropped before discretisation")
    traj_start = np.r_[True, traj_ids[1:] != traj_ids[:-1]]
    col, row = base_cells % hierarchy.n_cols, base_cells // hierarchy.n_cols
    level_t = choose_levels(traj_start, col, row, hierarchy.n_levels, jump_tolerance)
    owner = np.cumsum(traj_start) - 1
    lvl = level_t[owner]
    ck, rk = col >> lvl, row >> lvl
    # collapse repeats (the object stays in its cell)
    keep = traj_start.copy()
    keep[1:] |= (ck[1:] != ck[:-1]) | (rk[1:] != rk[:-1])
    ck, rk, owner, lvl, first = ck[keep], rk[keep], owner[keep], lvl[keep], traj_start[keep]
    # fill jumps: a step of Chebyshev length d > 1 gets d−1 interpolated cells after its origin
    nxt_same = np.r_[~first[1:], False]
    dc = np.where(nxt_same, np.r_[np.diff(ck), 0], 0)
    dr = np.where(nxt_same, np.r_[np.diff(rk), 0], 0)
    d = np.maximum(np.abs(dc), np.abs(dr))
    emit = np.maximum(d, 1)  # the point itself plus d−1 interpolations
    src = np.repeat(np.arange(len(ck)), emit)
    j = np.arange(len(src)) - np.repeat(np.cumsum(emit) - emit, emit)  # 0 for the point itself
    frac = np.where(d[src] > 0, j / np.maximum(d[src], 1), 0.0)
    c_out = ck[src] + np.floor(dc[src] * frac + 0.5).astype(np.int64)
    r_out = rk[src] + np.floor(dr[src] * frac + 0.5).astype(np.int64)
    owner_out = owner[src]
    # truncate to the first max_transitions moves (max_transitions + 1 cells)
    start_out = np.r_[True, owner_out[1:] != owner_out[:-1]]
    starts = np.flatnonzero(start_out)
    pos = np.arange(len(owner_out)) - np.repeat(starts, np.diff(np.r_[starts, len(owner_out)]))
    keep = pos <= max_transitions
    c_out, r_out, owner_out, start_out = c_out[keep], r_out[keep], owner_out[keep], start_out[keep]
    lvl_out = level_t[owner_out]
    n_cols_k = -(-hierarchy.n_cols // (1 << lvl_out))
    cells = r_out * n_cols_k + c_out
    last = np.r_[start_out[1:], True]
    step_c = np.where(last, 0, np.r_[np.diff(c_out), 0])
    step_r = np.where(last, 0, np.r_[np.diff(r_out), 0])
    directions = np.where(last, -1, _DIRECTION_OF[np.clip((step_c + 1) * 3 + (step_r + 1), 0, 8)])
    if np.any(directions[~last] < 0):
        raise AssertionError("discretisation left a move that is not to a neighbouring cell")
    starts = np.flatnonzero(start_out)
    offsets = np.r_[starts, len(cells)].astype(np.int64)
    return Discretised(level_t, offsets, cells.astype(np.int64), directions.astype(np.int64))


def turn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The turn between direction indices a and b in units of 45 degrees (0..4)."""
    diff = np.abs(np.asarray(a) - np.asarray(b)) % N_DIRECTIONS
    return np.minimum(diff, N_DIRECTIONS - diff)
