"""The benchmarks' T-Drive data: the shared sample cleaned by the flow's validation rules and prepared as the flow
prepares a release, scale-ups of it, and the unprotected aggregate used as the membership attack's upper bound.

Data: the bundled sample ``tdrive_sample_odd_taxis.csv.gz`` (``trajpub.config.SHARED_DATA_DIR``) (300 taxis, 2-8 Feb 2008, Beijing time -> UTC), cleaned
by the rules of ``expectations/raw_points.json`` (exact repeats, points outside the release bbox, non-increasing
time, speed > 60 m/s; derived columns from :func:`tasks.validate.add_derived_columns`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from bench.fgs_pufferfish import TDRIVE_SAMPLE, load_tdrive
from tasks.audit import RAW_COLUMNS
from tasks.validate import add_derived_columns
from trajpub.candidate import CandidateRelease, Shape
from trajpub.grid import GridSpec
from trajpub.segment import cell_sequences, keep_trajectories, segment, to_grid

BBOX = (115.4, 39.4, 117.6, 41.1)
GRID = GridSpec(BBOX, 2000.0)
GRID_FASTPUB = GridSpec(BBOX, 25000.0)  # 8 x 8
TZ = "Asia/Shanghai"
MAX_SPEED_MPS = 60.0  # the flow's default ValidationSpec.max_speed_mps
FRAGMENT_LENGTHS = (1, 2, 3)  # FASTPub's l_max = 3 rounds publish fragments of these lengths


def load_clean(path: Path = TDRIVE_SAMPLE) -> tuple[pd.DataFrame, dict]:
    """The T-Drive sample (or another CSV in its format, :func:`bench.fgs_pufferfish.load_tdrive`) (UTC) without
    the points the flow's validation quarantines."""
    return validated(load_tdrive(path), BBOX)


def validated(points: pd.DataFrame, bbox: tuple[float, float, float, float]) -> tuple[pd.DataFrame, dict]:
    """``points`` (``object_id, t`` (UTC), ``lon, lat``) without the points the flow's validation quarantines in
    ``bbox``, and what it quarantined."""
    d = add_derived_columns(points, {"min_lon": bbox[0], "min_lat": bbox[1], "max_lon": bbox[2],
                                     "max_lat": bbox[3]})
    outside = ~(d["lon"].between(bbox[0], bbox[2]) & d["lat"].between(bbox[1], bbox[3]))
    reasons = {"exact_repeat": d["is_repeat"], "outside_bbox": outside, "time_not_increasing": d["dt_prev_s"] <= 0,
               "speed_over_60_mps": d["speed_mps"] > MAX_SPEED_MPS}
    bad = np.logical_or.reduce([r.to_numpy(dtype=bool) for r in reasons.values()])
    stats = {"points_in": len(points), "quarantined": int(bad.sum()),
             **{k: int(v.to_numpy(dtype=bool).sum()) for k, v in reasons.items()}}
    return points[~bad].reset_index(drop=True), stats


def replicate(points: pd.DataFrame, factor: int, seed: int) -> pd.DataFrame:
    """``factor`` copies of every object: copy c > 0 gets the object id ``<id>~c`` and every point of it is shifted by
    one vector per (object, copy), 200-500 m in a uniformly random direction; shifted points leaving the bbox are
    dropped (as validation would)."""
    if factor == 1:
        return points
    rng = np.random.default_rng(seed)
    codes, objects = pd.factorize(points["object_id"])
    lat0 = math.radians(float(points["lat"].mean()))
    parts = [points]
    for c in range(1, factor):
        angle = rng.uniform(0, 2 * np.pi, len(objects))
        dist = rng.uniform(200.0, 500.0, len(objects))
        dx, dy = (dist * np.cos(angle))[codes], (dist * np.sin(angle))[codes]
        parts.append(points.assign(object_id=points["object_id"] + f"~{c}",
                                   lon=points["lon"] + dx / (111_320.0 * math.cos(lat0)),
                                   lat=points["lat"] + dy / 110_574.0))
    out = pd.concat(parts, ignore_index=True)
    inside = out["lon"].between(BBOX[0], BBOX[2]) & out["lat"].between(BBOX[1], BBOX[3])
    return out[inside.to_numpy()].reset_index(drop=True)


def prepare(points: pd.DataFrame, max_per_object: int | None = None) -> pd.DataFrame:
    """The flow's prepare step (``tasks.prepare.prepare_partition``) on one partition: split at gaps > 30 min and
    at UTC midnight, trajectories of >= 2 points, the 2 km grid."""
    df = keep_trajectories(segment(points, 30 * 60, True), 2, max_per_object)
    return to_grid(df, GRID)[RAW_COLUMNS]


def on_grid(raw: pd.DataFrame, grid: GridSpec) -> pd.DataFrame:
    """The same points on another grid over the same bbox (same projection, so x, y are unchanged)."""
    return raw.assign(cell=grid.cell_of(raw["x"].to_numpy(), raw["y"].to_numpy()))


def raw_fragments(raw8: pd.DataFrame, seed: int) -> CandidateRelease:
    """Exact counts of every fragment (lengths 1-3) of a random half of the trajectories on the 8 x 8 grid: the
    aggregate release with no protection, the membership attack's upper bound."""
    keys, offsets, cells = cell_sequences(raw8[raw8["cell"] >= 0])
    members = np.random.default_rng(seed).random(len(keys)) < 0.5
    counts: dict[tuple, int] = {}
    for i in np.flatnonzero(members):
        seq = cells[offsets[i]:offsets[i + 1]].tolist()
        for n in FRAGMENT_LENGTHS:
            for f in {tuple(seq[j:j + n]) for j in range(len(seq) - n + 1)}:
                counts[f] = counts.get(f, 0) + 1
    table = pd.DataFrame({"cells": [list(f) for f in counts], "estimated_count": list(counts.values())})
    owners = pd.DataFrame({"source_traj_id": keys[members]})
    return CandidateRelease(Shape.FRAGMENTS, pd.DataFrame(), {"mechanism": "raw_fragments", "fragments": len(table),
                                                              "clients_answered": int(members.sum())},
                            fragments=table, owners=owners)
