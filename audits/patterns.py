"""Frequent patterns: the survey's FFP and AdaTrace's support error (Jin et al., TKDE 2023, Sec. 4.2.2; Gursoy
et al., CCS'18), and the exact window codes the membership attack shares.

A trajectory becomes its sequence of cells on the raw-box grid (:func:`audits.planar.raw_box_cells`) with
consecutive repeats collapsed; a pattern is a contiguous window of that sequence.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from audits.planar import ordered_points, raw_box_cells
from trajpub.errors import ParameterError


def collapsed_cells(points: pd.DataFrame, box: tuple, grid_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Each trajectory's cells on the raw-box grid with consecutive repeats collapsed, as CSR ``(cells, offsets)``
    (points in ``traj_id, seq`` order)."""
    cells, traj = raw_box_cells(points, box, grid_size), points["traj_id"].to_numpy()
    keep = np.r_[True, (traj[1:] != traj[:-1]) | (cells[1:] != cells[:-1])] if len(cells) else np.zeros(0, bool)
    cells, traj = cells[keep], traj[keep]
    starts = np.flatnonzero(np.r_[True, traj[1:] != traj[:-1]]) if len(cells) else np.zeros(0, np.int64)
    return cells, np.r_[starts, len(cells)].astype(np.int64)


def pattern_codes(cells: np.ndarray, offsets: np.ndarray, lengths: Sequence[int]) -> dict[int, tuple[np.ndarray,
                                                                                                  np.ndarray]]:
    """Every contiguous window of each length in ``lengths`` of CSR sequences, as one exact integer per window.

    ``cells`` are the concatenated sequences, ``offsets`` their CSR bounds. Returns ``{length: (sequence index of
    each window, code of each window)}``; within one call two windows of the same length have the same code if
    and only if they hold the same cells in the same order (codes of different lengths are unrelated). Built by
    repeated factorisation, ``code_l(i) = id(code_{l-1}(i), cell(i + l - 1))``, so it is exact (no hashing) and
    linear in the number of windows.
    """
    cells = np.asarray(cells, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    wanted = sorted({int(length) for length in lengths})
    if not wanted or wanted[0] < 1:
        raise ParameterError(f"lengths must be positive integers, got {list(lengths)}", "pattern_codes")
    seq_of = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    remaining = offsets[1:][seq_of] - np.arange(len(cells))  # cells from each position to its sequence's end
    base, uniques = pd.factorize(cells)
    n_base = max(len(uniques), 1)
    code = base.astype(np.int64)
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for length in range(1, wanted[-1] + 1):
        if length > 1:
            starts = np.flatnonzero(remaining >= length)
            keys = code[starts] * n_base + base[starts + length - 1]
            code = np.full(len(cells), -1, dtype=np.int64)
            code[starts] = pd.factorize(keys)[0]
        if length in wanted:
            starts = np.flatnonzero(remaining >= length)
            out[length] = (seq_of[starts], code[starts])
    return out


def frequent_patterns(raw: pd.DataFrame, release: pd.DataFrame, grid_size: int = 6, min_length: int = 2,
                      max_length: int = 8, top_k: int = 100) -> dict[str, float]:
    """FFP, the F-measure of the top-k frequent patterns, and the patterns' support error (survey Sec. 4.2.2).

    AdaTrace's ``Evaluation.patternMiningF1Error`` and ``patternMiningSupport`` (Gursoy et al., CCS'18), the
    survey's FFP [119]: each trajectory (``traj_id`` in ``seq`` order) becomes its sequence of cells of a
    ``grid_size x grid_size`` uniform lon/lat grid over the raw bounding box (released points outside it fall in
    the nearest border cell, as in :func:`trip_error`), with consecutive repeats collapsed; a pattern is a
    contiguous sub-sequence of ``min_length..max_length`` cells; its support is its number of occurrences.
    ``FP(k, D)`` = the k patterns of largest support (ties at the k-th broken by shorter length, then by first
    occurrence in traj_id/seq order: AdaTrace's order is a hash map's). Returns

    - ``"ffp"``: ``F1 = 2PR/(P+R)`` with ``P = |FP(k,D) ∩ FP(k,D*)| / |FP(k,D*)|`` and ``R = ... / |FP(k,D)|``
      (0 when no pattern is shared). Higher is better, in [0, 1]; the survey's Table 4 reports it.
    - ``"support_error"``: ``(1/k) sum_{P in FP(k,D)} |s(D,P) - s(D*,P)| / s(D,P)`` (the absolute value is
      AdaTrace's; the survey prints the formula without it). Lower is better.

    AdaTrace also interpolates cells between non-adjacent grid cells before mining; we do not (a documented
    deviation: on a 6 x 6 grid consecutive samples are almost always in the same or an adjacent cell).
    """
    for name, value, low in (("grid_size", grid_size, 1), ("min_length", min_length, 1),
                             ("max_length", max_length, min_length), ("top_k", top_k, 1)):
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= low):
            raise ParameterError(f"{name} must be an integer >= {low}, got {value!r}", "frequent_patterns")
    raw_pts, rel_pts, box = ordered_points(raw, release)
    corpora = [collapsed_cells(points, box, grid_size) for points in (raw_pts, rel_pts)]
    n_raw_seqs = len(corpora[0][1]) - 1
    cells = np.concatenate([corpora[0][0], corpora[1][0]])
    offsets = np.concatenate([corpora[0][1], corpora[1][1][1:] + len(corpora[0][0])])
    parts = []
    for length, (seq, code) in pattern_codes(cells, offsets, range(min_length, max_length + 1)).items():
        parts.append(pd.DataFrame({"length": length, "code": code, "raw": seq < n_raw_seqs,
                                   "order": np.arange(len(code))}))
    windows = pd.concat(parts, ignore_index=True)
    support = windows.groupby(["length", "code"], sort=False).agg(
        raw=("raw", "sum"), total=("raw", "size"), first=("order", "min"))
    support["release"] = support["total"] - support["raw"]

    def top(column: str) -> pd.Index:
        ranked = support[support[column] > 0].reset_index()
        ranked = ranked.sort_values([column, "length", "first"], ascending=[False, True, True], kind="stable")
        return pd.MultiIndex.from_frame(ranked[["length", "code"]].head(top_k))

    top_raw, top_rel = top("raw"), top("release")
    shared = len(top_raw.intersection(top_rel))
    ffp = 0.0 if shared == 0 else 2 * shared / (len(top_raw) + len(top_rel))
    freq = support.loc[top_raw]
    support_error = float((np.abs(freq["raw"] - freq["release"]) / freq["raw"]).mean()) if len(freq) else 0.0
    return {"ffp": float(ffp), "support_error": support_error}
