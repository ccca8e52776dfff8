"""The re-identification risk family of Pellungrini et al., as scikit-mobility implements it, without its bugs.

R. Pellungrini, L. Pappalardo, F. Pratesi, A. Monreale, "A Data Mining Approach to Assess Privacy Risk in Human
Mobility Data", ACM TIST 9(3), 2017, and "Analyzing Privacy Risk in Human Mobility Data", STAF Workshops 2018;
implemented in ``skmob.privacy.attacks`` (scikit-mobility, BSD-3). The adversary knows ``k`` elements of the
target's data (its *background knowledge*: points, a time-ordered sub-sequence, visited places with their
frequency, ...). An *instance* of that knowledge is one choice of k elements; the records consistent with it
form its matching set, and the probability of re-identifying the target from it is ``1 / |matching set|``.
A target's risk is the maximum over all its instances (the adversary who knows the most identifying k
elements). Attack A2 (docs/design.md, The attacks): this is the partial-knowledge attack parameterised by the knowledge
length, on exact (or grid-cell) locations instead of tolerances.

The kinds (``ReidentificationParams.kind``), each matching an instance against a candidate's released data:

- ``location``: k points' locations, as a multiset contained in the candidate's (a location known twice must
  be visited at least twice);
- ``location_sequence``: k points in time order, a sub-sequence of the candidate's time-ordered locations;
- ``location_time``: k (location, time bin) pairs, as a multiset; the bin is the local time floored to
  ``time_precision``;
- ``unique_location``: k distinct visited locations, all visited by the candidate;
- ``location_frequency``: k distinct locations with their visit counts f; the candidate's count g of each must
  satisfy ``g (1 - tol) <= f <= g (1 + tol)``;
- ``location_probability``: the same with the shares of visits (count / number of points);
- ``location_proportion``: the same with each count divided by the largest count among the k locations (on
  both sides);
- ``home_work``: the target's two most frequently visited locations, all among the candidate's two most
  frequent (k is ignored).

Two departures from scikit-mobility (checked against its doctests in ``tests/unit/test_audits_reidentification.py``):

1. **Hour precision.** ``skmob.utils.utils.date_time_precision`` builds the "Hour" key from year, month, day and
   *month* again (and "Minute" from year, month, day, month, minute: no hour), so its location-time attack at
   hour precision is in fact at day precision. We floor the timestamp to the hour (minute, ...).
2. **Home and work ordering.** ``frequency_vector`` sorts each user's locations by *ascending* frequency and
   ``HomeWorkAttack`` takes the first two rows: the two *least* visited locations. We take the two most
   visited (ties broken by the location order: ``cell`` id, or latitude then longitude).

And one extension for releases that differ from the background knowledge: the instance is drawn from the
target's *raw* data and matched against the *release*; if the target's own released data does not match, the
adversary (who picks uniformly among the matching records) cannot be right, so the instance's risk is
``[owner matches] / |matching set|``. With ``release = raw`` this is scikit-mobility's value.

Cost: the number of instances ``C(n, k)`` explodes with the n points of a target; above ``max_instances`` a
uniform sample of that many instances is evaluated instead, so the reported risk is a lower bound (the maximum
over a sample); ``evidence["n_sampled_targets"]`` says for how many targets. Matching is vectorised per target
over (candidates x instances x k) arrays; sub-sequences by a binary search in one sorted index.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from audits.attack import Attack, AttackParams
from audits.planar import epoch_seconds
from audits.result import MAX_EXAMPLES, AttackResult
from trajpub.errors import InputError, ParameterError
from trajpub.frame import require_columns
from trajpub.params import Scope

NAME_PREFIX = "reidentification_"
KINDS = ("location", "location_sequence", "location_time", "unique_location", "location_frequency",
         "location_probability", "location_proportion", "home_work")
LOCATIONS = ("cell", "lonlat")
TIME_PRECISIONS = ("year", "month", "day", "hour", "minute", "second")
_POINT_KINDS = ("location", "location_sequence", "location_time")
_TOLERANCE_KINDS = ("location_frequency", "location_probability", "location_proportion")
_REL_EPS = 1e-12  # float slack of the tolerance comparisons (shares computed from integer counts)
_BATCH_ELEMENTS = 4_000_000

_P = Scope("reidentification")


@dataclass(frozen=True)
class ReidentificationParams(AttackParams):
    """Parameters of :class:`Reidentification`.

    kind: the attack, one of :data:`KINDS` (see the module docstring).
    knowledge_length: k, the number of elements the adversary knows (all of them when the target has fewer).
    location: ``"cell"`` (the frames' grid cell; points outside the grid, ``cell < 0``, are dropped) or
        ``"lonlat"`` (exact coordinate pairs, scikit-mobility's choice).
    time_precision: the time bin of ``location_time``: year, month, day, hour, minute or second.
    timezone: the zone in which time bins are cut (local days and hours).
    tolerance: the relative tolerance of the frequency, probability and proportion kinds, in [0, 1].
    max_instances: evaluate at most this many instances per target (exactly all of them when there are not
        more, else a uniform random sample of this size: the risk is then a lower bound).
    max_targets: attack at most this many targets: all of them when there are not more, else a uniform random
        sample of this size (every candidate stays a candidate; the mean risk is then estimated from the sample
        and its interval is the sample's). Each target is matched against every candidate, so without a cap the
        cost grows with targets x candidates, quadratically in the number of objects.
    seed: seed of the target and instance samplers; ``None`` draws fresh entropy.
    confidence: the confidence level of the reported Wilson interval.
    """

    scope = _P

    kind: str = "location"
    knowledge_length: int = 2
    location: str = "cell"
    time_precision: str = "hour"
    timezone: str = "UTC"
    tolerance: float = 0.0
    max_instances: int = 1000
    max_targets: int = 300
    seed: int | None = None
    confidence: float = 0.95

    def __post_init__(self) -> None:
        _P.require_choice(self.kind, "kind", KINDS)
        _P.require_int(self.knowledge_length, "knowledge_length", 1)
        _P.require_choice(self.location, "location", LOCATIONS)
        _P.require_choice(self.time_precision, "time_precision", TIME_PRECISIONS)
        try:
            pd.Timestamp("2000-01-01", tz=self.timezone)
        except Exception as exc:  # pandas raises several types for an unknown zone
            raise ParameterError(f"unknown timezone {self.timezone!r}", _P.where("timezone")) from exc
        _P.require_real(self.tolerance, "tolerance", 0, 1, open_low=False)
        _P.require_int(self.max_instances, "max_instances", 1)
        _P.require_int(self.max_targets, "max_targets", 1)
        self.require_seed_and_confidence()

    @property
    def attack_name(self) -> str:
        return NAME_PREFIX + self.kind


@dataclass
class _Encoded:
    """Both frames' points as integer keys, grouped by object, in time order."""

    raw_obj: np.ndarray  # object code of every usable raw point (codes shared with the release)
    raw_key: np.ndarray
    rel_obj: np.ndarray
    rel_key: np.ndarray
    objects: np.ndarray  # object_id (str) of every code
    n_keys: int
    key_order: np.ndarray  # rank of every key in the location order (home/work tie-break)


def reidentification_risks(raw: pd.DataFrame, release: pd.DataFrame, params: ReidentificationParams
                           ) -> pd.DataFrame:
    """Per-target risk: one row per raw object that owns released data (or per target of the sample, see
    ``max_targets``), ``object_id``, ``risk``, ``n_instances`` (instances evaluated) and ``sampled`` (True when
    they were a sample of all instances). ``attrs["n_candidates"]``: the number of released objects with a usable
    point (the candidates); ``attrs["n_targets_total"]``: the number of targets before sampling."""
    enc = _encode(raw, release, params)
    released = np.unique(enc.rel_obj)
    targets = np.intersect1d(np.unique(enc.raw_obj), released)
    if len(targets) == 0:
        raise InputError("no raw object owns released data: the attack needs a truthful release (object_id)",
                         f"{params.attack_name}: release frame")
    n_obj = len(enc.objects)
    cand = released  # candidate rows: the released objects
    rng = np.random.default_rng(params.seed)
    n_targets_total = len(targets)
    if n_targets_total > params.max_targets:
        targets = np.sort(rng.choice(targets, params.max_targets, replace=False))
    raw_order = np.argsort(enc.raw_obj, kind="stable")
    bounds = np.searchsorted(enc.raw_obj[raw_order], np.r_[targets, n_obj])
    if params.kind == "home_work":
        risks, n_inst, sampled = _home_work_risks(enc, targets, cand)
    else:
        seq_index = _SequenceIndex(enc, cand) if params.kind == "location_sequence" else None
        rows = np.searchsorted(cand, enc.rel_obj)
        cand_counts = sparse.coo_matrix((np.ones(len(rows)), (rows, enc.rel_key)),
                                        shape=(len(cand), enc.n_keys)).tocsc()
        totals = np.bincount(rows, minlength=len(cand)).astype(float)
        risks, n_inst, sampled = (np.zeros(len(targets)), np.zeros(len(targets), np.int64),
                                  np.zeros(len(targets), bool))
        for i, u in enumerate(targets):
            keys = enc.raw_key[raw_order[bounds[i]:bounds[i + 1]]]
            owner_row = int(np.searchsorted(cand, u))
            risks[i], n_inst[i], sampled[i] = _target_risk(keys, cand_counts, totals, owner_row, params, rng,
                                                            seq_index)
    out = pd.DataFrame({"object_id": enc.objects[targets], "risk": risks, "n_instances": n_inst,
                        "sampled": sampled})
    out.attrs["n_candidates"] = len(cand)
    out.attrs["n_targets_total"] = n_targets_total
    return out


class Reidentification(Attack[ReidentificationParams]):
    """One kind of Pellungrini et al.'s re-identification attack, on a truthful release (``object_id`` kept).

    Targets: the raw objects that own released data; candidates: the released objects (the release's
    ``object_id`` stands for a per-object pseudonym, as scikit-mobility's ``uid``). The per-object risks are
    :func:`reidentification_risks`. For the gate: ``n_successes`` is the sum of the risks, i.e. the expected
    number of targets re-identified by an adversary who holds each target's most identifying k elements and
    picks uniformly among the matching records (a float, as for tie-broken linkage); the share of targets at
    risk 1 (uniquely re-identified) is in the evidence. Baseline: a random guess among the candidates.
    """

    @property
    def name(self) -> str:
        return self.params.attack_name

    @property
    def raw_columns(self) -> tuple[str, ...]:
        return ("object_id", *self._columns())

    @property
    def release_columns(self) -> tuple[str, ...]:
        return ("object_id", *self._columns())

    def _columns(self) -> tuple[str, ...]:
        loc = ("cell",) if self.params.location == "cell" else ("lon", "lat")
        timed = self.params.kind in ("location_sequence", "location_time")
        return (*loc, *(("t",) if timed else ()))

    def risks(self, raw: pd.DataFrame, release: pd.DataFrame) -> pd.DataFrame:
        """The per-target risks of :func:`reidentification_risks`, after the input checks of :meth:`evaluate`."""
        for frame, columns, label in ((raw, self.raw_columns, "raw"), (release, self.release_columns, "release")):
            require_columns(frame, columns, f"{self.name}: {label} frame")
            if frame.empty:
                raise InputError(f"the {label} frame is empty: nothing to attack", f"{self.name}: {label} frame")
        return reidentification_risks(raw, release, self.params)

    def _attack(self, raw: pd.DataFrame, release: pd.DataFrame) -> AttackResult:
        p = self.params
        risks = reidentification_risks(raw, release, p)
        n_candidates = int(risks.attrs["n_candidates"])
        r = risks["risk"].to_numpy()
        unique = risks[risks["risk"] >= 1.0]
        evidence: dict[str, Any] = {
            "kind": p.kind,
            "knowledge_length": p.knowledge_length if p.kind != "home_work" else 2,
            "location": p.location,
            **({"time_precision": p.time_precision, "timezone": p.timezone} if p.kind == "location_time" else {}),
            **({"tolerance": p.tolerance} if p.kind in _TOLERANCE_KINDS else {}),
            "n_candidates": n_candidates,
            "success_kind": "sum of per-target risks (expected re-identifications)",
            "unique_share": float((r >= 1.0).mean()),
            "mean_risk": float(r.mean()),
            "risk_quantiles": {q: float(np.quantile(r, float(q))) for q in ("0.1", "0.5", "0.9")},
            "max_instances": p.max_instances,
            "n_sampled_targets": int(risks["sampled"].sum()),
            "n_targets_total": int(risks.attrs["n_targets_total"]),
            "max_targets": p.max_targets,
            "examples": [{"owner": str(o), "risk": 1.0} for o in unique["object_id"].head(MAX_EXAMPLES)],
        }
        return AttackResult(attack=self.name, n_targets=len(risks), n_successes=float(r.sum()),
                            baseline=1 / n_candidates, evidence=evidence, confidence=p.confidence)


# --- encoding -------------------------------------------------------------------------------------------------


def _encode(raw: pd.DataFrame, release: pd.DataFrame, p: ReidentificationParams) -> _Encoded:
    frames = []
    for frame in (raw, release):
        f = pd.DataFrame({"object_id": frame["object_id"].astype(str).to_numpy()})
        if p.location == "cell":
            cell = frame["cell"].to_numpy()
            if not np.issubdtype(cell.dtype, np.integer):
                raise InputError(f"column cell must hold integers, got {cell.dtype}", p.attack_name)
            f["a"], f["b"] = cell.astype(float), 0.0
            ok = cell >= 0
        else:
            f["b"], f["a"] = frame["lon"].to_numpy(dtype=float), frame["lat"].to_numpy(dtype=float)
            ok = np.isfinite(f["a"].to_numpy()) & np.isfinite(f["b"].to_numpy())
        f["t"] = epoch_seconds(frame["t"]) if "t" in frame.columns else np.nan
        if p.kind == "location_time":
            f["bin"] = _time_bins(frame["t"], p) if "t" in frame.columns else np.nan
            ok &= np.isfinite(f["bin"].to_numpy())
        for c in ("traj_id", "seq"):
            f[c] = frame[c].to_numpy() if c in frame.columns else 0
        frames.append(f[ok])
    both = pd.concat(frames, ignore_index=True)
    n_raw = len(frames[0])
    loc_codes, loc_a, loc_b = _pair_codes(both["a"].to_numpy(), both["b"].to_numpy())
    if p.kind == "location_time":
        bin_codes, _ = pd.factorize(both["bin"].to_numpy())
        key, uniques = pd.factorize(loc_codes * (int(bin_codes.max()) + 1) + bin_codes)
        loc_of_key = np.asarray(uniques) // (int(bin_codes.max()) + 1)
    else:
        key, loc_of_key = loc_codes, np.arange(len(loc_a))
    # location order for tie-breaks: cell id, or latitude then longitude
    loc_rank = np.empty(len(loc_a), dtype=np.int64)
    loc_rank[np.lexsort((loc_b, loc_a))] = np.arange(len(loc_a))
    obj_codes, objects = pd.factorize(both["object_id"], sort=True)
    both["obj"], both["key"] = obj_codes, key
    both["_order"] = np.arange(len(both))
    order_cols = ["obj", "t", "traj_id", "seq", "_order"]
    raw_part = both.iloc[:n_raw].sort_values(order_cols, kind="stable", na_position="last")
    rel_part = both.iloc[n_raw:].sort_values(order_cols, kind="stable", na_position="last")
    return _Encoded(raw_obj=raw_part["obj"].to_numpy(np.int64), raw_key=raw_part["key"].to_numpy(np.int64),
                    rel_obj=rel_part["obj"].to_numpy(np.int64), rel_key=rel_part["key"].to_numpy(np.int64),
                    objects=np.asarray(objects).astype(str), n_keys=int(key.max()) + 1 if len(key) else 0,
                    key_order=loc_rank[loc_of_key])


def _pair_codes(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact codes of the pairs (a, b), and each code's a and b."""
    ca, ua = pd.factorize(a)
    cb, ub = pd.factorize(b)
    codes, pairs = pd.factorize(ca.astype(np.int64) * max(len(ub), 1) + cb)
    pairs = np.asarray(pairs, dtype=np.int64)
    return codes, np.asarray(ua)[pairs // max(len(ub), 1)], np.asarray(ub)[pairs % max(len(ub), 1)]


def _time_bins(t: pd.Series, p: ReidentificationParams) -> np.ndarray:
    """The local time floored to ``time_precision``, as a float (NaN for NaT)."""
    stamps = pd.to_datetime(t, utc=True, errors="coerce")
    local = pd.Series(stamps.dt.tz_convert(p.timezone).dt.tz_localize(None).to_numpy())
    if p.time_precision in ("year", "month"):
        years, months = local.dt.year.to_numpy(dtype=float), local.dt.month.to_numpy(dtype=float)
        return years if p.time_precision == "year" else years * 12 + months - 1
    unit = {"day": "D", "hour": "h", "minute": "min", "second": "s"}[p.time_precision]
    return (local.dt.floor(unit).to_numpy() - np.datetime64(0, "s")) / np.timedelta64(1, "s")


# --- per-target risk ------------------------------------------------------------------------------------------


def _target_risk(keys: np.ndarray, cand_counts: sparse.csc_matrix, totals: np.ndarray, owner_row: int,
                 p: ReidentificationParams, rng: np.random.Generator, seq_index: _SequenceIndex | None
                 ) -> tuple[float, int, bool]:
    """Max over the target's instances of [owner matches] / |matching candidates|."""
    distinct, inverse, freq = np.unique(keys, return_inverse=True, return_counts=True)
    if p.kind in _POINT_KINDS:
        elements = inverse  # instance elements: points, as indices into ``distinct``
    else:
        elements = np.arange(len(distinct))  # instance elements: distinct locations
    k = min(p.knowledge_length, len(elements))
    positions, sampled = _instances(len(elements), k, p.max_instances, rng)
    inst = elements[positions]  # (B, k) indices into ``distinct``; rows in time order for point kinds
    inst = _deduplicate(inst, ordered=p.kind == "location_sequence")
    gathered = cand_counts[:, distinct].toarray()  # candidates x distinct keys: release visit counts
    batch = max(1, _BATCH_ELEMENTS // max(1, gathered.shape[0] * k))
    risk = 0.0
    for start in range(0, len(inst), batch):
        chunk = inst[start:start + batch]
        match = _match(chunk, gathered, totals, freq, len(keys), distinct, p, seq_index)
        n_match = match.sum(axis=0)
        own = match[owner_row]
        chunk_risk = np.where(own, 1.0 / np.maximum(n_match, 1), 0.0)
        risk = max(risk, float(chunk_risk.max()))
        if risk >= 1.0:
            break
    return risk, len(inst), sampled


def _instances(n: int, k: int, max_instances: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """All k-subsets of range(n) (rows sorted ascending) when there are at most ``max_instances``, else a
    uniform sample of ``max_instances`` of them (with replacement between rows, none within a row)."""
    if math.comb(n, k) <= max_instances:
        return np.array(list(combinations(range(n), k)), dtype=np.int64).reshape(-1, k), False
    rows = rng.integers(0, n, size=(max_instances, k))
    while True:
        rows.sort(axis=1)
        bad = (np.diff(rows, axis=1) == 0).any(axis=1) if k > 1 else np.zeros(len(rows), bool)
        if not bad.any():
            return rows, True
        rows[bad] = rng.integers(0, n, size=(int(bad.sum()), k))


def _deduplicate(inst: np.ndarray, ordered: bool) -> np.ndarray:
    """Instances that are the same multiset (or, for sequences, the same sequence) of keys are one instance."""
    rows = inst if ordered else np.sort(inst, axis=1)
    return np.unique(rows, axis=0)


def _match(inst: np.ndarray, gathered: np.ndarray, totals: np.ndarray, freq: np.ndarray, n_points: int,
           distinct: np.ndarray, p: ReidentificationParams, seq_index: _SequenceIndex | None) -> np.ndarray:
    """Candidates x instances: does the candidate's released data match the instance?"""
    g = gathered[:, inst]  # candidates x B x k: the candidate's count of each instance element's key
    if p.kind in ("location", "location_time", "location_sequence"):
        multiplicity = (inst[:, :, None] == inst[:, None, :]).sum(axis=2)  # B x k
        match = (g >= multiplicity[None]).all(axis=2)
        if p.kind == "location_sequence":
            match = seq_index.subsequence(match, distinct[inst])  # type: ignore[union-attr]
        return match
    if p.kind == "unique_location":
        return (g > 0).all(axis=2)
    present = (g > 0).all(axis=2)
    f = freq[inst].astype(float)[None]  # 1 x B x k: the target's raw counts
    if p.kind == "location_frequency":
        mine, theirs = f, g
    elif p.kind == "location_probability":
        mine, theirs = f / n_points, g / np.maximum(totals, 1)[:, None, None]
    else:  # location_proportion: relative to the largest count among the instance's locations
        mine = f / f.max(axis=2, keepdims=True)
        theirs = g / np.maximum(g.max(axis=2, keepdims=True), 1)
    low, high = theirs * (1 - p.tolerance), theirs * (1 + p.tolerance)
    slack = _REL_EPS * np.maximum(np.abs(theirs), 1e-300)
    return present & ((mine >= low - slack) & (mine <= high + slack)).all(axis=2)


class _SequenceIndex:
    """Every candidate's time-ordered keys in one sorted array of ``(candidate row, key, position)`` codes, for
    the greedy sub-sequence test: take the earliest occurrence of each instance key after the previous one."""

    def __init__(self, enc: _Encoded, cand: np.ndarray):
        row = np.searchsorted(cand, enc.rel_obj)
        starts = np.searchsorted(enc.rel_obj, enc.rel_obj, side="left")
        position = np.arange(len(enc.rel_obj)) - starts
        self.length = int(position.max()) + 2 if len(position) else 2
        self.n_keys = max(enc.n_keys, 1)
        if len(cand) * self.n_keys * self.length >= 2**62:
            raise InputError("too many candidates x locations x points for the sequence index",
                             "reidentification_location_sequence")
        self.codes = np.sort((row * self.n_keys + enc.rel_key) * self.length + position)

    def subsequence(self, match: np.ndarray, inst_keys: np.ndarray) -> np.ndarray:
        """Refine ``match`` (candidates x instances, a necessary condition) to the pairs where the instance's
        keys (``inst_keys``: instances x k, in order) occur in this order in the candidate's sequence."""
        cand_rows, inst_rows = np.nonzero(match)
        cursor = np.full(len(cand_rows), -1, dtype=np.int64)
        alive = np.ones(len(cand_rows), dtype=bool)
        for j in range(inst_keys.shape[1]):
            prefix = cand_rows * self.n_keys + inst_keys[inst_rows, j]
            at = np.searchsorted(self.codes, prefix * self.length + cursor + 1)
            found = np.zeros(len(at), dtype=bool)
            inside = at < len(self.codes)
            found[inside] = self.codes[at[inside]] // self.length == prefix[inside]
            alive &= found
            cursor = np.where(found, self.codes[np.minimum(at, len(self.codes) - 1)] % self.length, cursor)
        out = np.zeros_like(match)
        out[cand_rows[alive], inst_rows[alive]] = True
        return out


def _home_work_risks(enc: _Encoded, targets: np.ndarray, cand: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The target's two most visited raw locations must all be among a candidate's two most visited released
    ones; one instance per target."""
    def top_two(obj: np.ndarray, key: np.ndarray) -> pd.DataFrame:
        visits = pd.DataFrame({"obj": obj, "key": key}).value_counts().rename("n").reset_index()
        visits["order"] = enc.key_order[visits["key"].to_numpy()]
        visits = visits.sort_values(["obj", "n", "order"], ascending=[True, False, True], kind="stable")
        return visits.groupby("obj").head(2)

    raw_sets = top_two(enc.raw_obj, enc.raw_key).groupby("obj")["key"].agg(frozenset)
    rel_sets = top_two(enc.rel_obj, enc.rel_key).groupby("obj")["key"].agg(frozenset).reindex(cand)
    # a known set of two keys is contained only in an equal set; a single key in every set holding it
    same_set = Counter(rel_sets.to_numpy())
    holding = Counter(key for keys in rel_sets.to_numpy() for key in keys)
    risks = np.zeros(len(targets))
    for i, u in enumerate(targets):
        known = raw_sets[u]
        n_matching = same_set[known] if len(known) == 2 else holding[next(iter(known))]
        risks[i] = 1.0 / n_matching if known <= rel_sets[u] else 0.0
    return risks, np.ones(len(targets), np.int64), np.zeros(len(targets), bool)
