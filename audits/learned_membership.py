"""A learned membership attacker on synthetic releases: a classifier on the place, shape and time features of each
raw object against the release, reported as its AUC and advantage with their intervals, members against held-out
controls (:mod:`audits.controls`). Not a gate attack: a measurement beside the gate (``bench.learned_attack``).

The gate's attacks each threshold one score (a shadow ratio of 0.1, a shape ratio of 0.1, an exact time rule).
A learned attacker weighs several continuous scores at once, as the shadow-model attack of Stadler, Oprisanu and
Troncoso ("Synthetic Data - Anonymisation Groundhog Day", USENIX Security 2022) trains a classifier on a target's
features, and as trajectory-user-linking models (TULER, Gao et al., IJCAI 2017) learn the invariants that survive
blurring ("A Dual Perspective on Synthetic Trajectory Generators", arXiv 2604.19653, 2026). Per object, its most
exposed record's:

- ``place``: the shadow attack's log ratio ``log((d_release + 1 m) / (d_reference + 1 m))`` of RMS path distances
  (:func:`audits.closest_record.closest_distances`);
- ``shape``: the same log ratio of Procrustes shape distances after the best rotation or reflection, both
  directions (:mod:`audits.shape_match`; records of at least 4 fixes);
- ``time``: the share of its records that :mod:`audits.time_match` links (every fix's time, or a run of fixes with
  their times and step lengths, singling out the object);
- ``start_end``: the share of its records whose first and last fix's times (floored to the release's precision)
  some released record shares, whatever its place, shape or other times.

Each ratio is clipped to [-log 1000, 0]: a record no closer to the release than to the population is no evidence,
however far. The classifier is a logistic regression (Newton's method, a ridge of 1 on standardised features: a
unit Gaussian prior, not fitted here) trained *cross-fitted*: the objects are split into ``folds`` folds stratified
by membership, each fold scored by the model trained on the others, so that no object is scored by a model that
saw its label. The labels are the audit's own split into members and controls: an attacker that knows the
membership of the other objects, stronger than Stadler et al.'s, which learns it from shadow releases of the
mechanism (hundreds of runs, not affordable per release). The out-of-fold scores give the AUC with DeLong's
interval (:func:`audits.stats.auc_interval`) and the advantage ``2 AUC - 1`` (Yeom et al., CSF 2018). Under a
mechanism that learns only the population, members and controls are exchangeable and the AUC's interval holds
0.5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from audits.closest_record import SMOOTHING_M, closest_distances
from audits.controls import members_and_controls
from audits.shape_match import nearest, shapes
from audits.stats import auc_interval
from audits.time_match import Fixes, TimeMatch, TimeMatchParams, release_precision_s

FEATURES = ("place", "shape", "time", "start_end")
LOG_FLOOR = -math.log(1000.0)
RIDGE = 1.0
NEWTON_STEPS = 25
MIN_FIXES = 4


@dataclass(frozen=True)
class LearnedMembership:
    """The attacker's out-of-fold AUC with its interval, the advantage's, and the coefficients of the model fitted
    on every object (standardised features, in the order of :data:`FEATURES`)."""

    auc: float
    auc_low: float
    auc_high: float
    n_members: int
    n_controls: int
    coefficients: dict[str, float]

    @property
    def advantage(self) -> tuple[float, float, float]:
        return 2 * self.auc - 1, 2 * self.auc_low - 1, 2 * self.auc_high - 1


def features(raw: pd.DataFrame, release: pd.DataFrame) -> pd.DataFrame:
    """Per raw object (index), the four features of the module docstring."""
    owner = raw.groupby("traj_id")["object_id"].first().astype(str)
    to_release, to_reference = closest_distances(raw, release, reference=True)
    place = _log_ratio(to_release, to_reference).groupby(owner.reindex(to_release.index).to_numpy()).min()
    lat0 = float(raw["lat"].mean())
    raw_ids, raw_z = shapes(raw, lat0)
    _, rel_z = shapes(release, lat0)
    fixes = raw.groupby("traj_id").size().reindex(raw_ids).to_numpy()
    scored = fixes >= MIN_FIXES
    raw_owner = owner.reindex(raw_ids).to_numpy()
    both_raw, both_owner = np.concatenate([raw_z, raw_z[:, ::-1]]), np.concatenate([raw_owner, raw_owner])
    s_rel = nearest(raw_z[scored], np.concatenate([rel_z, rel_z[:, ::-1]]))
    s_ref = nearest(raw_z[scored], both_raw, raw_owner[scored], both_owner)
    shape = _log_ratio(pd.Series(s_rel, index=raw_ids[scored]), pd.Series(s_ref, index=raw_ids[scored]))
    shape = shape.groupby(raw_owner[scored]).min()
    precision = release_precision_s(release)
    raw_fixes, rel_fixes = Fixes.of(raw, precision), Fixes.of(release, precision)
    codes = pd.factorize(owner.reindex(raw_fixes.ids))[0]
    attack = TimeMatch(TimeMatchParams())
    linked = attack._times(raw_fixes, rel_fixes, codes) | attack._runs(raw_fixes, rel_fixes, codes)
    record_owner = owner.reindex(raw_fixes.ids).to_numpy()
    timed = pd.Series(np.isin(np.arange(len(raw_fixes.ids)), list(linked)), dtype=float).groupby(record_owner).mean()
    ends = raw_fixes.timings()[["start", "end"]]
    released_ends = set(map(tuple, rel_fixes.timings()[["start", "end"]].to_numpy().tolist()))
    shared = pd.Series([tuple(e) in released_ends for e in ends.to_numpy().tolist()], dtype=float)
    start_end = shared.groupby(record_owner).mean()
    objects = owner.unique()
    return pd.DataFrame({"place": -place.reindex(objects).fillna(0.0), "shape": -shape.reindex(objects).fillna(0.0),
                         "time": timed.reindex(objects).fillna(0.0),
                         "start_end": start_end.reindex(objects).fillna(0.0)}, index=objects)[list(FEATURES)]


def _log_ratio(to_release: pd.Series, to_reference: pd.Series) -> pd.Series:
    ratio = np.log((to_release.to_numpy() + SMOOTHING_M) / (to_reference.to_numpy() + SMOOTHING_M))
    return pd.Series(np.clip(np.nan_to_num(ratio, nan=0.0, posinf=0.0), LOG_FLOOR, 0.0), index=to_release.index)


def logistic(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Ridge logistic regression (intercept unpenalised) by Newton's method: the coefficients, intercept last."""
    design = np.c_[x, np.ones(len(x))]
    penalty = np.diag([RIDGE] * x.shape[1] + [0.0])
    w = np.zeros(design.shape[1])
    for _ in range(NEWTON_STEPS):
        p = 1 / (1 + np.exp(-design @ w))
        gradient = design.T @ (p - y) + penalty @ w
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty + 1e-9 * np.eye(len(w))
        w -= np.linalg.solve(hessian, gradient)
    return w


