"""Membership inference by shape on synthetic releases: a released record that is a member's record moved, turned,
mirrored, reversed, resampled or re-timed links it (members against held-out controls, :mod:`audits.controls`).

What a rigid motion keeps is the record's shape: its step lengths and turning angles, whatever its place, heading,
handedness or clock ("A Dual Perspective on Synthetic Trajectory Generators", arXiv 2604.19653, 2026: blurring
generators fall to membership inference). The adversary compares shapes directly: every record (raw or released)
is resampled to :data:`audits.closest_record.RESAMPLED_POINTS` points evenly spaced along its path (so the
sampling rate and the timestamps do not matter), centred on its mean, and two records are as far apart as the RMS
distance of their corresponding points after the best rotation, with or without a reflection (orthogonal
Procrustes analysis; Gower, "Generalized Procrustes analysis", Psychometrika 40, 1975). In complex coordinates
``a, b`` (centred, scaled by ``1/sqrt(n)``) it is closed form:
``d(a, b)^2 = |a|^2 + |b|^2 - 2 max(|sum a conj(b)|, |sum a b|)`` (the second term: ``b`` mirrored). A released
record is compared in both directions along its path (a path reversed over the same times is the same shape).

Index: each record's distances from its centroid (a vector invariant to every rigid motion) sit in a k-d tree;
their RMS difference is a lower bound of the Procrustes distance (``||a_i| - |b_i|| <= |a_i - w b_i|`` for every
rotation or reflection ``w``), so the exact nearest record is found by asking the tree for the k nearest by the
bound, computing the exact distance of those k and doubling k until the best exact distance is at most the k-th
bound (branch and bound: no record is ever missed, and no records x records product is formed).

Score and threshold, as the shadow attack (:mod:`audits.closest_record`): per raw record t, the ratio
``(d_release(t) + 1 m) / (d_reference(t) + 1 m)`` with ``d_reference`` the shape distance to the closest record of
another raw object. A release that learns the population places shapes no closer to a member than the population
already does; one that publishes a member's record moved or turned puts its shape at ~0 while the population stays
hundreds of metres away. An object is *linked* when one of its records scores at most ``max_ratio`` (0.1: ten times
closer to the release than to anybody else, the shadow attack's ceiling). Only raw records of at least
``min_fixes`` fixes are scored: a record of n fixes has 2n - 3 degrees of freedom of shape beyond a rigid motion
with reflection (which has 3), so a record of 2 fixes is its length alone, and any released segment of that length
matches it (on the T-Drive sample, the only ObjTrace records that linked a raw one by chance were of 2 fixes); 4
fixes is the least with more shape than the motion that hides it. Success = the share of members linked,
baseline = that of controls, risk ``(members - controls) / (1 - controls)`` with Newcombe's interval; the AUC of the
score with DeLong's interval is reported beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from audits.attack import Attack
from audits.closest_record import SMOOTHING_M, resampled
from audits.controls import MemberControl, members_and_controls
from audits.result import AttackResult
from trajpub.errors import InputError
from trajpub.params import Scope

NAME = "membership_shape"
FIRST_K = 8
CHUNK = 20_000
"""Queries per block of the exact distances (a block holds CHUNK x k x 16 complex numbers)."""


@dataclass(frozen=True)
class ShapeMatchParams:
    """Parameters of :class:`ShapeMatch`. max_ratio: a raw record is linked when its shape distance to the release
    is at most this times its distance to the closest other raw object's record; min_fixes: the fewest fixes of a
    raw record scored; confidence: of the intervals."""

    max_ratio: float = 0.1
    min_fixes: int = 4
    confidence: float = 0.95

    def __post_init__(self) -> None:
        p = Scope(NAME)
        p.require_real(self.max_ratio, "max_ratio", 0, 1)
        p.require_int(self.min_fixes, "min_fixes", 2)
        p.require_real(self.confidence, "confidence", 0.5, 1 - 1e-12)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def shapes(frame: pd.DataFrame, lat0: float) -> tuple[np.ndarray, np.ndarray]:
    """(trajectory ids, centred complex shapes): each record resampled along its path
    (:func:`audits.closest_record.resampled`, scaled so that sums of squares are mean squares), as ``x + iy`` in
    metres minus its mean."""
    ids, vec = resampled(frame, lat0)
    n = vec.shape[1] // 2
    z = vec[:, :n] + 1j * vec[:, n:]
    return ids, z - z.mean(axis=1, keepdims=True)


def procrustes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The RMS distance of centred shapes ``a`` and ``b`` (complex, last axis the points, broadcast) after the best
    rotation with or without a reflection (the module docstring's closed form)."""
    norms = (np.abs(a) ** 2).sum(-1) + (np.abs(b) ** 2).sum(-1)
    best = np.maximum(np.abs((a * b.conj()).sum(-1)), np.abs((a * b).sum(-1)))
    return np.sqrt(np.maximum(norms - 2 * best, 0.0))


