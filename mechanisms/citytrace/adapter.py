"""CityTrace (ObjTrace's successor at ~1 km cells): bounded per-object counts on each Dask partition (every
partition holds whole objects), summed on the driver; noise and synthesis on the driver from the sums only."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import citytrace
from mechanisms.objtrace.geometry import Geometry
from trajpub.candidate import CandidateRelease, Shape
from trajpub.executor import Executor, summed
from trajpub.guarantee import Guarantee
from trajpub.mechanism import PublicInputs, WindowedSynthesizer


def _count_partition(df: pd.DataFrame, geometry: Geometry, params: citytrace.CityTraceParams,
                     timezone: str) -> citytrace.CityTraceCounts:
    """On a worker: the partition's statistics, each object's contribution bounded."""
    return citytrace.count_points(df, geometry, params, timezone)


class CityTrace(WindowedSynthesizer):
    """CityTrace as a release mechanism: synthetic trajectories with timestamps, ε per object."""

    name = "citytrace"
    shape = Shape.SYNTHETIC
    Params = citytrace.CityTraceParams

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs,
                    params: citytrace.CityTraceParams, rng: np.random.Generator) -> CandidateRelease:
        """Each object's bounded counts on the workers (a partition holds whole objects), summed on the
        driver; noise and synthesis on the driver from the sums only."""
        grid, window = inputs.grid, self.window(inputs)
        geometry = citytrace.geometry_of(grid, params)
        counts = summed(executor, _count_partition, prepared, geometry=geometry, params=params,
                        timezone=window.timezone)
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

    def guarantee(self, params: citytrace.CityTraceParams) -> Guarantee:
        """ε-DP per object under adding or removing one object with all its records, each object's
        contribution bounded before any count: :func:`mechanisms.citytrace.guarantee`."""
        return citytrace.guarantee(params)
