"""CityTrace (ObjTrace's successor at ~1 km cells): bounded per-object counts on each Dask partition (every
partition holds whole objects), summed on the driver; noise and synthesis on the driver from the sums only."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import citytrace
from mechanisms.objtrace.geometry import Geometry
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import ParameterError
from trajpub.executor import Executor
from trajpub.guarantee import Guarantee
from trajpub.mechanism import Mechanism, PublicInputs


def _count_partition(df: pd.DataFrame, geometry: Geometry, params: citytrace.CityTraceParams,
                     timezone: str) -> citytrace.CityTraceCounts:
    """On a worker: the partition's statistics, each object's contribution bounded."""
    return citytrace.count_points(df, geometry, params, timezone)


class CityTrace(Mechanism):
    """CityTrace as a release mechanism: synthetic trajectories with timestamps, ε per object."""

    name = "citytrace"
    shape = Shape.SYNTHETIC
    Params = citytrace.CityTraceParams

    def guarantee(self, params: citytrace.CityTraceParams) -> Guarantee:
        return citytrace.guarantee(params)

    def check_spec(self, spec, params: citytrace.CityTraceParams) -> None:
        """The timestamps are placed in the release's window: both its ends must be set (a relative window, once
        resolved, sets them)."""
        if spec.window_start is None or spec.window_end is None:
            raise ParameterError("citytrace places its timestamps in the release's window: the spec needs "
                                 "window_start and window_end, or a relative window {last: 7d, align: local_week}",
                                 "window")

    def max_records_per_object(self, params: citytrace.CityTraceParams) -> int | None:
        """None: the pipeline need not drop records; CityTrace bounds each object's contribution itself."""
        return None

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs,
                    params: citytrace.CityTraceParams, rng: np.random.Generator) -> CandidateRelease:
        grid, window = inputs.grid, inputs.window
        if window is None:
            raise ParameterError("citytrace places its timestamps in the release's window, and none was given",
                                 "window")
        geometry = citytrace.geometry_of(grid, params)
        parts = executor.gather(executor.map(_count_partition, prepared, geometry=geometry, params=params,
                                         timezone=window.timezone, pure=False))
        counts = parts[0]
        for part in parts[1:]:
            counts = counts.add(part)
        result = citytrace.release_from_counts(counts, geometry, grid, params, window, rng)
        metadata = {
            "mechanism": "citytrace",
            "params": params.to_dict(),
            "released_records": int(len(result.synthetic.offsets) - 1),
            "released_points": len(result.points),
            "position": "within the synthetic fine model cell, near the previous point",
            "timestamps": (f"in the release's window: local day of week, hour per start region ({window.timezone}), "
                           "pace per record and time per move"),
            "n_synthetic_source": "public parameter" if params.n_synthetic is not None else "noisy record count",
            **result.model.metadata(),
        }
        return CandidateRelease(self.shape, result.points, metadata)
