"""Home and work inference: attribute linkage from night-time and weekday-daytime places (attack A7, docs/design.md).

The survey (Sec. 2.2.1, refs [40], [43]) lists home and work as the most common attributes inferred from
trajectories: home is where a person spends the nights (Gambs, Killijian, del Prado Cortez, "Show me how you
move and I will tell you who you are", 2010), work where they spend weekday working hours (Zang, Bolot, "Anonymization of
location data does not work", MobiCom 2011). Why (docs/design.md, The attacks):
k-anonymity and dummies do not stop it, and it is the most concrete real-world harm; the metric is the fraction
of users whose home/work inferred from D* is within r of the truth (250-500 m).

Inference, the same on both sides: a place is a square of ``place_size_m`` metres of the plane of
:func:`audits.planar.planar_coordinates`; an object's home is the place where it was seen during the most
distinct night hours (``night_hours``, local time), its work the place of the most distinct weekday working hours
(``work_hours`` on ``work_days``). Counting distinct hours rather than points makes the choice insensitive to the
sampling rate. The place's position is the mean of the object's points there in that time window. The truth is
inferred from the raw data, the adversary's guess from the release.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from audits.attack import Attack, AttackParams, NotApplicable
from audits.neighbours import flatten_hits
from audits.planar import planar_coordinates
from audits.result import MAX_EXAMPLES, AttackResult
from trajpub.errors import ParameterError
from trajpub.params import Scope

NAME = "home_work"
SUCCESS_CRITERIA = ("home", "work", "either", "both")
PLACES = ("home", "work")

_P = Scope(NAME)


@dataclass(frozen=True)
class HomeWorkParams(AttackParams):
    """Parameters of :class:`HomeWorkInference`.

    radius_m: r, an inferred place within r metres of the true one is a hit (docs/design.md, A7: 250-500 m).
    place_size_m: the side of the square places that are counted (independent of the release's grid).
    timezone: the IANA zone in which hours and weekdays are read (T-Drive: ``"Asia/Shanghai"``). The gate
        sets the dataset's local zone, recorded at load, where the policy sets none
        (:meth:`audits.gate.GatePolicy.in_timezone`); UTC when the zone is unknown.
    night_hours: ``(start, end)`` local hours of the night window, ``start <= h < end``, wrapping past midnight
        when start > end (default 22:00-06:00).
    work_hours: ``(start, end)`` local hours of the working window (default 09:00-17:00).
    work_days: the weekdays of the working window, Monday = 0.
    success: what counts as a successful inference for a target: ``"home"``, ``"work"``, ``"either"`` (home
        or work within r: the default, the attribute disclosure the gate must bound) or ``"both"``.
    confidence: the confidence level of the reported Wilson interval.
    """

    scope = _P

    radius_m: float = 500.0
    place_size_m: float = 250.0
    timezone: str = "UTC"
    night_hours: tuple[int, int] = (22, 6)
    work_hours: tuple[int, int] = (9, 17)
    work_days: tuple[int, ...] = (0, 1, 2, 3, 4)
    success: str = "either"
    confidence: float = 0.95

    def __post_init__(self) -> None:
        _P.require_real(self.radius_m, "radius_m", 0)
        _P.require_real(self.place_size_m, "place_size_m", 0)
        try:
            pd.Timestamp("2000-01-01", tz=self.timezone)
        except Exception as exc:  # pandas raises several types for an unknown zone
            raise ParameterError(f"unknown timezone {self.timezone!r}", _P.where("timezone")) from exc
        for name in ("night_hours", "work_hours"):
            window = getattr(self, name)
            if not (isinstance(window, tuple) and len(window) == 2
                    and all(isinstance(h, int) and not isinstance(h, bool) and 0 <= h <= 23 for h in window)
                    and window[0] != window[1]):
                raise ParameterError(f"{name} must be two different hours in 0..23, got {window!r}",
                                     _P.where(name))
        if not (isinstance(self.work_days, tuple) and self.work_days
                and all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= 6 for d in self.work_days)):
            raise ParameterError(f"work_days must be a non-empty tuple of weekdays 0..6, got {self.work_days!r}",
                                 _P.where("work_days"))
        _P.require_choice(self.success, "success", SUCCESS_CRITERIA)
        _P.require_real(self.confidence, "confidence", 0, 1 - 1e-12)


def infer_places(frame: pd.DataFrame, xy: np.ndarray, params: HomeWorkParams) -> pd.DataFrame:
    """Each object's home and work: a frame indexed by ``object_id`` (str) with ``home_x, home_y, work_x,
    work_y`` in metres (NaN when the object has no point in the window) and the number of distinct hours behind
    each (``home_hours``, ``work_hours``).

    Ties between places with as many distinct hours are broken by the number of points, then by the place's
    grid index, so the inference does not depend on the order of the rows.
    """
    t = pd.to_datetime(frame["t"], utc=True, errors="coerce")
    ok = t.notna().to_numpy() & np.isfinite(xy).all(axis=1)
    local = t[ok].dt.tz_convert(params.timezone)
    hour = local.dt.hour.to_numpy()
    points = pd.DataFrame({
        "object_id": frame["object_id"].astype(str).to_numpy()[ok],
        "x": xy[ok, 0], "y": xy[ok, 1],
        "slot": t[ok].dt.floor("h").to_numpy(),  # hour slots in UTC: no ambiguity at DST changes
        "night": _in_window(hour, params.night_hours),
        "work": _in_window(hour, params.work_hours) & np.isin(local.dt.weekday.to_numpy(), params.work_days),
    })
    points["place_x"] = np.floor(points["x"] / params.place_size_m).astype(np.int64)
    points["place_y"] = np.floor(points["y"] / params.place_size_m).astype(np.int64)
    out = []
    for place, window in (("home", "night"), ("work", "work")):
        pts = points[points[window]]
        keys = ["object_id", "place_x", "place_y"]
        stats = pts.groupby(keys, sort=True).agg(hours=("slot", "nunique"), n=("x", "size"),
                                                  x=("x", "mean"), y=("y", "mean")).reset_index()
        stats = stats.sort_values(["object_id", "hours", "n", "place_x", "place_y"],
                                  ascending=[True, False, False, True, True], kind="stable")
        best = stats.drop_duplicates("object_id").set_index("object_id")
        out.append(best[["x", "y", "hours"]].rename(columns={"x": f"{place}_x", "y": f"{place}_y",
                                                              "hours": f"{place}_hours"}))
    objects = pd.Index(pd.unique(frame["object_id"].astype(str)), name="object_id")
    return pd.concat(out, axis=1).reindex(objects)


class HomeWorkInference(Attack[HomeWorkParams]):
    """Home/work inference (A7) on a truthful release: is the place inferred from D* within r of the truth?

    Targets: the raw objects that own released points and have a true place for the ``success`` criterion
    (a home for ``"home"``; a work place for ``"work"``; both for ``"both"``; at least one for ``"either"``,
    where only the places they have count). Released points are grouped by ``object_id``: the adversary is
    assumed able to link all released records of one person (the worst case; with per-trip pseudonyms each
    record would be attacked separately). A target whose release has no point in a window gets no inference
    there: a miss.

    Baseline (Anonymeter's control for inference attacks): the adversary's guess replaced by the place inferred
    for a random *other* released object, i.e. the success of guessing from the population's released places.
    It is high where homes or workplaces are concentrated, so the risk counts only what the release reveals
    about the individual. Exact over all ordered pairs, with k-d trees.

    Not applicable (:class:`audits.attack.NotApplicable`, the gate policy decides whether that blocks) to a
    release without timestamps (``t`` NaT, e.g. prefix-tree releases) and when no released object has a true
    home or work in the raw data (a window without night or working hours).
    """

    @property
    def name(self) -> str:
        return NAME

    @property
    def raw_columns(self) -> tuple[str, ...]:
        return ("object_id", "t", "lon", "lat")

    @property
    def release_columns(self) -> tuple[str, ...]:
        return ("object_id", "t", "lon", "lat")

    def _attack(self, raw: pd.DataFrame, release: pd.DataFrame) -> AttackResult:
        p = self.params
        if not pd.to_datetime(release["t"], utc=True, errors="coerce").notna().any():
            raise NotApplicable("home/work inference needs timestamps and the release has none (t is NaT)",
                                f"{NAME}: release frame")
        raw_xy, rel_xy = planar_coordinates(raw, release)
        truth = infer_places(raw, raw_xy, p)
        guess = infer_places(release, rel_xy, p).reindex(truth.index)
        released = truth.index.isin(pd.unique(release["object_id"].astype(str)))
        has = {place: released & truth[f"{place}_x"].notna().to_numpy() for place in PLACES}
        needed = {"home": ("home",), "work": ("work",), "either": PLACES, "both": PLACES}[p.success]
        eligible = (has["home"] & has["work"]) if p.success == "both" else np.any([has[x] for x in needed], axis=0)
        targets = np.flatnonzero(eligible)
        if len(targets) == 0:
            raise NotApplicable(f"no released object has a true {' or '.join(needed)} in the raw data (no raw "
                                "point in the night/working windows)", f"{NAME}: raw frame")
        dist = {x: np.hypot(guess[f"{x}_x"] - truth[f"{x}_x"], guess[f"{x}_y"] - truth[f"{x}_y"]).to_numpy()
                for x in PLACES}
        hit = {x: has[x] & (np.nan_to_num(dist[x], nan=np.inf) <= p.radius_m) for x in PLACES}
        success = _combine(hit, has, p.success)[targets]
        baseline = _random_other_baseline(truth, guess, has, targets, p)
        evidence: dict[str, Any] = {
            "success": p.success,
            "radius_m": p.radius_m,
            "place_size_m": p.place_size_m,
            "timezone": p.timezone,
            "n_released_objects": int(released.sum()),
            "baseline_kind": "place inferred for a random other released object",
            **{f"{x}_targets": int(has[x].sum()) for x in PLACES},
            **{f"{x}_hit_rate": float(hit[x][has[x]].mean()) if has[x].any() else 0.0 for x in PLACES},
            **{f"{x}_inferred_share": float(np.isfinite(dist[x][has[x]]).mean()) if has[x].any() else 0.0
               for x in PLACES},
            **{f"{x}_median_error_m": _median(dist[x][has[x]]) for x in PLACES},
            "examples": [{"owner": str(truth.index[i]),
                          **{f"{x}_error_m": round(float(dist[x][i]), 1) for x in PLACES if hit[x][i]}}
                         for i in targets[success][:MAX_EXAMPLES]],
        }
        return AttackResult(attack=NAME, n_targets=len(targets), n_successes=float(success.sum()),
                            baseline=baseline, evidence=evidence, confidence=p.confidence)


def _in_window(hour: np.ndarray, window: tuple[int, int]) -> np.ndarray:
    start, end = window
    return (hour >= start) & (hour < end) if start < end else (hour >= start) | (hour < end)


def _combine(hit: dict[str, np.ndarray], has: dict[str, np.ndarray], success: str) -> np.ndarray:
    if success in PLACES:
        return hit[success]
    if success == "both":
        return hit["home"] & hit["work"]
    return hit["home"] | hit["work"]


def _random_other_baseline(truth: pd.DataFrame, guess: pd.DataFrame, has: dict[str, np.ndarray],
                           targets: np.ndarray, p: HomeWorkParams) -> float:
    """Mean over targets u of the share of other objects v with an inference whose inferred places satisfy the
    success criterion against u's true places (v's guesses taken as u's). Pairs are coded ``u * n + v``."""
    n = len(truth)
    pairs: dict[str, np.ndarray] = {}
    for x in PLACES:
        g = guess[[f"{x}_x", f"{x}_y"]].to_numpy()
        inferred = np.flatnonzero(np.isfinite(g).all(axis=1))
        t_rows = targets[has[x][targets]]
        pairs[x] = np.empty(0, dtype=np.int64)
        if len(inferred) and len(t_rows):
            hits = cKDTree(g[inferred]).query_ball_point(truth[[f"{x}_x", f"{x}_y"]].to_numpy()[t_rows],
                                                         r=p.radius_m)
            query, hit = flatten_hits(hits)
            pairs[x] = np.unique(t_rows[query] * n + inferred[hit])
    if p.success in PLACES:
        good = pairs[p.success]
    elif p.success == "both":
        good = np.intersect1d(pairs["home"], pairs["work"])
    else:
        good = np.union1d(pairs["home"], pairs["work"])
    good = good[good // n != good % n]  # another object's guess only
    any_guess = np.isfinite(guess[["home_x", "work_x"]].to_numpy()).any(axis=1)
    n_others = np.maximum(any_guess.sum() - any_guess[targets], 1)
    per_target = np.bincount(good // n, minlength=n)[targets] / n_others
    return float(np.clip(per_target.mean(), 0.0, 1.0))


def _median(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if len(finite) else None
