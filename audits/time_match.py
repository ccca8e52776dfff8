"""Membership inference by time on synthetic releases: a released record that keeps a member's timestamps links
it, wherever the record was moved, turned or mirrored (members against held-out controls, :mod:`audits.controls`).

A "blurring" generator publishes real records altered in place (translated, rotated, mirrored, noised, reversed,
spliced) and defeats every attack anchored in place (DCR, the shadow ratio, cell signatures) while it keeps what
identifies a trip to anyone who holds the raw data: when it started and ended, and how far it went between two
fixes. "A Dual Perspective on Synthetic Trajectory Generators" (arXiv 2604.19653, 2026) shows such models resist
trajectory-user linking and fall to membership inference; trajectory-user-linking models (TULER, Gao et al.,
IJCAI 2017; DeepTUL, Miao et al., 2020) learn exactly these invariants. Two exact rules, each an index join
(hash joins: linear in the points, never a records x records product):

- *every fix's time*: a released record has as many fixes as a raw record, at the same instants, each floored
  to the release's time precision ``p`` (the precision the flow floors released times to, read off the release:
  the greatest common divisor of its timestamps in seconds, unless ``precision_s`` says). Moving, turning,
  mirroring, noising or reversing a record in space over the same times keeps them all. A record's start and end
  alone are not enough: a synthesizer of the fleet starts and ends records in the same minutes as raw ones by
  chance often enough (CityTrace ε 5 on the T-Drive sample: the start and end minutes of some record of 37% of
  the control taxis, most of them cut at a UTC midnight by the preparation) to drown a membership signal, and so
  does a record of fewer than ``min_fixes`` fixes (4: a start, an end and two instants between), which is little
  more than its start and end.
- *a run of fixes*: ``gram_points`` consecutive released points carry the timestamps of ``gram_points``
  consecutive raw points (floored to ``p``) and the same step lengths between them, within ``step_tolerance_m +
  step_tolerance_rel x`` the step (a rigid motion keeps lengths; a generator's local projection distorts them by
  ``tan(lat)`` times the record's north-south move in radians, 0.07% for a record moved 5 km at Beijing's
  latitude, hence 0.1%; a looser tolerance lets cabs cruising a freeway at one speed match each other's runs by
  chance, see below), over at least ``min_gram_m`` in all (a parked car's fixes say nothing); or the
  step lengths of the same raw record read backwards from its end (a path reversed over the same times); or the
  times of every s-th raw fix (s <= ``max_skip``) and the straight distances between them (a record resampled by
  keeping every few fixes, then moved or turned). It finds the half of a member's record spliced onto another's,
  and a member's record thinned, turned and moved.

A signature links only when it *singles out* one raw object: a released record's times, or a released run, that
match records of two raw objects or more (members or controls) identify neither, and link none of them (singling
out as the criterion of identification: Article 29 Working Party, Opinion 05/2014 on anonymisation techniques;
Anonymeter's singling-out risk, Giomi et al., PoPETs 2023). Without it the rules saturate on a fleet whose fixes
are evenly spaced and whose cabs cruise at one speed: on the San Francisco sample (60 s fixes) a run of four
freeway fixes about 1.5 km apart each minute matches, within the step tolerance, some other cab's freeway run in
the same minutes, and a member's record moved 2 km linked the controls cruising beside it (52 of 76 controls by
runs on the first draw of the translation control; a regular record's ticks are its start and its length, shared
the same way). The threshold is the definition (one object), not a fitted number; it costs a member its link only
where the released signature is shared by another raw object, which links that object no more than chance.

An object is *linked* when any of its records is. Success = the share of members linked, baseline = the share of
controls (records of the population that the release never saw, matched by the same rules: what chance and a
release that learns only the population's timing give), risk ``(members - controls) / (1 - controls)`` with
Newcombe's interval. A synthesizer that places its times by a noisy model of the fleet matches members and
controls alike, whatever its realism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from audits.attack import Attack, NotApplicable
from audits.controls import MemberControl, members_and_controls
from audits.result import AttackResult
from trajpub.params import Scope

NAME = "membership_time"
METRES_PER_DEGREE = 111_320.0
LOG_BIN = math.log(1.05)
"""Width of the step-length bins the run-of-fixes join hashes on (log(100 m + step)); a released step is looked
up in its bin and both neighbours, so a step within the tolerance (at most 0.04 in that log, checked) is never
missed."""
BIN_OFFSET_M = 100.0
MAX_PRECISION_S = 86_400


@dataclass(frozen=True)
class TimeMatchParams:
    """Parameters of :class:`TimeMatch` (the module docstring).

    precision_s: the release's time precision in seconds; None reads it off the release (the greatest common
        divisor of its timestamps, at most a day).
    min_fixes: the fewest fixes of a raw record matched by every fix's time.
    gram_points: the fixes of a run (>= 3: two steps).
    max_skip: runs of every 2nd, ..., ``max_skip``-th raw fix are matched too (1: consecutive fixes only).
    min_gram_m: the least length of a run, metres.
    step_tolerance_m, step_tolerance_rel: how far a released step may differ from the raw one.
    confidence: the confidence level of the intervals.
    """

    precision_s: float | None = None
    min_fixes: int = 4
    gram_points: int = 4
    max_skip: int = 4
    min_gram_m: float = 500.0
    step_tolerance_m: float = 2.0
    step_tolerance_rel: float = 0.001
    confidence: float = 0.95

    def __post_init__(self) -> None:
        p = Scope(NAME)
        if self.precision_s is not None:
            p.require_real(self.precision_s, "precision_s", 1, MAX_PRECISION_S)
        p.require_int(self.min_fixes, "min_fixes", 2)
        p.require_int(self.gram_points, "gram_points", 3)
        p.require_int(self.max_skip, "max_skip", 1)
        p.require_real(self.min_gram_m, "min_gram_m", 0, 1e6)
        p.require_real(self.step_tolerance_m, "step_tolerance_m", 0, 2.0)
        p.require_real(self.step_tolerance_rel, "step_tolerance_rel", 0, 0.02)
        p.require_real(self.confidence, "confidence", 0.5, 1 - 1e-12)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def release_precision_s(release: pd.DataFrame) -> int:
    """The greatest common divisor of the released timestamps in whole seconds since the epoch (at most a day;
    1 when they are not whole seconds): the precision the flow floored them to, or a multiple of it."""
    s = epoch_seconds(release["t"].dropna())
    if len(s) == 0 or np.any(s != np.round(s)):
        return 1
    return int(min(np.gcd.reduce(s.astype(np.int64)), MAX_PRECISION_S)) or 1


def epoch_seconds(t: pd.Series) -> np.ndarray:
    """Timestamps (naive ones read as UTC) as seconds since the epoch, whatever their resolution."""
    utc = t.dt.tz_convert("UTC") if t.dt.tz is not None else t.dt.tz_localize("UTC")
    return (utc - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()


@dataclass(frozen=True)
class Fixes:
    """A frame's timed points in record order: ``record`` (0..n-1 in order of ``ids``), ``tick`` (time floored
    to ``precision_s``, in its units), ``step`` (metres to the record's next point, NaN at its last) and ``back``
    (the step the point would have if the record's path were reversed over the same times: the step between the
    mirror points from its end)."""

    ids: np.ndarray
    record: np.ndarray
    tick: np.ndarray
    step: np.ndarray
    back: np.ndarray
    precision_s: int
    lon: np.ndarray
    lat: np.ndarray

    @classmethod
    def of(cls, frame: pd.DataFrame, precision_s: int) -> Fixes:
        lon, lat = frame["lon"].to_numpy(float), frame["lat"].to_numpy(float)
        ok = np.isfinite(lon) & np.isfinite(lat) & frame["t"].notna().to_numpy()
        pts = frame[ok].sort_values(["traj_id", "seq"], kind="stable")
        codes, ids = pd.factorize(pts["traj_id"])
        tick = np.floor(epoch_seconds(pts["t"]) / precision_s).astype(np.int64)
        x, y = pts["lon"].to_numpy(float), pts["lat"].to_numpy(float)
        mid = np.radians((y[1:] + y[:-1]) / 2)
        step = np.hypot(np.diff(x) * np.cos(mid), np.diff(y)) * METRES_PER_DEGREE
        step = np.r_[np.where(codes[1:] == codes[:-1], step, np.nan), np.nan]
        first = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else np.zeros(0, np.int64)
        last = np.r_[first[1:], len(codes)] - 1
        i = np.arange(len(codes))
        mirror = first[codes] + last[codes] - i - 1  # the step from the mirror point back towards the end
        back = np.where(i < last[codes], step[np.clip(mirror, 0, None)], np.nan) if len(codes) else step
        return cls(np.asarray(ids), codes.astype(np.int64), tick, step, back, int(precision_s), x, y)

    def chord(self, skip: int) -> np.ndarray:
        """Metres from each fix to the fix ``skip`` later in its record (NaN where there is none)."""
        if skip == 1:
            return self.step
        out = np.full(len(self.record), np.nan)
        i = np.arange(len(self.record) - skip)
        j = i + skip
        mid = np.radians((self.lat[i] + self.lat[j]) / 2)
        d = np.hypot((self.lon[j] - self.lon[i]) * np.cos(mid), self.lat[j] - self.lat[i]) * METRES_PER_DEGREE
        out[i] = np.where(self.record[i] == self.record[j], d, np.nan)
        return out

    def timings(self) -> pd.DataFrame:
        """Per record: its number of fixes, first and last tick, and the sum and the sum of squares of its ticks
        from the first (a fingerprint of the whole sequence, which :meth:`same_ticks` then checks)."""
        first = np.r_[True, self.record[1:] != self.record[:-1]]
        start = self.tick[first]
        rel = (self.tick - start[self.record]).astype(np.float64)
        n = np.bincount(self.record)
        return pd.DataFrame({"record": np.arange(len(n)), "n": n, "start": start,
                             "end": self.tick[np.cumsum(n) - 1],
                             "sum": np.bincount(self.record, rel), "squares": np.bincount(self.record, rel ** 2)})

    def same_ticks(self, a: np.ndarray, other: Fixes, b: np.ndarray) -> np.ndarray:
        """Whether record ``a`` of these fixes and record ``b`` of ``other`` (pairs of equal length) have the same
        ticks, fix for fix."""
        first = np.flatnonzero(np.r_[True, self.record[1:] != self.record[:-1]])
        other_first = np.flatnonzero(np.r_[True, other.record[1:] != other.record[:-1]])
        n = np.bincount(self.record)[a]
        ok = np.ones(len(a), bool)
        for j in range(int(n.max()) if len(n) else 0):
            has = j < n
            ok[has] &= self.tick[first[a[has]] + j] == other.tick[other_first[b[has]] + j]
        return ok

    def grams(self, k: int, min_length_m: float, steps: np.ndarray, skip: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """(first point, bin of its step in ``steps``) of every run of ``k`` fixes of one record, every ``skip``-th
        (``steps``: metres from each fix to the next of the run), at least ``min_length_m`` long."""
        n = len(self.record) - (k - 1) * skip
        if n <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        start = np.arange(n)
        same = self.record[start] == self.record[start + (k - 1) * skip]
        run = np.stack([steps[start + j * skip] for j in range(k - 1)], axis=1)
        keep = same & np.isfinite(run).all(axis=1) & (np.nansum(run, axis=1) >= min_length_m)
        start = start[keep]
        return start, _length_bin(steps[start])

    def key(self, start: np.ndarray, k: int, length_bin: np.ndarray, skip: int = 1) -> np.ndarray:
        """A hash of a run's ticks and its first step's bin (collisions are weeded out by :func:`_verified`)."""
        h = np.full(len(start), np.uint64(1469598103934665603))
        with np.errstate(over="ignore"):
            for value in [*(self.tick[start + j * skip] for j in range(k)), length_bin]:
                h = (h ^ value.astype(np.uint64)) * np.uint64(1099511628211)
        return h


def _length_bin(step: np.ndarray) -> np.ndarray:
    return np.floor(np.log(step + BIN_OFFSET_M) / LOG_BIN).astype(np.int64)


class TimeMatch(Attack[TimeMatchParams]):
    """``membership_time`` (the module docstring): members against controls.

    ``raw``: every member's and control's records with the ``member`` column; ``release``: the synthetic records
    (``traj_id``, ``seq``, ``t``, ``lon``, ``lat``). Not applicable to a release without timestamps.
    """

    @property
    def name(self) -> str:
        return NAME

    @property
    def raw_columns(self) -> tuple[str, ...]:
        return ("object_id", "traj_id", "seq", "t", "lon", "lat", "member")

    @property
    def release_columns(self) -> tuple[str, ...]:
        return ("traj_id", "seq", "t", "lon", "lat")

    def _attack(self, raw: pd.DataFrame, release: pd.DataFrame) -> AttackResult:
        members, controls = members_and_controls(raw, f"{NAME}: raw frame")
        if release["t"].notna().sum() == 0:
            raise NotApplicable("the release has no timestamps: there is no time to match", f"{NAME}: release")
        p = self.params
        precision = int(p.precision_s) if p.precision_s is not None else release_precision_s(release)
        raw_fixes, rel_fixes = Fixes.of(raw, precision), Fixes.of(release, precision)
        owner = raw.groupby("traj_id")["object_id"].first().astype(str)
        owner_code = pd.factorize(owner.reindex(raw_fixes.ids))[0]
        by_times = self._times(raw_fixes, rel_fixes, owner_code)
        by_runs = self._runs(raw_fixes, rel_fixes, owner_code)
        linked_objects = {rule: set(owner.reindex(raw_fixes.ids[sorted(records)]))
                          for rule, records in (("times", by_times), ("runs", by_runs))}
        linked = linked_objects["times"] | linked_objects["runs"]
        m, c = members.isin(list(linked)), controls.isin(list(linked))
        comparison = MemberControl.rates(float(m.sum()), len(m), float(c.sum()), len(c), p.confidence)
        evidence = {
            "rule": "a released record with a raw record's times, fix for fix, or a run of its fixes with their "
                    "times and step lengths, matching the records of one raw object only",
            "precision_s": precision,
            "gram_points": p.gram_points,
            **{f"{who}_linked_by_{rule}": int(objs.isin(list(found)).sum())
               for rule, found in linked_objects.items() for who, objs in (("members", members),
                                                                           ("controls", controls))},
            "n_released_trajectories": int(release["traj_id"].nunique()),
            "examples": [],
        }
        return AttackResult.against_controls(NAME, comparison, evidence)

    def _times(self, raw: Fixes, release: Fixes, owner: np.ndarray) -> set[int]:
        """The raw records of at least ``min_fixes`` fixes whose every fix's tick some released record shares, fix
        for fix, with no other raw object's record (``owner``: each raw record's object)."""
        keys = ["n", "start", "end", "sum", "squares"]
        timings = raw.timings()
        joined = timings[timings["n"] >= self.params.min_fixes].merge(release.timings(), on=keys, suffixes=("", "_released"))
        a, b = joined["record"].to_numpy(), joined["record_released"].to_numpy()
        ok = raw.same_ticks(a, release, b)
        return _singled_out(a[ok], b[ok], owner)

    def _runs(self, raw: Fixes, release: Fixes, owner: np.ndarray) -> set[int]:
        """The raw records a released run of fixes matches, when it matches no other raw object's (``owner``:
        each raw record's object): times, and step lengths forwards or backwards; or times and the chords between
        every ``skip``-th raw fix (a record resampled by keeping every few fixes)."""
        k, p = self.params.gram_points, self.params
        rel_start, rel_bin = release.grams(k, p.min_gram_m, release.step)
        records, runs = [], []
        ways = [(raw.step, 1), (raw.back, 1), *((raw.chord(s), s) for s in range(2, p.max_skip + 1))]
        for steps, skip in ways:
            raw_start, raw_bin = raw.grams(k, p.min_gram_m, steps, skip)
            if len(raw_start) == 0 or len(rel_start) == 0:
                continue
            raw_key = raw.key(raw_start, k, raw_bin, skip)
            order = np.argsort(raw_key, kind="stable")
            for shift in (-1, 0, 1):
                i, j = _equal_keys(raw_key[order], release.key(rel_start, k, rel_bin + shift))
                a, b = raw_start[order[i]], rel_start[j]
                ok = _verified(raw, a, steps, skip, release, b, k, p.step_tolerance_m, p.step_tolerance_rel)
                records.append(raw.record[a[ok]])
                runs.append(b[ok])
        if not records:
            return set()
        return _singled_out(np.concatenate(records), np.concatenate(runs), owner)


def _singled_out(raw_records: np.ndarray, released: np.ndarray, owner: np.ndarray) -> set[int]:
    """The raw records of the matches ``(raw_records[i], released[i])`` whose released signature (a record or a
    run's first point) matches the records of one raw object only (``owner``: each raw record's object)."""
    if len(raw_records) == 0:
        return set()
    pairs = pd.DataFrame({"raw": raw_records, "released": released, "owner": owner[raw_records]})
    objects = pairs.groupby("released")["owner"].transform("nunique")
    return set(pairs.loc[objects.to_numpy() == 1, "raw"].tolist())


def _equal_keys(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i, j) with ``sorted_keys[i] == keys[j]``: a join by binary search, which sorts the large side
    once and never hashes it again."""
    by_key = np.argsort(keys, kind="stable")  # sorted queries: the search walks memory in order
    lo = np.searchsorted(sorted_keys, keys[by_key], "left")
    hi = np.searchsorted(sorted_keys, keys[by_key], "right")
    counts = hi - lo
    j = np.repeat(by_key, counts)
    i = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(lo, counts)
    return i, j


def _verified(raw: Fixes, a: np.ndarray, raw_steps: np.ndarray, skip: int, release: Fixes, b: np.ndarray, k: int,
              tol_m: float, tol_rel: float) -> np.ndarray:
    """Whether the runs at raw points ``a`` (every ``skip``-th fix, steps ``raw_steps``) and released points ``b``
    have the same ticks and steps within the tolerance."""
    ok = np.ones(len(a), bool)
    for j in range(k):
        ok &= raw.tick[a + j * skip] == release.tick[b + j]
    for j in range(k - 1):
        ra, rb = raw_steps[a + j * skip], release.step[b + j]
        ok &= np.abs(ra - rb) <= tol_m + tol_rel * ra
    return ok
