"""Blurring synthesizers, the audit gate's positive controls against shape and time (docs/design.md, "Audits and
the gate").

:class:`BlurControl` is CityTrace (the demo's synthesizer, ε per object) with ``blur_percent`` % of its released
records replaced by records of its input (members) altered by one of :data:`TRANSFORMS`, the "blurring models"
that "A Dual Perspective on Synthetic Trajectory Generators" (arXiv 2604.19653, 2026) shows fall to membership
inference. Each transform works in metres on the record's local equirectangular projection (about its first
point) and is strong enough to defeat the attacks anchored in place (DCR, the shadow ratio, cell signatures):
every record ends 1-5 km from where it was.

- ``translate``: moved 1-5 km in a uniform direction (times and shape exact);
- ``rotate``: turned 30-180 degrees (either way) about its first point, then moved 2 km;
- ``mirror``: mirrored about a line of uniform direction through its first point, then moved 2 km;
- ``reverse``: its points in reverse order over the same times, then moved 2 km;
- ``resample``: every third point kept (and the last), then moved 2 km;
- ``noise``: Gaussian noise of 250 m on every coordinate, then moved 2 km;
- ``time_shift``: every time shifted by 1-6 h either way, then moved 2 km;
- ``time_scale``: its clock stretched about its start by a factor in [0.5, 0.8] or [1.25, 2], then moved 2 km;
- ``splice``: the first half of one member's record followed by the second half of another's (that half
  carried in space and time to continue from the first one's last point), then moved 1-5 km;
- ``combined``: several at once: turned 30-180 degrees about its first point, mirrored with probability 1/2,
  moved 1-5 km and its times shifted by 1-6 h (no place, heading, handedness or clock of the original left);
- ``mixture``: each record by one of the above, drawn uniformly.

Not a privacy mechanism: its guarantee says so (not DP, charged nothing). Not in the mechanisms' registry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms.citytrace import CityTraceParams
from mechanisms.citytrace.adapter import CityTrace
from tests.controls.mechanism import RELEASED_COLUMNS, replacing
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import ParameterError
from trajpub.guarantee import NOT_DP, Guarantee
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.params import Scope

_BLUR = Scope("blur_control")
METRES_PER_DEGREE = 111_320.0
MOVE_M = 2000.0
TRANSFORMS = ("translate", "rotate", "mirror", "reverse", "resample", "noise", "time_shift", "time_scale", "splice",
              "combined")
"""The single transforms; ``mixture`` draws one of them per record."""


@dataclass(frozen=True)
class BlurControlParams:
    """``blur_percent``: the share of CityTrace's released records replaced (per cent, in (0, 100]);
    ``transform``: one of :data:`TRANSFORMS` or ``mixture``; ``synthesizer``: CityTrace's parameters (a spec gives
    them beside the two)."""

    blur_percent: float
    transform: str
    synthesizer: CityTraceParams

    def __post_init__(self) -> None:
        _BLUR.require_real(self.blur_percent, "blur_percent", 0.0, 100.0)
        _BLUR.require_choice(self.transform, "transform", (*TRANSFORMS, "mixture"))

    @classmethod
    def from_dict(cls, d: dict) -> BlurControlParams:
        rest = dict(d)
        for key in ("blur_percent", "transform"):
            if rest.get(key) is None:
                raise ParameterError(f"{key} is required", _BLUR.where(key))
        return cls(rest.pop("blur_percent"), rest.pop("transform"), CityTraceParams.from_dict(rest))


def moved(x: np.ndarray, y: np.ndarray, rng: np.random.Generator, low_m: float, high_m: float
          ) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` moved by a vector of length uniform in [low_m, high_m] and uniform direction."""
    angle, length = rng.uniform(0, 2 * np.pi), rng.uniform(low_m, high_m)
    return x + length * np.cos(angle), y + length * np.sin(angle)


def blurred(record: pd.DataFrame, transform: str, rng: np.random.Generator,
            other: pd.DataFrame | None = None) -> pd.DataFrame:
    """One input record (``t``, ``lon``, ``lat`` in order) altered by ``transform`` (the module docstring);
    ``other``: the second record of a splice."""
    lon0, lat0 = float(record["lon"].iloc[0]), float(record["lat"].iloc[0])
    scale = METRES_PER_DEGREE * np.cos(np.radians(lat0))
    x = (record["lon"].to_numpy(float) - lon0) * scale
    y = (record["lat"].to_numpy(float) - lat0) * METRES_PER_DEGREE
    t = record["t"].reset_index(drop=True)
    if transform == "translate":
        x, y = moved(x, y, rng, 1000.0, 5000.0)
    elif transform == "rotate":
        x, y = _turned(x, y, rng)
    elif transform == "mirror":
        x, y = _mirrored(x, y, rng)
    elif transform == "reverse":
        x, y = x[::-1], y[::-1]
    elif transform == "resample":
        keep = np.union1d(np.arange(0, len(x), 3), [len(x) - 1])
        x, y, t = x[keep], y[keep], t.iloc[keep].reset_index(drop=True)
    elif transform == "noise":
        x, y = x + rng.normal(0, 250.0, len(x)), y + rng.normal(0, 250.0, len(y))
    elif transform == "time_shift":
        t = t + pd.Timedelta(hours=rng.uniform(1, 6) * rng.choice([-1, 1]))
    elif transform == "time_scale":
        factor = rng.choice([rng.uniform(0.5, 0.8), rng.uniform(1.25, 2.0)])
        t = t.iloc[0] + (t - t.iloc[0]) * factor
    elif transform == "splice":
        x, y, t = _spliced(x, y, t, other, scale, lon0, lat0)
        x, y = moved(x, y, rng, 1000.0, 5000.0)
    elif transform == "combined":
        x, y = _turned(x, y, rng)
        if rng.random() < 0.5:
            x, y = _mirrored(x, y, rng)
        x, y = moved(x, y, rng, 1000.0, 5000.0)
        t = t + pd.Timedelta(hours=rng.uniform(1, 6) * rng.choice([-1, 1]))
    else:
        raise ParameterError(f"unknown transform {transform!r}", _BLUR.where("transform"))
    if transform not in ("translate", "splice", "combined"):
        x, y = moved(x, y, rng, MOVE_M, MOVE_M)
    return pd.DataFrame({"t": t, "lon": lon0 + x / scale, "lat": lat0 + y / METRES_PER_DEGREE})


