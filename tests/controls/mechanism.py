"""Leaky synthesizers, the audit gate's positive controls (docs/design.md, "Audits and the gate").

:class:`CopyControl` is ObjTrace (the demo's synthesizer, ε per object) with ``copy_percent`` % of the input's
trajectory records passed through verbatim: that many records are drawn uniformly without replacement from the
prepared input, and each replaces one synthetic record drawn uniformly, so the release keeps ObjTrace's size
and its count reveals nothing more. A copy keeps its cells, positions and timestamps, which lie in the release's
window as ObjTrace's synthetic ones do, so that copies differ from the synthetic records only by being real. This is Stadler et al.'s leaky-generator setting ("Synthetic Data -
Anonymisation Groundhog Day", USENIX Security 2022, Sec. 5) at the record level.

:class:`Replay` releases every input record unchanged as a synthetic release (no owner table): the upper bound
of every attack on synthetic data.

Neither is a privacy mechanism: their guarantee says so (not DP, charged nothing).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from mechanisms.objtrace import ObjTraceParams
from mechanisms.objtrace.adapter import ObjTrace
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import ParameterError
from trajpub.guarantee import NOT_DP, Guarantee
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.params import Params, Scope

_COPY = Scope("copy_control")
_REPLAY = Scope("replay_control")
RELEASED_COLUMNS = ["traj_id", "seq", "cell", "t", "lon", "lat", "x", "y"]


@dataclass(frozen=True)
class CopyControlParams:
    """``copy_percent``: the share of the input's trajectory records copied (per cent, in (0, 100]);
    ``synthesizer``: the ObjTrace parameters of the rest (a spec gives them beside ``copy_percent``)."""

    copy_percent: float
    synthesizer: ObjTraceParams

    def __post_init__(self) -> None:
        _COPY.require_real(self.copy_percent, "copy_percent", 0.0, 100.0)

    @classmethod
    def from_dict(cls, d: dict) -> CopyControlParams:
        rest = dict(d)
        if rest.get("copy_percent") is None:
            raise ParameterError("copy_percent is required (per cent of the input records copied)",
                                 _COPY.where("copy_percent"))
        percent = rest.pop("copy_percent")
        return cls(percent, ObjTraceParams.from_dict(rest))


def copy_guarantee(params: CopyControlParams) -> Guarantee:
    return Guarantee(
        model="none (positive control of the gate)", privacy_unit="one object", proven=False, privacy_map=NOT_DP,
        statement=(f"No protection: {params.copy_percent:g}% of the input's trajectory records are published "
                   "verbatim among ObjTrace's synthetic records. A test-only mechanism the gate must block."))


def replay_guarantee(params: ReplayParams) -> Guarantee:
    return Guarantee(
        model="none (positive control of the gate)", privacy_unit="one object", proven=False, privacy_map=NOT_DP,
        statement="No protection: every input record is published unchanged as if synthetic. A test-only "
                  "mechanism the gate must block.")


def copied(trajectories: pd.DataFrame, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """``n`` of the input's trajectory records, drawn uniformly without replacement, whole and in order, each
    under a fresh ``traj_id`` 1..n (the order of the draw)."""
    ids = trajectories["traj_id"].unique()
    chosen = rng.choice(ids, size=min(n, len(ids)), replace=False)
    picked = trajectories[trajectories["traj_id"].isin(chosen)]
    number = pd.Series(np.arange(1, len(chosen) + 1), index=chosen)
    out = picked.assign(traj_id=picked["traj_id"].map(number).to_numpy(np.int64))
    return out.sort_values(["traj_id", "seq"], kind="stable")[RELEASED_COLUMNS].reset_index(drop=True)


def replacing(points: pd.DataFrame, records: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """``points`` (a synthetic release) with as many of its records as ``records`` holds, drawn uniformly,
    replaced by those records, every record numbered anew in a random order (the ids say nothing of which
    records are real)."""
    ids = points["traj_id"].unique()
    replaced = rng.choice(ids, size=min(records["traj_id"].nunique(), len(ids)), replace=False)
    kept = points[~points["traj_id"].isin(replaced)]
    merged = pd.concat([kept, records[kept.columns]], keys=[0, 1], names=["part", None]).reset_index(0)
    record = merged.groupby(["part", "traj_id"], sort=False).ngroup().to_numpy()
    number = rng.permutation(record.max() + 1)[record] + 1
    merged = merged.drop(columns="part").assign(traj_id=number.astype(np.int64))
    return merged.sort_values(["traj_id", "seq"], kind="stable").reset_index(drop=True)


class CopyControl(Mechanism):
    """ObjTrace's release with ``copy_percent`` % of the input records copied into it (the module docstring)."""

    name = "copy_control"
    shape = Shape.SYNTHETIC
    Params = CopyControlParams

    def guarantee(self, params: CopyControlParams) -> Guarantee:
        return copy_guarantee(params)

    def max_records_per_object(self, params: CopyControlParams) -> int | None:
        return None

    def release(self, trajectories: pd.DataFrame, inputs: PublicInputs, params: CopyControlParams,
                rng: np.random.Generator) -> CandidateRelease:
        synthetic = ObjTrace().release(trajectories, inputs, params.synthesizer, rng)
        n_input = trajectories["traj_id"].nunique()
        copies = copied(trajectories, round(params.copy_percent / 100 * n_input), rng)
        merged = replacing(synthetic.points, copies, rng)
        metadata = {"mechanism": self.name, "params": {"copy_percent": params.copy_percent,
                                                       **params.synthesizer.to_dict()},
                    "released_records": int(merged["traj_id"].nunique()), "released_points": len(merged),
                    "copied_records": int(copies["traj_id"].nunique())}
        return CandidateRelease(self.shape, merged, metadata)


@dataclass(frozen=True)
class ReplayParams(Params):
    """No parameter: every input record is released."""

    scope = _REPLAY


class Replay(Mechanism):
    """Every input record released unchanged, without owners."""

    name = "replay_control"
    shape = Shape.SYNTHETIC
    Params = ReplayParams

    def guarantee(self, params: ReplayParams) -> Guarantee:
        return replay_guarantee(params)

    def max_records_per_object(self, params: ReplayParams) -> int | None:
        return None

    def release(self, trajectories: pd.DataFrame, inputs: PublicInputs, params: ReplayParams,
                rng: np.random.Generator) -> CandidateRelease:
        points = copied(trajectories, trajectories["traj_id"].nunique(), rng)
        return CandidateRelease(self.shape, points, {"mechanism": self.name, "params": asdict(params),
                                                     "released_records": int(points["traj_id"].nunique()),
                                                     "released_points": len(points)})