def learned_membership(raw: pd.DataFrame, release: pd.DataFrame, seed: int, folds: int = 5,
                       confidence: float = 0.95) -> LearnedMembership:
    """The cross-fitted attacker of the module docstring on ``raw`` (with the ``member`` column) and ``release``."""
    members, controls = members_and_controls(raw, "learned membership: raw frame")
    table = features(raw, release).reindex(members.append(controls))
    x = table.to_numpy(float)
    y = np.r_[np.ones(len(members)), np.zeros(len(controls))]
    rng = np.random.default_rng(seed)
    fold = np.empty(len(y), int)
    for label in (0, 1):
        where = np.flatnonzero(y == label)
        fold[rng.permutation(where)] = np.arange(len(where)) % folds
    scores = np.empty(len(y))
    for k in range(folds):
        train, test = fold != k, fold == k
        mean, sd = x[train].mean(axis=0), x[train].std(axis=0) + 1e-12
        w = logistic((x[train] - mean) / sd, y[train])
        scores[test] = np.c_[(x[test] - mean) / sd, np.ones(test.sum())] @ w
    auc, low, high = auc_interval(scores[y == 1], scores[y == 0], confidence)
    w = logistic((x - x.mean(axis=0)) / (x.std(axis=0) + 1e-12), y)
    return LearnedMembership(auc, low, high, len(members), len(controls),
                             {f: round(float(c), 3) for f, c in zip(FEATURES, w[:-1])})
