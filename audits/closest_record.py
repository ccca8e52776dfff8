"""Membership inference on synthetic releases from each object's closest released record: members against
held-out controls (:mod:`audits.controls`; docs/design.md, "Control objects").

Two attacks share one geometry. A trajectory (raw or released) is resampled to :data:`RESAMPLED_POINTS` points
evenly spaced along its path, in metres on a local equirectangular projection (one reference latitude, the raw
frame's mean, for both frames); the distance between two trajectories is the root mean square of the distances
between their corresponding resampled points (a copy is at 0 whatever its timestamps, so an exact copy of a
member's path cannot hide; time is not used, as synthetic times are noise or absent). Nearest neighbours come from
a k-d tree (``scipy.spatial.cKDTree``).

``membership_dcr`` (distance to closest record, DCR): the score of an object is minus the smallest distance from
any of its trajectories to its closest released trajectory. DCR is the standard privacy check of synthetic data
(e.g. Platzer and Reutterer, "Holdout-based fidelity and privacy assessment of mixed-type synthetic data",
Frontiers in Big Data 4, 2021, which compares training and holdout records' DCR exactly as here).

``membership_shadow``: a reduced shadow-model attack in the spirit of Stadler, Oprisanu, Troncoso, "Synthetic
Data - Anonymisation Groundhog Day" (USENIX Security 2022). Their adversary trains a classifier on features of a
target measured on shadow releases made with and without the target. We keep the feature, the target's closeness
to the release compared with its closeness to a release made without it, and make it cheap: the shadow release
is the adversary's reference data itself (every other raw object: what a mechanism that learns the population and
nothing else would release near the target) instead of hundreds of runs of the mechanism, and the classifier is
the ratio of the two distances, the density-ratio score of van Breugel, Sun, Qian, van der Schaar (DOMIAS,
AISTATS 2023). Per trajectory t of an object: ``log((d_release(t) + 1 m) / (d_reference(t) + 1 m))`` with
``d_reference`` the distance to the closest trajectory of another raw object; the object's score is minus the
smallest over its trajectories. It separates a release that reproduces an object from one that is merely dense
where the object is (a taxi rank every synthetic trajectory passes): DCR alone counts both.

What is gated is the attack at a low false-positive rate, not its average: an object is *reproduced* when its
closest released trajectory is within ``max_distance_m`` (DCR; 100 m RMS over the whole path, below the distance
at which two T-Drive taxis' trips come to each other in the 1% tail) or ``max_ratio`` times its distance to the
population (shadow; 0.1: ten times closer to the release than to anyone else). Success = the share of members
reproduced, baseline = the share of controls, risk ``(members - controls) / (1 - controls)`` with Newcombe's
interval (:mod:`audits.controls`). Carlini, Chien, Nasr, Song, Terzis, Tramèr, "Membership Inference Attacks From
First Principles" (IEEE S&P 2022), Sec. III: an attack that confidently exposes a few members matters and the
AUC hides it. On half of the T-Drive sample, the raw trajectories of 10% of the members inserted into an ObjTrace
release gave a DCR AUC of 0.505 (advantage 0.01, interval up to 0.21), and a reproduced share of 0.10 against 0
for the controls (bench/GATE_CONTROLS_RESULTS.md). The AUC of the
score with DeLong's interval and the advantage ``2 AUC - 1`` (Yeom et al., CSF 2018) are reported beside it
(``evidence["auc"]``). Under a mechanism that learns only the population the split is random and members and
controls are exchangeable: both figures ~0 however close the release comes to everyone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from audits.attack import Attack
from audits.controls import MemberControl, members_and_controls
from audits.result import AttackResult
from trajpub.errors import InputError
from trajpub.params import Scope

DCR_NAME = "membership_dcr"
SHADOW_NAME = "membership_shadow"
RESAMPLED_POINTS = 16
METRES_PER_DEGREE = 111_320.0
SMOOTHING_M = 1.0
"""Added to both distances of the shadow attack's ratio, so that a copy (0 m) of an object in a crowded place
(reference 0 m too) is a finite score."""


@dataclass(frozen=True)
class ClosestRecordParams:
    """Parameters of :class:`ClosestRecord`.

    calibration: ``"none"`` (``membership_dcr``) or ``"reference"`` (``membership_shadow``); fixed by the name.
    max_distance_m: ``membership_dcr``: an object is reproduced when a released trajectory is this close (RMS).
    max_ratio: ``membership_shadow``: ... when its distance to the release is at most this times its distance to
        the closest other raw object.
    confidence: the confidence level of the intervals.
    """

    calibration: Literal["none", "reference"] = "none"
    max_distance_m: float = 100.0
    max_ratio: float = 0.1
    confidence: float = 0.95

    def __post_init__(self) -> None:
        p = Scope(DCR_NAME)
        p.require_choice(self.calibration, "calibration", ("none", "reference"))
        p.require_real(self.max_distance_m, "max_distance_m", 0, 1e6)
        p.require_real(self.max_ratio, "max_ratio", 0, 1)
        p.require_real(self.confidence, "confidence", 0.5, 1 - 1e-12)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def resampled(frame: pd.DataFrame, lat0: float, n: int = RESAMPLED_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(trajectory ids, vectors): every trajectory (``traj_id``, points in ``seq`` order, non-finite points left
    out) as ``n`` points evenly spaced along its path, flattened to ``2 n`` metres divided by ``sqrt(n)``, so
    that the Euclidean distance of two vectors is the RMS distance of their corresponding points. A trajectory of
    one point (or one place) is that point ``n`` times."""
    ok = np.isfinite(frame["lon"].to_numpy(float)) & np.isfinite(frame["lat"].to_numpy(float))
    points = frame[ok].sort_values(["traj_id", "seq"], kind="stable")
    ids, codes = np.unique(points["traj_id"].to_numpy(), return_inverse=True)
    x = points["lon"].to_numpy(float) * METRES_PER_DEGREE * math.cos(math.radians(lat0))
    y = points["lat"].to_numpy(float) * METRES_PER_DEGREE
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    step = np.hypot(np.diff(x), np.diff(y))
    step[starts[1:] - 1] = 0.0  # no step across two trajectories
    along = np.r_[0.0, np.cumsum(step)]
    along = along - along[starts][codes]  # distance along its own trajectory
    ends = np.r_[starts[1:], len(x)] - 1
    out = np.empty((len(ids), 2 * n))
    fractions = np.linspace(0.0, 1.0, n)
    for i, (a, b) in enumerate(zip(starts, ends, strict=True)):
        s = along[a:b + 1]
        targets = fractions * s[-1]
        out[i, :n] = np.interp(targets, s, x[a:b + 1]) if s[-1] > 0 else x[a]
        out[i, n:] = np.interp(targets, s, y[a:b + 1]) if s[-1] > 0 else y[a]
    return ids, out / math.sqrt(n)


