"""Check the output: the candidate release against the Great Expectations suite ``expectations/release_points.json``
before it is audited or staged (docs/design.md: protect → check output → audit).

The suite says that a release publishes only its publishable columns (never a raw object identifier or the
private real-member flag) and no timestamp more precise than the release policy's ``time_precision_s``. The
flow first coarsens released timestamps to that precision (:func:`coarsen_times`), so a failure here is a
mechanism that leaks, and it fails the release.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd

from tasks.gx import run_suite
from trajpub import config
from trajpub.candidate import AUDITOR_ONLY, CandidateRelease, Shape
from trajpub.errors import PolicyError

SUITE_PATH = config.EXPECTATIONS_DIR / "release_points.json"


def published_frame(points: pd.DataFrame) -> pd.DataFrame:
    """The candidate's points as they would be staged and published: everything but :data:`AUDITOR_ONLY`."""
    return points.drop(columns=[c for c in AUDITOR_ONLY if c in points])


def coarsen_times(candidate: CandidateRelease, precision_s: float) -> CandidateRelease:
    """The candidate with its released timestamps floored to ``precision_s`` seconds (NaT stays NaT); the end of
    a generalised sample's time span (``t_end``) is rounded up instead, so the coarser span still covers the
    original one."""
    if candidate.shape is Shape.FRAGMENTS:
        return candidate
    step = pd.Timedelta(seconds=precision_s)
    points = candidate.points
    if "t" in points and points["t"].notna().any():
        points = points.assign(t=points["t"].dt.floor(step))
    if candidate.shape is Shape.GENERALISED and points["t_end"].notna().any():
        points = points.assign(t_end=points["t_end"].dt.ceil(step))
    return replace(candidate, points=points)


def _remainder_s(frame: pd.DataFrame, column: str, precision_s: float) -> pd.Series:
    t = frame[column] if column in frame else pd.Series(pd.NaT, index=frame.index, dtype="datetime64[ns]")
    if t.dt.tz is None:
        t = t.dt.tz_localize("UTC")
    return np.mod((t - pd.Timestamp(0, tz="UTC")).dt.total_seconds(), precision_s)


def check_points(frame: pd.DataFrame, shape: Shape, precision_s: float) -> list[dict]:
    """Run the suite on a candidate's points as they would be published (:func:`published_frame`; a column
    beyond its ``shape``'s published ones fails it); returns the per-expectation outcome; raises
    :class:`PolicyError` on any failure."""
    suite = json.loads(SUITE_PATH.read_text())
    allowed = list(shape.published)
    remainders = {f"{c}_remainder_s": _remainder_s(frame, c, precision_s) for c in ("t", "t_end")}
    df = frame.assign(**remainders)  # NaN where the time is NaT or absent: not checked
    result = run_suite(suite, df, {"publishable_columns": allowed + list(remainders)})
    outcome = [{"expectation": r.expectation_config.type, "says": r.expectation_config.meta["says"],
                "success": bool(r.success)} for r in result.results]
    failed = [o for o in outcome if not o["success"]]
    if failed:
        raise PolicyError("the candidate release fails the output suite: " + "; ".join(o["says"] for o in failed),
                          f"expectations/{SUITE_PATH.name}")
    return outcome


def check(candidate: CandidateRelease, precision_s: float) -> list[dict]:
    """The output suite on a point candidate as it would be published (:func:`check_points`)."""
    return check_points(published_frame(candidate.points), candidate.shape, precision_s)
