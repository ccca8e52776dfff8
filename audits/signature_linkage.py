"""Record linkage with full-history spatial signatures: the survey's LA metric (attacks A1 and A4;
docs/design.md, The attacks).

Jin et al., "A Survey and Experimental Study on Privacy-Preserving Trajectory Data Publishing", TKDE 35(6) 2023,
Sec. 5.2.1, with the signature of its linkage code TrjLink (Jin, Hua et al., refs [37], [66] of the survey;
``uqwhua/TrjLink``, ``signatures/Function.java``): the adversary knows the whole raw history of every object,
builds a TF-IDF signature per object from the locations it visits and links each released record to the most
similar object.

Locations are the cells of a fine lon/lat grid (0.001 degrees, TrjLink's grid step; TrjLink snaps to road
intersections, which needs a road network we do not assume), or the frame's ``cell`` column when both frames
have one. Besides the spatial signature (the locations visited), TrjLink builds a spatiotemporal one (location
and hour of the day, ``signatures/Spatiotemporal.java``) and a sequential one (n-grams of consecutive locations,
``signatures/Sequential.java``); ``signatures`` chooses which the adversary tries, and the attack reports the one
that links the most (bench/EXTERNAL_ATTACKS_RESULTS.md measures where each matters).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.optimize import linear_sum_assignment

from audits.attack import Attack
from audits.controls import MemberControl, members_and_controls
from audits.result import MAX_EXAMPLES, AttackResult
from audits.stats import baseline_corrected_risk
from trajpub.errors import InputError, ParameterError

TRUTHFUL_NAME = "signature_linkage"
SYNTHETIC_NAME = "signature_linkage_synthetic"

_TIE_TOLERANCE = 1e-12
#: Records x objects per block of the synthetic mode's similarity (:meth:`Signatures.similarity_blocks`): at most
#: 2e7 stored similarities (~240 MB) at a time.
SIMILARITY_BLOCK_ENTRIES = 20_000_000
_GRID_KEY_STRIDE = 2**31
_GRID_KEY_OFFSET = 2**30
SIGNATURE_KINDS = ("spatial", "spatiotemporal", "sequential")
"""What a signature dimension is: a location; a (location, hour of the day) pair; a transition from one location
to the next different one within a trajectory."""
HOURS_PER_DAY = 24


@dataclass(frozen=True)
class SignatureLinkageParams:
    """Parameters of :class:`SignatureLinkage`.

    mode: ``"truthful"`` when every released record still belongs to a raw object (the release's
        ``object_id`` names it; the auditor keeps that correspondence privately), ``"synthetic"`` when the
        release has no link to owners (e.g. the noisy prefix tree). The two give different quantities (survey
        Sec. 5.2.1; docs/design.md, "Audits and the gate"), reported under different attack names.
    grid_deg: side of the lon/lat grid cells that serve as locations (TrjLink's grid step, 0.001 degrees).
    use_cell_column: use the ``cell`` column as the location when both frames have one.
    top_m: the number of highest-weighted locations kept in a signature (TrjLink's ``reduction = 10``);
        ``None`` keeps the full signature (TrjLink's ``reduction = 0``). A list tries each, with each signature
        kind, and the largest risk is reported.
    top_k: the k of the Acc@k values reported (truthful mode); Acc@1 is the survey's LA.
    threshold: similarity above which a synthetic record counts as linked (the survey's 0.5).
    max_assignment_records: the largest number of released records for which the global one-to-one
        assignment (A4) is solved; it needs a dense records x objects matrix and cubic time. 0 disables it.
    confidence: the confidence level of the reported Wilson interval.
    signatures: the signature kinds the adversary tries (:data:`SIGNATURE_KINDS`), each a separate linkage; the
        one of largest risk is reported. ``spatiotemporal`` needs ``t`` in both frames, ``sequential`` needs
        ``traj_id`` and ``seq`` (the order of the points) in both.
    """

    mode: Literal["truthful", "synthetic"] = "truthful"
    grid_deg: float = 0.001
    use_cell_column: bool = True
    top_m: int | None | tuple[int | None, ...] = 10
    top_k: tuple[int, ...] = (1, 5)
    threshold: float = 0.5
    max_assignment_records: int = 5000
    confidence: float = 0.95
    signatures: tuple[str, ...] = ("spatial",)

    def __post_init__(self) -> None:
        where = "signature_linkage params"
        if self.mode not in ("truthful", "synthetic"):
            raise ParameterError(f"mode must be 'truthful' or 'synthetic', got {self.mode!r}", where)
        if not 1e-7 <= self.grid_deg <= 1:
            raise ParameterError(f"grid_deg must be in [1e-7, 1] degrees, got {self.grid_deg}", where)
        for name in ("signatures", "top_m"):  # a YAML list
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if (not isinstance(self.signatures, tuple) or not self.signatures
                or not set(self.signatures) <= set(SIGNATURE_KINDS) or len(set(self.signatures)) < len(self.signatures)):
            raise ParameterError(f"signatures must be a non-empty list of distinct kinds among "
                                 f"{', '.join(SIGNATURE_KINDS)}, got {self.signatures!r}", where)
        if (not self.reductions or len(set(self.reductions)) < len(self.reductions)
                or not all(m is None or (isinstance(m, int) and not isinstance(m, bool) and m >= 1)
                           for m in self.reductions)):
            raise ParameterError(f"top_m must be a positive integer, None, or a non-empty list of distinct ones, "
                                 f"got {self.top_m!r}", where)
        if not self.top_k or not all(isinstance(k, int) and k >= 1 for k in self.top_k):
            raise ParameterError(f"top_k must be a non-empty tuple of positive integers, got {self.top_k!r}",
                                 where)
        if not 0 <= self.threshold < 1:
            raise ParameterError(f"threshold must be in [0, 1), got {self.threshold}", where)
        if not (isinstance(self.max_assignment_records, int) and self.max_assignment_records >= 0):
            raise ParameterError(
                f"max_assignment_records must be a non-negative integer, got {self.max_assignment_records!r}",
                where)
        if not 0 < self.confidence < 1:
            raise ParameterError(f"confidence must be in (0, 1), got {self.confidence}", where)


    @property
    def reductions(self) -> tuple[int | None, ...]:
        """The values of ``top_m`` to try."""
        return self.top_m if isinstance(self.top_m, tuple) else (self.top_m,)


@dataclass(frozen=True)
class Signatures:
    """TF-IDF signatures of the raw objects and of the released records, on one location vocabulary.

    ``objects`` (raw ``object_id`` as str) and ``records`` (release ``traj_id``) label the rows of ``raw`` and
    ``release``: CSR matrices whose rows are unit vectors (or empty, for a record without a usable point).
    """

    objects: np.ndarray
    records: np.ndarray
    raw: sparse.csr_matrix
    release: sparse.csr_matrix
    location: str
    kind: str = "spatial"
    top_m: int | None = 10

    def similarity(self, records: slice = slice(None)) -> sparse.csr_matrix:
        """Cosine similarity, records (all, or the slice ``records``) x objects: a sparse product of unit vectors,
        zeros not stored."""
        sim = (self.release[records] @ self.raw.T).tocsr()
        sim.eliminate_zeros()
        return sim

    def similarity_blocks(self) -> Iterator[sparse.csr_matrix]:
        """:meth:`similarity` in blocks of consecutive records, each of at most :data:`SIMILARITY_BLOCK_ENTRIES`
        records x objects: at a city's scale the whole matrix holds up to 10^9 nonzeros (2 km cells put most
        objects in most records' top locations), a block a bounded share of them."""
        step = max(1, SIMILARITY_BLOCK_ENTRIES // max(1, len(self.objects)))
        for start in range(0, len(self.records), step):
            yield self.similarity(slice(start, start + step))


def build_signatures(raw: pd.DataFrame, release: pd.DataFrame, params: SignatureLinkageParams,
                     kind: str = "spatial", top_m: int | None | str = "first") -> Signatures:
    """TF-IDF signatures of one ``kind`` (:data:`SIGNATURE_KINDS`) cut to ``top_m`` (``"first"``: the first of
    ``params.reductions``), TrjLink's ``fromCount2TFIDF`` and ``cutSignature``.

    With c(v,u) the number of points of u in dimension v (a location; a location at an hour of the day; or the
    transition into a location from the previous different one of the same trajectory) and N the number of raw
    objects: ``tf(v,u) = c(v,u) / sum_v' c(v',u)``, ``idf(v) = ln((N+1) / df(v))`` with df(v) the number of raw
    objects that have v (computed on the raw side only, so released records are weighted by what the adversary
    knows; a dimension no raw object has gets ``df = 1``, the largest weight), ``w = tf * idf``, L2-normalised;
    keep the top-m weights (and those tied with the m-th) and L2-normalise again. Dividing a row by a positive
    constant changes neither which weights are the top m nor the final unit vector, so the tf denominator and the
    first normalisation cancel and are not computed.
    """
    raw_loc, raw_ok, location = _location_keys(raw, release, params, "raw")
    rel_loc, rel_ok, _ = _location_keys(release, raw, params, "release")
    n_raw = len(raw)
    codes, locations = pd.factorize(np.concatenate([raw_loc, rel_loc]))  # one location vocabulary, dense codes
    raw_key, raw_ok = _dimension_keys(raw, codes[:n_raw], raw_ok, kind, ("object_id", "traj_id"), len(locations))
    rel_key, rel_ok = _dimension_keys(release, codes[n_raw:], rel_ok, kind, ("traj_id",), len(locations))
    objects, raw_rows = _factorize(raw["object_id"].astype(str))
    records, rel_rows = _factorize(release["traj_id"])
    loc_codes, vocabulary = pd.factorize(np.concatenate([raw_key[raw_ok], rel_key[rel_ok]]))
    n_raw_points = int(raw_ok.sum())
    counts_raw = _count_matrix(raw_rows[raw_ok], loc_codes[:n_raw_points], len(objects), len(vocabulary))
    counts_rel = _count_matrix(rel_rows[rel_ok], loc_codes[n_raw_points:], len(records), len(vocabulary))
    df = np.bincount(counts_raw.indices, minlength=len(vocabulary))
    idf = np.log((len(objects) + 1) / np.maximum(df, 1))
    m = params.reductions[0] if top_m == "first" else top_m
    return Signatures(
        objects=objects,
        records=records,
        raw=_unit_rows(_keep_top(_scale_columns(counts_raw, idf), m)),
        release=_unit_rows(_keep_top(_scale_columns(counts_rel, idf), m)),
        location=location,
        kind=kind,
        top_m=m,
    )


def _dimension_keys(frame: pd.DataFrame, loc: np.ndarray, ok: np.ndarray, kind: str,
                    trajectory: tuple[str, ...], n_locations: int) -> tuple[np.ndarray, np.ndarray]:
    """The signature dimension of every point (``loc``: codes < ``n_locations`` of the vocabulary both frames
    share) and the mask of points that have one. ``spatiotemporal``: location x 24 + hour of the day (UTC; any whole-hour offset cuts the day into the same
    hours), no dimension without a time. ``sequential``: the pair (previous location, location) for a point whose
    location differs from the one of the point before it in the same trajectory (``trajectory`` columns, ordered
    by ``seq``), TrjLink's 2-gram without its repeats."""
    if kind == "spatial":
        return loc, ok
    if kind == "spatiotemporal":
        hour = pd.to_datetime(frame["t"], utc=True).dt.hour
        has_time = hour.notna().to_numpy()
        return loc * HOURS_PER_DAY + hour.fillna(0).to_numpy(dtype=np.int64), ok & has_time
    order = np.lexsort([frame["seq"].to_numpy(), *(pd.factorize(frame[c])[0] for c in reversed(trajectory))])
    group = np.zeros(len(frame), dtype=np.int64)
    for c in trajectory:
        group = group * (len(frame) + 1) + pd.factorize(frame[c])[0]
    g, here, usable = group[order], loc[order], ok[order]
    follows = np.zeros(len(frame), dtype=bool)
    follows[1:] = (g[1:] == g[:-1]) & usable[1:] & usable[:-1] & (here[1:] != here[:-1])
    previous = np.zeros(len(frame), dtype=np.int64)
    previous[1:] = here[:-1]
    key, has_key = np.empty_like(loc), np.empty_like(ok)
    key[order] = previous * n_locations + here
    has_key[order] = follows
    return key, has_key


class SignatureLinkage(Attack[SignatureLinkageParams]):
    """The survey's linkage attack LA (A1), with the global-assignment strengthening (A4).

    Raw objects are grouped by ``object_id`` (each object's whole history is one signature, as in the survey's
    experiments); released records by ``traj_id`` (each released trajectory is one record). Everything below is
    done once per signature kind and ``top_m`` of the parameters, and the result of largest risk is reported.

    ``truthful`` mode (attack name ``signature_linkage``): every released record whose ``object_id`` is a raw
    object is a target; it is linked to the arg-max raw object and the link succeeds if that is its owner
    (LA = |D*_s| / |D*|, survey Sec. 5.2.1). Ties are broken uniformly at random, counted by expectation: a
    target whose owner ties with b-1 others at the top counts 1/b. Acc@k is the same with the owner among the
    k most similar. The global one-to-one assignment (A4: Hungarian method on the similarity matrix,
    ``scipy.optimize.linear_sum_assignment``) is run when there are no more records than objects, and the
    variant with the larger risk is reported; an assigned pair of zero similarity carries no evidence and
    does not count. Released records of no raw object (dummies) are not targets, so adding dummies cannot
    dilute the risk of real people. Baseline: a random guess, 1/N for N raw objects.

    ``synthetic`` mode (attack name ``signature_linkage_synthetic``): there are no owners, so the survey
    uses a threshold: a record more than ``threshold`` (0.5) cosine-similar to an object links to it. Counted
    against the survey's share of linked records, that measures how much the release looks like the fleet
    (records link to taxis that were never in the input as often as to those that were). We count per object,
    members against held-out controls (:mod:`audits.controls`): an object is linked when some released record
    is more than ``threshold`` similar to it; success = the share of members linked, baseline = the share of
    controls linked, risk ``(members - controls) / (1 - controls)`` with Newcombe's interval. A release that
    learns the population links members and controls alike (risk ~0); one that copies members links them more.
    Signatures are built over members and controls together (the idf is the population's, the same for both).
    A different quantity from the truthful LA; not to be compared with it (docs/design.md, "Audits and the gate").

    The Wilson interval assumes independent targets; the assignment's successes are not independent, so its
    interval is indicative.
    """

    @property
    def name(self) -> str:
        return TRUTHFUL_NAME if self.params.mode == "truthful" else SYNTHETIC_NAME

    @property
    def _signature_columns(self) -> tuple[str, ...]:
        kinds = self.params.signatures
        return (("t",) if "spatiotemporal" in kinds else ()) + (("seq",) if "sequential" in kinds else ())

    @property
    def raw_columns(self) -> tuple[str, ...]:
        """A synthetic release is measured on members against controls (the ``member`` column)."""
        trajectory = ("traj_id",) if "sequential" in self.params.signatures else ()
        member = ("member",) if self.params.mode == "synthetic" else ()
        return ("object_id", *trajectory, "lon", "lat", *self._signature_columns, *member)

    @property
    def release_columns(self) -> tuple[str, ...]:
        """A truthful release also needs ``object_id``: the owner the auditor keeps privately."""
        owner = ("object_id",) if self.params.mode == "truthful" else ()
        return ("traj_id", *owner, "lon", "lat", *self._signature_columns)

    def _attack(self, raw: pd.DataFrame, release: pd.DataFrame) -> AttackResult:
        """One linkage per signature kind and ``top_m``; the one whose risk interval reaches highest (then the
        largest risk; the first of them on a tie) is reported, as the gate decides on the interval, with every
        one's figures in its evidence (keys ``kind`` or ``kind/top_m``)."""
        if self.params.mode == "synthetic":
            members, controls = members_and_controls(raw, f"{self.name}: raw frame")
        results = []
        for kind in self.params.signatures:
            for m in self.params.reductions:
                signatures = build_signatures(raw, release, self.params, kind, m)
                if self.params.mode == "truthful":
                    results.append(self._truthful(signatures, signatures.similarity(),
                                                  _record_owners(release, signatures.records)))
                else:
                    results.append(self._synthetic(signatures, members, controls))
        several = len(self.params.reductions) > 1
        reported = max(results, key=lambda r: (r.risk_ci_high, r.risk))
        by_signature = {(f"{r.evidence['signature']}/{r.evidence['top_m'] or 'all'}" if several
                         else r.evidence["signature"]): {"n_successes": r.n_successes,
                                                         "success_rate": r.success_rate, "risk": r.risk}
                        for r in results}
        return reported.with_evidence({**reported.evidence, "by_signature": by_signature})

    def _truthful(self, sig: Signatures, sim: sparse.csr_matrix, owners: np.ndarray) -> AttackResult:
        n_objects = len(sig.objects)
        owner_col = pd.Index(sig.objects).get_indexer(owners)
        targets = np.flatnonzero(owner_col >= 0)
        if len(targets) == 0:
            raise InputError("no released record belongs to a raw object; use mode='synthetic'",
                             f"{self.name}: release frame")
        sim, owner_col = sim[targets], owner_col[targets]
        owner_sim = np.asarray(sim[np.arange(len(targets)), owner_col]).ravel()
        above, tied = owner_rank_counts(sim, owner_sim, n_objects)
        acc = {k: float(expected_in_top(k, above, tied).sum()) for k in sorted({1, *self.params.top_k})}
        baseline = 1 / n_objects
        variants = {"argmax": acc[1]}
        assignment: dict[str, Any] = {"applicable": False}
        if len(targets) > n_objects:
            assignment["reason"] = f"more records ({len(targets)}) than objects ({n_objects})"
        elif len(targets) > self.params.max_assignment_records:
            assignment["reason"] = f"more records than max_assignment_records={self.params.max_assignment_records}"
        else:
            variants["assignment"] = float(_assignment_successes(sim, owner_col))
            assignment = {"applicable": True, **_summary(variants["assignment"], len(targets), baseline)}
        reported = max(variants, key=lambda v: baseline_corrected_risk(variants[v] / len(targets), baseline))
        evidence = {
            "mode": "truthful",
            "signature": sig.kind,
            "location": sig.location,
            "top_m": sig.top_m,
            "n_objects": n_objects,
            "n_records": len(sig.records),
            "n_records_without_owner": len(sig.records) - len(targets),
            "reported_variant": reported,
            "argmax": _summary(variants["argmax"], len(targets), baseline),
            "assignment": assignment,
            "acc_at_k": {str(k): v / len(targets) for k, v in acc.items() if k in self.params.top_k},
            "examples": _truthful_examples(sig, sim, targets, owner_col, owner_sim, tied, above),
        }
        return AttackResult(attack=self.name, n_targets=len(targets), n_successes=variants[reported],
                            baseline=baseline, evidence=evidence, confidence=self.params.confidence)

    def _synthetic(self, sig: Signatures, members: pd.Index, controls: pd.Index) -> AttackResult:
        """Per raw object: its best similarity to any released record (one block of records at a time; only the
        per-object maximum and its record are kept); linked when above the threshold; members against controls."""
        n_objects = len(sig.objects)
        best, best_row = np.zeros(n_objects), np.full(n_objects, -1, dtype=np.int64)
        start = 0
        for sim in sig.similarity_blocks():
            block_best = sim.max(axis=0).toarray().ravel()
            better = block_best > best
            best_row[better] = start + np.asarray(sim[:, better].argmax(axis=0)).ravel()
            best[better] = block_best[better]
            start += sim.shape[0]
        by_object = pd.Series(best, index=pd.Index(sig.objects))
        linked = by_object > self.params.threshold
        m, c = linked.reindex(members), linked.reindex(controls)
        comparison = MemberControl.rates(float(m.sum()), len(m), float(c.sum()), len(c), self.params.confidence)
        in_members = pd.Index(sig.objects).isin(members)
        order = np.flatnonzero(linked.to_numpy() & in_members)
        order = order[np.argsort(-best[order], kind="stable")][:MAX_EXAMPLES]
        evidence = {
            "mode": "synthetic",
            "signature": sig.kind,
            "location": sig.location,
            "top_m": sig.top_m,
            "threshold": self.params.threshold,
            "n_records": len(sig.records),
            "baseline_kind": "the same criterion on controls: objects of the population the mechanism never saw",
            "best_similarity_quantiles": {
                group: {q: float(np.quantile(values, float(q))) for q in ("0.5", "0.9", "1.0")}
                for group, values in (("members", by_object.reindex(members)),
                                      ("controls", by_object.reindex(controls)))},
            "examples": [{"member": str(sig.objects[i]), "release_traj_id": _plain(sig.records[best_row[i]]),
                          "similarity": round(float(best[i]), 4)} for i in order],
        }
        return AttackResult.against_controls(self.name, comparison, evidence)


def _location_keys(frame: pd.DataFrame, other: pd.DataFrame, params: SignatureLinkageParams,
                   label: str) -> tuple[np.ndarray, np.ndarray, str]:
    """Integer location of every point, a mask of the usable points, and a description of the locations."""
    if params.use_cell_column and "cell" in frame.columns and "cell" in other.columns:
        cell = frame["cell"].to_numpy()
        if not np.issubdtype(cell.dtype, np.integer):
            raise InputError(f"column cell must hold integers, got {cell.dtype}", f"signature_linkage: {label}")
        return cell.astype(np.int64), cell >= 0, "cell column"
    lon = frame["lon"].to_numpy(dtype=float)
    lat = frame["lat"].to_numpy(dtype=float)
    ok = np.isfinite(lon) & np.isfinite(lat)
    ix = np.floor(np.where(ok, lon, 0) / params.grid_deg).astype(np.int64)
    iy = np.floor(np.where(ok, lat, 0) / params.grid_deg).astype(np.int64)
    return ix * _GRID_KEY_STRIDE + iy + _GRID_KEY_OFFSET, ok, f"lon/lat grid of {params.grid_deg} degrees"


def _factorize(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    codes, uniques = pd.factorize(values, sort=True)
    if (codes < 0).any():
        raise InputError(f"column {values.name} has missing values", "signature_linkage")
    return np.asarray(uniques), codes


def _count_matrix(rows: np.ndarray, cols: np.ndarray, n_rows: int, n_cols: int) -> sparse.csr_matrix:
    """c(v,u): points per (row, location); duplicate coordinates are summed by the COO to CSR conversion."""
    return sparse.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_rows, n_cols)).tocsr()


def _scale_columns(matrix: sparse.csr_matrix, weights: np.ndarray) -> sparse.csr_matrix:
    scaled = matrix.copy()
    scaled.data = scaled.data * weights[scaled.indices]
    return scaled


def _keep_top(matrix: sparse.csr_matrix, m: int | None) -> sparse.csr_matrix:
    """The m largest entries of every row, TrjLink's ``cutSignature``, plus any entry tied with the m-th.

    TrjLink cuts ties at the m-th weight in its visiting order; keeping them all makes the signature independent
    of any ordering of rows or location ids (weights often tie: equal counts of locations with equal df).
    """
    if m is None:
        return matrix
    lengths = np.diff(matrix.indptr)
    rows = np.repeat(np.arange(matrix.shape[0]), lengths)
    descending = matrix.data[np.lexsort((-matrix.data, rows))]
    cut = np.full(matrix.shape[0], -np.inf)
    long_rows = np.flatnonzero(lengths > m)
    cut[long_rows] = descending[matrix.indptr[long_rows] + m - 1]
    keep = matrix.data >= cut[rows]
    return sparse.csr_matrix((matrix.data[keep], (rows[keep], matrix.indices[keep])), shape=matrix.shape)


def _unit_rows(matrix: sparse.csr_matrix) -> sparse.csr_matrix:
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    norms = np.sqrt(np.bincount(rows, weights=matrix.data**2, minlength=matrix.shape[0]))
    unit = matrix.copy()
    unit.data = unit.data / norms[rows]
    return unit


def _record_owners(release: pd.DataFrame, records: np.ndarray) -> np.ndarray:
    """The raw owner of every released record (aligned with ``records``); one owner per ``traj_id``."""
    owners = release.groupby("traj_id", sort=True)["object_id"].agg(["nunique", "first"])
    shared = owners.index[owners["nunique"] > 1]
    if len(shared):
        raise InputError(f"traj_id {shared[0]!r} spans several object_id values; a record must have one owner",
                         "signature_linkage: release frame")
    return owners["first"].reindex(records).astype(str).to_numpy()


def owner_rank_counts(sim: sparse.csr_matrix, owner_sim: np.ndarray, n_objects: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: objects strictly more similar than the owner, and objects tied with it (the owner included).

    Objects not stored in a row have similarity 0; they tie with an owner of similarity 0.
    """
    n_rows = sim.shape[0]
    lengths = np.diff(sim.indptr)
    rows = np.repeat(np.arange(n_rows), lengths)
    owner_per_entry = owner_sim[rows]
    above = np.bincount(rows, weights=sim.data > owner_per_entry + _TIE_TOLERANCE, minlength=n_rows)
    tied = np.bincount(rows, weights=np.abs(sim.data - owner_per_entry) <= _TIE_TOLERANCE, minlength=n_rows)
    tied = tied + np.where(owner_sim <= _TIE_TOLERANCE, n_objects - lengths, 0)
    return above, tied


def expected_in_top(k: int, above: np.ndarray, tied: np.ndarray) -> np.ndarray:
    """P(owner among the k first) when ties are ordered uniformly at random: clip((k - above) / tied, 0, 1)."""
    return np.clip((k - above) / tied, 0.0, 1.0)


def _assignment_successes(sim: sparse.csr_matrix, owner_col: np.ndarray) -> int:
    """Correct pairs of positive similarity in the maximum-similarity one-to-one assignment (A4)."""
    dense = sim.toarray()
    rows, cols = linear_sum_assignment(dense, maximize=True)
    return int(((cols == owner_col[rows]) & (dense[rows, cols] > 0)).sum())


def _summary(successes: float, n_targets: int, baseline: float) -> dict[str, float]:
    rate = successes / n_targets
    return {"n_successes": successes, "success_rate": rate, "risk": baseline_corrected_risk(rate, baseline)}


def _truthful_examples(sig: Signatures, sim: sparse.csr_matrix, targets: np.ndarray, owner_col: np.ndarray,
                       owner_sim: np.ndarray, tied: np.ndarray, above: np.ndarray) -> list[dict[str, Any]]:
    """The most similar correct links: the record, its owner (the steward needs to know who is exposed), the
    similarity and the runner-up's similarity (not its identity)."""
    linked = np.flatnonzero((above == 0) & (owner_sim > 0))
    examples = []
    for i in linked[np.argsort(-owner_sim[linked], kind="stable")][:MAX_EXAMPLES]:
        row = sim.getrow(i)
        others = row.data[row.indices != owner_col[i]]
        examples.append({
            "release_traj_id": _plain(sig.records[targets[i]]),
            "owner": str(sig.objects[owner_col[i]]),
            "similarity": round(float(owner_sim[i]), 4),
            "runner_up_similarity": round(float(others.max()), 4) if len(others) else 0.0,
            "tied_objects": int(tied[i]) - 1,
        })
    return examples


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value JSON accepts."""
    return value.item() if isinstance(value, np.generic) else value
