"""ObjTrace (object-level DP synthesis with timestamps): bounded per-object counts on each Dask partition (every
partition holds whole objects), summed on the driver; noise and synthesis on the driver from the sums only."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import objtrace
from trajpub.candidate import CandidateRelease, Shape
from trajpub.executor import Executor, summed
from trajpub.guarantee import Guarantee
from trajpub.mechanism import PublicInputs, WindowedSynthesizer


def _count_partition(df: pd.DataFrame, geometry: objtrace.Geometry, params: objtrace.ObjTraceParams,
                     timezone: str) -> objtrace.ObjTraceCounts:
    """On a worker: the partition's statistics, each object's contribution bounded."""
    return objtrace.count_points(df, geometry, params, timezone)


class ObjTrace(WindowedSynthesizer):
    """ObjTrace as a release mechanism: synthetic trajectories with timestamps in the release's window, ε per
    object."""

    name = "objtrace"
    shape = Shape.SYNTHETIC
    Params = objtrace.ObjTraceParams

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, params: objtrace.ObjTraceParams,
                    rng: np.random.Generator) -> CandidateRelease:
        """Each object's bounded counts on the workers (a partition holds whole objects), summed on the
        driver; the noisy model and the synthesis on the driver from the sums only."""
        grid, window = inputs.grid, self.window(inputs)
        geometry = objtrace.geometry_of(grid, params)
        counts = summed(executor, _count_partition, prepared, geometry=geometry, params=params,
                        timezone=window.timezone)
        model = objtrace.fit(counts, geometry, params, rng)
        synthetic = objtrace.synthesize_from_model(model, window, rng)
        points = objtrace.to_points(synthetic, geometry, grid, window, rng)
        metadata = {
            "mechanism": "objtrace",
            "params": params.to_dict(),
            "released_records": int(len(synthetic.offsets) - 1),
            "released_points": len(points),
            "position": "uniform within the synthetic model cell",
            "timestamps": (f"in the release's window, local day of week and start hour per start region "
                           f"({window.timezone}), pace per record"),
            "n_synthetic_source": "public parameter" if params.n_synthetic is not None else "noisy record count",
            **model.metadata(),
        }
        return CandidateRelease(self.shape, points, metadata)

    def guarantee(self, params: objtrace.ObjTraceParams) -> Guarantee:
        """ε-DP per object under adding or removing one object with all its records, each object's
        contribution bounded before any count: :func:`mechanisms.objtrace.guarantee`."""
        return objtrace.guarantee(params)
