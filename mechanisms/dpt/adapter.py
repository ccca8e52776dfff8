"""DPT (He et al., PVLDB 2015): true counts per Dask partition, summed on the driver; the noisy model, the model
selection and the synthesis run on the driver from the summed counts only (no trajectory reaches the driver)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import dpt
from trajpub.candidate import CandidateRelease, Shape
from trajpub.executor import Executor
from trajpub.guarantee import Guarantee
from trajpub.mechanism import Mechanism, PublicInputs


def _count_partition(df: pd.DataFrame, hierarchy: dpt.Hierarchy, params: dpt.DptParams) -> dpt.DptCounts:
    """On a worker: the partition's true counts (length and start histograms, prefix-tree node counts)."""
    return dpt.count_points(df, hierarchy, params)


class Dpt(Mechanism):
    """DPT as a release mechanism: synthetic trajectories from noisy Markov prefix trees over hierarchical
    reference systems (grids of cell sizes s, 2s, 4s, ...)."""

    name = "dpt"
    shape = Shape.SYNTHETIC
    Params = dpt.DptParams

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, params: dpt.DptParams,
                    rng: np.random.Generator) -> CandidateRelease:
        """True counts on the workers, summed on the driver; the noisy model, its selection and the synthesis
        read only the sums."""
        grid = inputs.grid
        hierarchy = dpt.hierarchy_of(grid, params)
        dpt.check_model_size(hierarchy, params)  # public inputs only: refuse before any data is read
        parts = executor.gather(executor.map(_count_partition, prepared, hierarchy=hierarchy, params=params,
                                             pure=False))
        result = dpt.synthesize(dpt.merge_counts(parts), hierarchy, grid, params, rng)
        model, synthetic, points = result.model, result.synthetic, result.points
        metadata = {
            "mechanism": "dpt",
            "params": params.to_dict(),
            # no true count here (lineage is public): the noisy input size is in "systems"/"noisy_trajectories"
            "noisy_input_trajectories": float(model.system_sizes().sum()),
            "released_records": len(synthetic.level),
            "released_points": len(points),
            "position": "centre of the synthetic cell of its reference system",
            "n_synthetic_source": "public parameter" if params.n_synthetic is not None
            else "noisy count from the length histograms",
            **model.metadata(),
        }
        return CandidateRelease(self.shape, points, metadata)

    def guarantee(self, params: dpt.DptParams) -> Guarantee:
        """ε-DP per trajectory record (He et al., PVLDB 2015), by sequential composition of four Laplace
        releases: :func:`mechanisms.dpt.guarantee`."""
        return dpt.guarantee(params)