def nearest(query: np.ndarray, target: np.ndarray, query_owner: np.ndarray | None = None,
            target_owner: np.ndarray | None = None, cap: np.ndarray | None = None) -> np.ndarray:
    """Per query shape, the exact Procrustes distance to the closest target shape (of another owner when owners are
    given), by branch and bound on the k-d tree of the targets' centroid distances (the module docstring); inf
    when there is none, or, given ``cap`` (one per query), when it is farther than that (the search stops once
    the k-th bound exceeds the cap)."""
    out = np.full(len(query), np.inf)
    if len(target) == 0 or len(query) == 0:
        return out
    limit = np.full(len(query), np.inf) if cap is None else np.asarray(cap, float)
    tree = cKDTree(np.abs(target))
    bound = np.abs(query)
    todo, k = np.arange(len(query)), min(FIRST_K, len(target))
    while len(todo):
        for lo in range(0, len(todo), CHUNK):
            block = todo[lo:lo + CHUNK]
            lower, idx = tree.query(bound[block], k=k)
            lower, idx = lower.reshape(len(block), k), idx.reshape(len(block), k)
            d = procrustes(query[block][:, None, :], target[idx])
            if query_owner is not None:
                d[target_owner[idx] == query_owner[block][:, None]] = np.inf
            out[block] = d.min(axis=1)
            # resolved: the best exact distance is at most the k-th bound, every other target lies beyond the
            # cap, or every target was looked at
            resolved = (out[block] <= lower[:, -1]) | (lower[:, -1] > limit[block]) | (k >= len(target))
            out[block[~resolved]] = -1.0  # marks the queries to look at again with a larger k
        todo = np.flatnonzero(out < 0)
        k = min(2 * k, len(target))
    out[out > limit] = np.inf
    return out