def _turned(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` turned 30-180 degrees, either way, about the origin (the record's first point)."""
    turn = np.radians(rng.uniform(30, 180)) * rng.choice([-1, 1])
    return x * np.cos(turn) - y * np.sin(turn), x * np.sin(turn) + y * np.cos(turn)


def _mirrored(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` mirrored about a line of uniform direction through the origin (the record's first point)."""
    phi = rng.uniform(0, np.pi)
    return x * np.cos(2 * phi) + y * np.sin(2 * phi), x * np.sin(2 * phi) - y * np.cos(2 * phi)


def _spliced(x: np.ndarray, y: np.ndarray, t: pd.Series, other: pd.DataFrame, scale: float, lon0: float,
             lat0: float) -> tuple[np.ndarray, np.ndarray, pd.Series]:
    """The first half of this record, then the second half of ``other`` carried so that its first point follows
    this half's last point by its own step in space and time."""
    half = (len(x) + 1) // 2
    ox = (other["lon"].to_numpy(float) - lon0) * scale
    oy = (other["lat"].to_numpy(float) - lat0) * METRES_PER_DEGREE
    ot = other["t"].reset_index(drop=True)
    cut = max(len(ox) // 2, 1)
    dx, dy = x[half - 1] - ox[cut - 1], y[half - 1] - oy[cut - 1]
    later = t.iloc[half - 1] - ot.iloc[cut - 1]
    return (np.r_[x[:half], ox[cut:] + dx], np.r_[y[:half], oy[cut:] + dy],
            pd.concat([t.iloc[:half], ot.iloc[cut:] + later], ignore_index=True))


def blurred_records(trajectories: pd.DataFrame, n: int, transform: str, rng: np.random.Generator,
                    inputs: PublicInputs) -> pd.DataFrame:
    """``n`` of the input's records (drawn uniformly without replacement), each blurred, under ``traj_id`` 1..n,
    with ``seq``, ``x``, ``y`` and ``cell`` of the release's grid."""
    records = dict(tuple(trajectories.sort_values(["traj_id", "seq"], kind="stable").groupby("traj_id")))
    ids = np.array(list(records))
    chosen = rng.choice(ids, size=min(n, len(ids)), replace=False)
    parts = []
    for number, traj in enumerate(chosen, start=1):
        kind = TRANSFORMS[rng.integers(len(TRANSFORMS))] if transform == "mixture" else transform
        other = records[rng.choice(ids[ids != traj])] if kind == "splice" and len(ids) > 1 else None
        out = blurred(records[traj], kind if other is not None or kind != "splice" else "translate", rng, other)
        parts.append(out.assign(traj_id=number, seq=np.arange(len(out))))
    points = pd.concat(parts, ignore_index=True)
    x, y = inputs.grid.project(points["lon"].to_numpy(), points["lat"].to_numpy())
    points = points.assign(x=x, y=y, cell=inputs.grid.cell_of(x, y))
    return points[RELEASED_COLUMNS]


class BlurControl(Mechanism):
    """CityTrace's release with ``blur_percent`` % of its records replaced by blurred input records."""

    name = "blur_control"
    shape = Shape.SYNTHETIC
    Params = BlurControlParams

    def guarantee(self, params: BlurControlParams) -> Guarantee:
        return Guarantee(
            model="none (positive control of the gate)", privacy_unit="one object", proven=False,
            privacy_map=NOT_DP,
            statement=(f"No protection: {params.blur_percent:g}% of the released records are input records altered "
                       f"by {params.transform}. A test-only mechanism the gate must block."))

    def max_records_per_object(self, params: BlurControlParams) -> int | None:
        return None

    def release(self, trajectories: pd.DataFrame, inputs: PublicInputs, params: BlurControlParams,
                rng: np.random.Generator) -> CandidateRelease:
        synthetic = CityTrace().release(trajectories, inputs, params.synthesizer, rng)
        n = round(params.blur_percent / 100 * synthetic.points["traj_id"].nunique())
        blur = blurred_records(trajectories, n, params.transform, rng, inputs)
        merged = replacing(synthetic.points, blur, rng)
        metadata = {"mechanism": self.name, "params": {"blur_percent": params.blur_percent,
                                                       "transform": params.transform,
                                                       **params.synthesizer.to_dict()},
                    "released_records": int(merged["traj_id"].nunique()), "released_points": len(merged),
                    "blurred_records": int(blur["traj_id"].nunique())}
        return CandidateRelease(self.shape, merged, metadata)
