"""Location-distribution linkage, the AP-attack (attack A3, with the assignment variant A4;
docs/design.md).

Survey Sec. 2.2.1, ref. [35] (Maouche, Ben Mokhtar, Bouchenak, "AP-Attack: A Novel User Re-identification Attack
on Mobility Datasets", MobiQuitous 2017): "discretize a map into a uniform grid, define the similarity between
two individuals as the Jensen-Shannon divergence between their two location probability distributions, and link
users minimizing the divergence". Why (docs/design.md, The attacks):
cheap, and robust to the point-level noise that defeats the exact-location signatures of A1, so it is the
linkage test for noise-based mechanisms (FASTPub, geo-indistinguishability, Pufferfish, (k-Psi) Laplace).

The grid is the frames' ``cell`` column (both frames must be gridded with the same :class:`trajpub.grid.GridSpec`);
points outside the grid (``cell = -1``) carry no location and are ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.optimize import linear_sum_assignment

from audits.attack import Attack, AttackParams
from audits.result import MAX_EXAMPLES, AttackResult
from audits.stats import baseline_corrected_risk
from trajpub.errors import InputError, ParameterError
from trajpub.params import Scope

NAME = "ap_attack"
RECORD_KEYS = ("traj_id", "object_id")
LN2 = math.log(2)

_P = Scope(NAME)
_TIE_TOLERANCE = 1e-12
_PAIRS_PER_CHUNK = 2_000_000


@dataclass(frozen=True)
class APAttackParams(AttackParams):
    """Parameters of :class:`APAttack`.

    record_key: what a released record is: ``"traj_id"`` (every released trajectory, as
        :mod:`audits.signature_linkage` does) or ``"object_id"`` (the release keeps one pseudonym per object;
        the auditor's ``object_id`` stands for it, and the record is the object's whole released history).
    top_k: the k of the Acc@k values reported; Acc@1 is the re-identification rate.
    max_assignment_records: the largest number of records for which the global one-to-one assignment (A4) is
        solved (a dense records x objects matrix and cubic time); 0 disables it.
    max_matrix_entries: refuse inputs whose records x objects divergence matrix would exceed this many entries.
    max_targets: attack at most this many target records: all of them when there are not more, else a uniform
        random sample of this size (the success rate is then estimated from the sample, its interval is the
        sample's, and the one-to-one assignment, which needs every record, is not solved). Every record is
        compared with every object, so without a cap the cost grows with records x objects.
    seed: seed of the target sample; ``None`` draws fresh entropy.
    confidence: the confidence level of the reported Wilson interval.
    """

    scope = _P

    record_key: str = "traj_id"
    top_k: tuple[int, ...] = (1, 5)
    max_assignment_records: int = 5000
    max_matrix_entries: int = 50_000_000
    max_targets: int = 5000
    seed: int | None = None
    confidence: float = 0.95

    def __post_init__(self) -> None:
        _P.require_choice(self.record_key, "record_key", RECORD_KEYS)
        if not (isinstance(self.top_k, tuple) and self.top_k
                and all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in self.top_k)):
            raise ParameterError(f"top_k must be a non-empty tuple of positive integers, got {self.top_k!r}",
                                 _P.where("top_k"))
        _P.require_int(self.max_assignment_records, "max_assignment_records", 0)
        _P.require_int(self.max_matrix_entries, "max_matrix_entries", 1)
        _P.require_int(self.max_targets, "max_targets", 1)
        self.require_seed_and_confidence()


@dataclass(frozen=True)
class LocationDistributions:
    """Per-row location probability distributions on one cell vocabulary (CSR rows sum to 1 or are empty)."""

    objects: np.ndarray
    records: np.ndarray
    raw: sparse.csr_matrix
    release: sparse.csr_matrix

    def divergence(self, max_entries: int = 50_000_000) -> np.ndarray:
        """JSD (natural log) of every record's distribution to every object's: a dense records x objects array.

        ``JSD(P||Q) = ln 2 - (1/2) sum_i [(p_i+q_i) ln(p_i+q_i) - p_i ln p_i - q_i ln q_i]``: the summand is 0
        where only one of p_i, q_i is positive, so only cells both visit contribute, and a pair without a common
        cell is at the maximum ln 2. The sum runs over the (record, object) pairs of every cell, joined cell by
        cell in chunks, so the cost is the number of such co-visits, not records x objects x cells. An empty
        row (no point on the grid) is at ln 2 from everything.
        """
        n_rec, n_obj = self.release.shape[0], self.raw.shape[0]
        if n_rec * n_obj > max_entries:
            raise InputError(f"{n_rec} records x {n_obj} objects exceeds max_matrix_entries={max_entries}",
                             NAME)
        p_cells, q_cells = self.release.tocsc(), self.raw.tocsc()
        n_p, n_q = np.diff(p_cells.indptr), np.diff(q_cells.indptr)
        per_cell = n_p * n_q
        total = np.zeros(n_rec * n_obj)
        cell_chunks = np.split(np.arange(len(per_cell)),
                               np.flatnonzero(np.diff(np.cumsum(per_cell) // _PAIRS_PER_CHUNK)) + 1)
        for cells in cell_chunks:
            cells = cells[per_cell[cells] > 0]
            if len(cells) == 0:
                continue
            # record entries of these cells, each repeated once per object entry of the same cell
            p_pos = np.concatenate([np.arange(p_cells.indptr[c], p_cells.indptr[c + 1]) for c in cells])
            reps = np.repeat(n_q[cells], n_p[cells])
            p_rep = np.repeat(p_pos, reps)
            within = np.arange(len(p_rep)) - np.repeat(np.cumsum(reps) - reps, reps)
            q_rep = np.repeat(np.repeat(q_cells.indptr[cells], n_p[cells]), reps) + within
            p, q = p_cells.data[p_rep], q_cells.data[q_rep]
            s = p + q
            g = s * np.log(s) - p * np.log(p) - q * np.log(q)
            pair = p_cells.indices[p_rep] * n_obj + q_cells.indices[q_rep]
            if n_rec * n_obj <= 4 * _PAIRS_PER_CHUNK:
                total += np.bincount(pair, weights=g, minlength=n_rec * n_obj)
            else:  # a large matrix: add the chunk's sums in place instead of a full-size bincount per chunk
                pairs, where = np.unique(pair, return_inverse=True)
                total[pairs] += np.bincount(where, weights=g)
        return np.clip(LN2 - total.reshape(n_rec, n_obj) / 2, 0.0, LN2)


def location_distributions(raw: pd.DataFrame, release: pd.DataFrame, record_key: str = "traj_id"
                           ) -> LocationDistributions:
    """Each raw object's and each released record's share of points per ``cell`` (cells < 0 dropped)."""
    for frame, label in ((raw, "raw"), (release, "release")):
        cell = frame["cell"].to_numpy()
        if not np.issubdtype(cell.dtype, np.integer):
            raise InputError(f"column cell must hold integers, got {cell.dtype}", f"{NAME}: {label} frame")
    raw_key = raw["object_id"].astype(str)
    rel_key = release["object_id"].astype(str) if record_key == "object_id" else release["traj_id"]
    objects, raw_rows = _factorize(raw_key)
    records, rel_rows = _factorize(rel_key)
    raw_cell, rel_cell = raw["cell"].to_numpy(np.int64), release["cell"].to_numpy(np.int64)
    raw_ok, rel_ok = raw_cell >= 0, rel_cell >= 0
    codes, vocabulary = pd.factorize(np.concatenate([raw_cell[raw_ok], rel_cell[rel_ok]]))
    n_raw = int(raw_ok.sum())
    shape_raw, shape_rel = (len(objects), len(vocabulary)), (len(records), len(vocabulary))
    return LocationDistributions(
        objects=objects, records=records,
        raw=_row_normalised(raw_rows[raw_ok], codes[:n_raw], shape_raw),
        release=_row_normalised(rel_rows[rel_ok], codes[n_raw:], shape_rel))


class APAttack(Attack[APAttackParams]):
    """The AP-attack (A3) on truthful releases, with the global-assignment strengthening (A4).

    Raw objects (``object_id``, the adversary's whole history of each) and released records (see
    ``record_key``) become location distributions over the grid cells; each record is linked to the raw
    object of minimum JSD. Targets are the records whose ``object_id`` is a raw object (released dummies are
    not targets). Ties are broken uniformly at random and counted by expectation, exactly as in
    :class:`audits.signature_linkage.SignatureLinkage`; a record sharing no cell with its owner ties with
    every object it shares no cell with (all at ln 2). When there are no more records than objects, the
    one-to-one assignment of minimum total JSD (``scipy.optimize.linear_sum_assignment``) is solved too; a pair
    at ln 2 carries no evidence and never counts; the variant of larger risk is reported. Baseline: a random
    guess, 1/N for N raw objects.
    """

    @property
    def name(self) -> str:
        return NAME

    @property
    def raw_columns(self) -> tuple[str, ...]:
        return ("object_id", "cell")

    @property
    def release_columns(self) -> tuple[str, ...]:
        key = ("traj_id",) if self.params.record_key == "traj_id" else ()
        return (*key, "object_id", "cell")

    def _attack(self, raw: pd.DataFrame, release: pd.DataFrame) -> AttackResult:
        p = self.params
        release, n_target_records = _sample_targets(raw, release, p)
        sampled = n_target_records > p.max_targets
        dist = location_distributions(raw, release, p.record_key)
        owners = _record_owners(release, dist.records, p.record_key)
        owner_col = pd.Index(dist.objects).get_indexer(owners)
        targets = np.flatnonzero(owner_col >= 0)
        if len(targets) == 0:
            raise InputError("no released record belongs to a raw object: the attack needs a truthful release",
                             f"{NAME}: release frame")
        jsd = dist.divergence(p.max_matrix_entries)[targets]
        owner_col = owner_col[targets]
        n_objects = len(dist.objects)
        owner_jsd = jsd[np.arange(len(targets)), owner_col]
        below = (jsd < owner_jsd[:, None] - _TIE_TOLERANCE).sum(axis=1)
        tied = (np.abs(jsd - owner_jsd[:, None]) <= _TIE_TOLERANCE).sum(axis=1)
        acc = {k: float(np.clip((k - below) / tied, 0.0, 1.0).sum()) for k in sorted({1, *p.top_k})}
        baseline = 1 / n_objects
        variants = {"argmin": acc[1]}
        assignment: dict[str, Any] = {"applicable": False}
        if sampled:
            assignment["reason"] = f"a sample of {p.max_targets} of {n_target_records} target records"
        elif len(targets) > n_objects:
            assignment["reason"] = f"more records ({len(targets)}) than objects ({n_objects})"
        elif len(targets) > p.max_assignment_records:
            assignment["reason"] = f"more records than max_assignment_records={p.max_assignment_records}"
        else:
            rows, cols = linear_sum_assignment(jsd)
            variants["assignment"] = float(((cols == owner_col[rows]) & (jsd[rows, cols] < LN2 - 1e-9)).sum())
            assignment = {"applicable": True, **_summary(variants["assignment"], len(targets), baseline)}
        reported = max(variants, key=lambda v: baseline_corrected_risk(variants[v] / len(targets), baseline))
        evidence = {
            "record_key": p.record_key,
            "n_objects": n_objects,
            "n_records": len(dist.records),
            "n_records_without_owner": len(dist.records) - len(targets),
            "n_target_records_total": n_target_records,
            "targets_sampled": sampled,
            "n_cells": int(dist.raw.shape[1]),
            "reported_variant": reported,
            "argmin": _summary(variants["argmin"], len(targets), baseline),
            "assignment": assignment,
            "acc_at_k": {str(k): v / len(targets) for k, v in acc.items() if k in p.top_k},
            "owner_jsd_quantiles": {q: float(np.quantile(owner_jsd, float(q))) for q in ("0.1", "0.5", "0.9")},
            "examples": _examples(dist, jsd, targets, owner_col, owner_jsd, below),
        }
        return AttackResult(attack=NAME, n_targets=len(targets), n_successes=variants[reported],
                            baseline=baseline, evidence=evidence, confidence=p.confidence)


def _sample_targets(raw: pd.DataFrame, release: pd.DataFrame, p: APAttackParams) -> tuple[pd.DataFrame, int]:
    """The release restricted to a uniform sample of ``max_targets`` target records (records owned by a raw
    object) when there are more, and the number of target records."""
    key = p.record_key
    owned = release["object_id"].astype(str).isin(set(raw["object_id"].astype(str)))
    records = pd.unique(release.loc[owned, key])
    if len(records) <= p.max_targets:
        return release, len(records)
    chosen = np.random.default_rng(p.seed).choice(records, p.max_targets, replace=False)
    return release[owned & release[key].isin(chosen)], len(records)


def _factorize(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    codes, uniques = pd.factorize(values, sort=True)
    if (codes < 0).any():
        raise InputError(f"column {values.name} has missing values", NAME)
    return np.asarray(uniques), codes


def _row_normalised(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> sparse.csr_matrix:
    counts = sparse.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=shape).tocsr()
    totals = np.asarray(counts.sum(axis=1)).ravel()
    counts.data = counts.data / np.repeat(totals, np.diff(counts.indptr))
    return counts


def _record_owners(release: pd.DataFrame, records: np.ndarray, record_key: str) -> np.ndarray:
    """The owner (``object_id`` as str) of every record; one owner per ``traj_id``."""
    if record_key == "object_id":
        return np.asarray(records).astype(str)
    owners = release.groupby("traj_id", sort=True)["object_id"].agg(["nunique", "first"])
    shared = owners.index[owners["nunique"] > 1]
    if len(shared):
        raise InputError(f"traj_id {shared[0]!r} spans several object_id values; a record must have one owner",
                         f"{NAME}: release frame")
    return owners["first"].reindex(records).astype(str).to_numpy()


def _summary(successes: float, n_targets: int, baseline: float) -> dict[str, float]:
    rate = successes / n_targets
    return {"n_successes": successes, "success_rate": rate, "risk": baseline_corrected_risk(rate, baseline)}


def _examples(dist: LocationDistributions, jsd: np.ndarray, targets: np.ndarray, owner_col: np.ndarray,
              owner_jsd: np.ndarray, below: np.ndarray) -> list[dict[str, Any]]:
    """The closest correct links: the record, its owner, the owner's JSD and the runner-up's (not its identity)."""
    linked = np.flatnonzero((below == 0) & (owner_jsd < LN2 - 1e-9))
    examples = []
    for i in linked[np.argsort(owner_jsd[linked], kind="stable")][:MAX_EXAMPLES]:
        others = np.delete(jsd[i], owner_col[i])
        record = dist.records[targets[i]]
        examples.append({
            "record": record.item() if isinstance(record, np.generic) else record,
            "owner": str(dist.objects[owner_col[i]]),
            "jsd": round(float(owner_jsd[i]), 4),
            "runner_up_jsd": round(float(others.min()), 4) if len(others) else LN2,
        })
    return examples
