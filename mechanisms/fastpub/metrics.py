"""The paper's evaluation (§6.2–6.3): exact ground truth, frequent-fragment F1, count-query error.

These read raw data (the ground truth) and belong to evaluation, never to the server.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.fastpub.fragments import decode, encode, presence


def support_counts(offsets: np.ndarray, cells: np.ndarray, length: int, n_locations: int,
                   multiplicity: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every fragment of ``length`` held by some client, with S(f) = #clients holding it (presence, 0/1 each).

    Sorted by key. With ``multiplicity``, trajectory i counts multiplicity[i] times.
    """
    offsets, cells = np.asarray(offsets, np.int64), np.asarray(cells, np.int64)
    owner, keys = presence(offsets, cells, length, n_locations)
    weights = np.ones(len(owner)) if multiplicity is None else np.asarray(multiplicity, float)[owner]
    uniq, inverse = np.unique(keys, return_inverse=True)
    counts = np.bincount(inverse, weights=weights, minlength=len(uniq)).astype(np.int64)
    return decode(uniq, length, n_locations), counts


def frequent_fragments(offsets, cells, length, n_locations, k, multiplicity=None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """GT_l(k) = {f ∈ Ω_l : S(f) ≥ k} with their counts (§6.2; ≥ k as in the authors' code)."""
    fragments, counts = support_counts(offsets, cells, length, n_locations, multiplicity)
    keep = counts >= k
    return fragments[keep], counts[keep]


@dataclass(frozen=True)
class FsmScore:
    """Precision, recall and F1 = 2pr/(p+r) of published l-fragments against GT_l (footnote 6)."""

    precision: float
    recall: float
    f1: float
    n_published: int
    n_truth: int


def precision_recall_f1(published: np.ndarray, truth: np.ndarray, n_locations: int) -> FsmScore | None:
    """None ("inv", footnote 10) when nothing is published; recall is NaN when GT is empty."""
    published, truth = np.asarray(published, np.int64), np.asarray(truth, np.int64)
    if len(published) == 0:
        return None
    p_keys, t_keys = set(encode(published, n_locations).tolist()), set(encode(truth, n_locations).tolist())
    hit = len(p_keys & t_keys)
    precision = hit / len(p_keys)
    recall = hit / len(t_keys) if t_keys else float("nan")
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return FsmScore(precision, recall, f1, len(p_keys), len(t_keys))


def relative_errors(answers: np.ndarray, truths: np.ndarray) -> np.ndarray:
    """|Q(D̃) − Q(D)| / Q(D) per query (eq. 19)."""
    answers, truths = np.asarray(answers, float), np.asarray(truths, float)
    return np.abs(answers - truths) / truths


def median_relative_error(answers: np.ndarray, truths: np.ndarray) -> float:
    """The paper's count-query score: the median of eq. 19 over the legal queries (true count ≥ k)."""
    errors = relative_errors(answers, truths)
    return float(np.median(errors)) if len(errors) else float("nan")
