"""CityTrace (ObjTrace's successor at ~1 km cells): bounded per-object counts on each Dask partition (every
partition holds whole objects), summed on the driver; noise and synthesis on the driver from the sums only."""

from __future__ import annotations

import numpy as np
import pandas as pd
from distributed import Client, Future

from mechanisms import citytrace
from mechanisms.objtrace.geometry import Geometry
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import ParameterError
from trajpub.mechanism import Mechanism, PublicInputs


def _count_partition(df: pd.DataFrame, geometry: Geometry,
                     params: citytrace.CityTraceParams) -> citytrace.CityTraceCounts:
    """On a worker: the partition's statistics, each object's contribution bounded."""
    return citytrace.count_points(df, geometry, params)


class CityTrace(Mechanism, name="citytrace", shape=Shape.SYNTHETIC, params=citytrace.CityTraceParams,
                guarantee=citytrace.guarantee):
    """CityTrace as a release mechanism: synthetic trajectories with timestamps, ε per object."""

    def check_spec(self, spec, params: citytrace.CityTraceParams) -> None:
        """The released days must lie inside the spec's window (timestamps outside it would be refused later,
        after the budget is spent)."""
        start, end = params.window
        lo, hi = (None if t is None else pd.Timestamp(t) for t in (spec.window_start, spec.window_end))
        lo, hi = (t if t is None or t.tzinfo else t.tz_localize("UTC") for t in (lo, hi))
        if (lo is not None and start < lo) or (hi is not None and end > hi):
            raise ParameterError(f"the released days ({params.days} from {start:%Y-%m-%d}, UTC) must lie inside "
                                 f"the spec's window ({spec.window_start} to {spec.window_end})",
                                 "params.first_date / params.days")

    def max_records_per_object(self, params: citytrace.CityTraceParams) -> int | None:
        """None: the pipeline need not drop records; CityTrace bounds each object's contribution itself."""
        return None

    def partitioned(self, client: Client, prepared: list[Future], inputs: PublicInputs,
                    params: citytrace.CityTraceParams, rng: np.random.Generator) -> CandidateRelease:
        grid = inputs.grid
        geometry = citytrace.geometry_of(grid, params)
        parts = client.gather(client.map(_count_partition, prepared, geometry=geometry, params=params, pure=False))
        counts = parts[0]
        for part in parts[1:]:
            counts = counts.add(part)
        result = citytrace.release_from_counts(counts, geometry, grid, params, rng)
        metadata = {
            "mechanism": "citytrace",
            "params": params.to_dict(),
            "released_records": int(len(result.synthetic.offsets) - 1),
            "released_points": len(result.points),
            "position": "within the synthetic fine model cell, near the previous point",
            "timestamps": "day, hour per start region, pace per record and time per move, in the public window",
            "n_synthetic_source": "public parameter" if params.n_synthetic is not None else "noisy record count",
            **result.model.metadata(),
        }
        return CandidateRelease(self.shape, result.points, metadata)
