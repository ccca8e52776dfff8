"""ObjTrace (object-level DP synthesis with timestamps): bounded per-object counts on each Dask partition (every
partition holds whole objects), summed on the driver; noise and synthesis on the driver from the sums only."""

from __future__ import annotations

import numpy as np
import pandas as pd
from distributed import Client, Future

from mechanisms import objtrace
from trajpub.candidate import CandidateRelease, Shape
from trajpub.mechanism import Mechanism, PublicInputs


def _count_partition(df: pd.DataFrame, geometry: objtrace.Geometry,
                     params: objtrace.ObjTraceParams) -> objtrace.ObjTraceCounts:
    """On a worker: the partition's statistics, each object's contribution bounded."""
    return objtrace.count_points(df, geometry, params)


class ObjTrace(Mechanism, name="objtrace", shape=Shape.SYNTHETIC, params=objtrace.ObjTraceParams,
                          guarantee=objtrace.guarantee):
    """ObjTrace as a release mechanism: synthetic trajectories with timestamps, ε per object."""



    def max_records_per_object(self, params: objtrace.ObjTraceParams) -> int | None:
        """None: the pipeline need not drop records; ObjTrace bounds each object's contribution itself."""
        return None

    def partitioned(self, client: Client, prepared: list[Future], inputs: PublicInputs, params: objtrace.ObjTraceParams,
                    rng: np.random.Generator) -> CandidateRelease:
        grid = inputs.grid
        geometry = objtrace.geometry_of(grid, params)
        parts = client.gather(client.map(_count_partition, prepared, geometry=geometry, params=params, pure=False))
        counts = parts[0]
        for part in parts[1:]:
            counts = counts.add(part)
        model = objtrace.fit(counts, geometry, params, rng)
        synthetic = objtrace.synthesize_from_model(model, rng)
        points = objtrace.to_points(synthetic, geometry, grid, params.reference_date, rng)
        metadata = {
            "mechanism": "objtrace",
            "params": params.to_dict(),
            "released_records": int(len(synthetic.offsets) - 1),
            "released_points": len(points),
            "position": "uniform within the synthetic model cell",
            "timestamps": "start hour per start region and pace per record, on the public reference date",
            "n_synthetic_source": "public parameter" if params.n_synthetic is not None else "noisy record count",
            **model.metadata(),
        }
        return CandidateRelease(self.shape, points, metadata)