def linked_distances(query: np.ndarray, query_owner: np.ndarray, raw: np.ndarray, raw_owner: np.ndarray,
                     release: np.ndarray, max_ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """Per query shape (raw records of ``query_owner``): (its distance to the release, its distance to the closest
    record of another raw object), exact wherever the ratio ``(d_release + 1 m) / (d_reference + 1 m)`` may be at
    most ``max_ratio``; elsewhere the distance to the release is only known to exceed what a link needs and is inf.

    In three steps, each exact for the decision: an upper bound ``U`` of ``d_reference`` (the least exact distance
    among the 4 x :data:`FIRST_K` raw shapes nearest by the bound that belong to other objects); the release
    searched within ``max_ratio (U + 1) - 1`` only (a link needs ``d_release`` that small, since
    ``d_reference <= U``: :func:`nearest` with that cap); then, for the few records a released shape is that close
    to, ``d_reference`` exactly (:func:`nearest`). Both the raw and the released shapes are searched in both
    directions along their paths."""
    raw_both, owners_both = np.concatenate([raw, raw[:, ::-1]]), np.concatenate([raw_owner, raw_owner])
    release_both = np.concatenate([release, release[:, ::-1]])
    upper = np.full(len(query), np.inf)
    if len(query) == 0:
        return upper, upper.copy()
    k = min(4 * FIRST_K, len(raw_both))
    raw_tree = cKDTree(np.abs(raw_both))
    for lo in range(0, len(query), CHUNK):
        block = np.arange(lo, min(lo + CHUNK, len(query)))
        _, idx = raw_tree.query(np.abs(query[block]), k=k)
        idx = idx.reshape(len(block), k)
        d = procrustes(query[block][:, None, :], raw_both[idx])
        d[owners_both[idx] == query_owner[block][:, None]] = np.inf
        upper[block] = d.min(axis=1)
    alone = ~np.isfinite(upper)  # no other object among the nearest: search them all
    upper[alone] = nearest(query[alone], raw_both, query_owner[alone], owners_both)
    cap = max_ratio * (upper + SMOOTHING_M) - SMOOTHING_M
    to_release = np.full(len(query), np.inf)
    reachable = np.flatnonzero(cap >= 0)
    to_release[reachable] = nearest(query[reachable], release_both, cap=cap[reachable])
    to_reference = upper.copy()
    close = np.flatnonzero(np.isfinite(to_release))
    to_reference[close] = nearest(query[close], raw_both, query_owner[close], owners_both)
    return to_release, to_reference


class ShapeMatch(Attack[ShapeMatchParams]):
    """``membership_shape`` (the module docstring): members against controls.

    ``raw``: every member's and control's records with the ``member`` column; ``release``: the synthetic records
    (``traj_id``, ``seq``, ``lon``, ``lat``; timestamps are not read).
    """

    @property
    def name(self) -> str:
        return NAME

    @property
    def raw_columns(self) -> tuple[str, ...]:
        return ("object_id", "traj_id", "seq", "lon", "lat", "member")

    @property
    def release_columns(self) -> tuple[str, ...]:
        return ("traj_id", "seq", "lon", "lat")

    def _attack(self, raw: pd.DataFrame, release: pd.DataFrame) -> AttackResult:
        members, controls = members_and_controls(raw, f"{NAME}: raw frame")
        lat0 = float(raw["lat"].mean())
        raw_ids, raw_z = shapes(raw, lat0)
        _, rel_z = shapes(release, lat0)
        if len(rel_z) == 0:
            raise InputError("no released trajectory has a finite point", f"{NAME}: release frame")
        owner = raw.groupby("traj_id")["object_id"].first().astype(str).reindex(raw_ids).to_numpy()
        fixes = raw.groupby("traj_id").size().reindex(raw_ids).to_numpy()
        scored = np.flatnonzero(fixes >= self.params.min_fixes)
        to_release, to_reference = linked_distances(raw_z[scored], owner[scored], raw_z, owner, rel_z,
                                                    self.params.max_ratio)
        ratio = np.full(len(raw_ids), np.inf)
        ratio[scored] = (to_release + SMOOTHING_M) / (to_reference + SMOOTHING_M)
        closest = pd.Series(ratio, index=raw_ids).groupby(owner).min()  # the object's most exposed record
        linked = closest <= self.params.max_ratio
        m, c = linked.reindex(members).fillna(False), linked.reindex(controls).fillna(False)
        comparison = MemberControl.rates(float(m.sum()), len(m), float(c.sum()), len(c), self.params.confidence)
        evidence: dict[str, Any] = {
            "score": "shape distance to the release / shape distance to the closest other raw object (Procrustes, "
                     "rotation and reflection, both directions)",
            "linked_when_at_most": self.params.max_ratio,
            "records_scored": len(scored),
            "records_linked": int((ratio <= self.params.max_ratio).sum()),
            "n_released_trajectories": int(release["traj_id"].nunique()),
            "examples": [],
        }
        return AttackResult.against_controls(NAME, comparison, evidence)