def closest_distances(raw: pd.DataFrame, release: pd.DataFrame, reference: bool
                      ) -> tuple[pd.Series, pd.Series | None]:
    """Per raw trajectory (index ``traj_id``): the RMS distance in metres to its closest released trajectory and,
    when ``reference``, to its closest trajectory of another raw object."""
    lat0 = float(raw["lat"].mean())
    raw_ids, raw_vec = resampled(raw, lat0)
    rel_ids, rel_vec = resampled(release, lat0)
    if len(rel_ids) == 0:
        raise InputError("no released trajectory has a finite point", "closest record: release frame")
    d_release, _ = cKDTree(rel_vec).query(raw_vec, k=1)
    to_release = pd.Series(d_release, index=raw_ids)
    if not reference:
        return to_release, None
    owner = raw.groupby("traj_id")["object_id"].first().astype(str).reindex(raw_ids).to_numpy()
    tree = cKDTree(raw_vec)
    d_ref = np.full(len(raw_ids), np.inf)
    todo = np.arange(len(raw_ids))
    k = int(min(len(raw_ids), pd.Series(owner).value_counts().max() + 1))
    while len(todo) and k > 0:
        dist, idx = tree.query(raw_vec[todo], k=k)
        dist, idx = dist.reshape(len(todo), -1), idx.reshape(len(todo), -1)
        other = owner[np.minimum(idx, len(owner) - 1)] != owner[todo][:, None]
        other &= idx < len(owner)
        found = other.any(axis=1)
        d_ref[todo[found]] = dist[found, other[found].argmax(axis=1)]
        todo = todo[~found]
        k = min(len(raw_ids), 2 * k) if k < len(raw_ids) else 0
    return to_release, pd.Series(d_ref, index=raw_ids)


class ClosestRecord(Attack[ClosestRecordParams]):
    """``membership_dcr`` and ``membership_shadow`` (the module docstring): members against controls.

    ``raw``: every member's and control's trajectories with the ``member`` column (:mod:`audits.controls`).
    ``release``: the synthetic trajectories (``traj_id``, ``seq``, ``lon``, ``lat``).
    """

    @property
    def name(self) -> str:
        return DCR_NAME if self.params.calibration == "none" else SHADOW_NAME

    @property
    def raw_columns(self) -> tuple[str, ...]:
        return ("object_id", "traj_id", "seq", "lon", "lat", "member")

    @property
    def release_columns(self) -> tuple[str, ...]:
        return ("traj_id", "seq", "lon", "lat")

    def _attack(self, raw: pd.DataFrame, release: pd.DataFrame) -> AttackResult:
        members, controls = members_and_controls(raw, f"{self.name}: raw frame")
        calibrated = self.params.calibration == "reference"
        to_release, to_reference = closest_distances(raw, release, calibrated)
        owner = raw.groupby("traj_id")["object_id"].first().astype(str).reindex(to_release.index)
        if calibrated:
            per_traj = (to_release + SMOOTHING_M) / (to_reference + SMOOTHING_M)
            limit = self.params.max_ratio
        else:
            per_traj, limit = to_release, self.params.max_distance_m
        closest = per_traj.groupby(owner.to_numpy()).min()  # the object's most exposed trajectory
        reproduced = closest <= limit
        m, c = reproduced.reindex(members), reproduced.reindex(controls)
        comparison = MemberControl.rates(float(m.sum()), len(m), float(c.sum()), len(c), self.params.confidence)
        auc = (MemberControl.scores(-closest.reindex(members).to_numpy(), -closest.reindex(controls).to_numpy(),
                                    self.params.confidence) if min(len(members), len(controls)) >= 2 else None)
        dcr = to_release.groupby(owner.to_numpy()).min()
        evidence: dict[str, Any] = {
            "score": ("distance to the release / distance to the closest other raw object" if calibrated
                      else "distance to the closest released trajectory (m)"),
            "reproduced_when_at_most": limit,
            "resampled_points": RESAMPLED_POINTS,
            "auc": auc and auc.member_value,
            "auc_ci": auc and list(auc.member_ci),
            "advantage": auc and 2 * auc.member_value - 1,
            "advantage_ci": auc and list(auc.difference_ci),
            "median_dcr_m_members": float(dcr.reindex(members).median()),
            "median_dcr_m_controls": float(dcr.reindex(controls).median()),
            "members_within_1m": int((dcr.reindex(members) <= 1.0).sum()),
            "controls_within_1m": int((dcr.reindex(controls) <= 1.0).sum()),
            "n_released_trajectories": int(release["traj_id"].nunique()),
            "examples": [],
        }
        return AttackResult.against_controls(self.name, comparison, evidence)
