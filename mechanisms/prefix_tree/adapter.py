"""The noisy prefix tree (Chen, Fung, Desai 2012) on the Dask partitions."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import prefix_tree
from trajpub.candidate import CandidateRelease, Shape
from trajpub.executor import Executor
from trajpub.guarantee import Guarantee
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.segment import cell_sequences


def _partition_sequences(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    _, offsets, cells = cell_sequences(df)
    return offsets, cells


def _count_partition(csr: tuple[np.ndarray, np.ndarray], n_locations: int, level: int,
                     transitions: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    return prefix_tree.count_level(csr[0], csr[1], n_locations, level, transitions)


class PrefixTree(Mechanism):
    """Chen, Fung, Desai (2012), the noisy prefix tree over grid cells. Each level's true prefix counts are
    computed on the partitions and summed on the driver; only the noisy tree lives on the driver."""

    name = "prefix_tree"
    shape = Shape.SYNTHETIC
    Params = prefix_tree.PrefixTreeParams

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, params: prefix_tree.PrefixTreeParams,
                    rng: np.random.Generator) -> CandidateRelease:
        """Each level's true prefix counts on the workers, summed on the driver; only the noisy tree
        lives on the driver."""
        n = inputs.grid.n_cells
        csr = executor.map(_partition_sequences, prepared, pure=False)

        def counter(level: int, transitions: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
            [shared] = executor.scatter([transitions], broadcast=True, hash=False)  # one object, on every worker
            parts = executor.gather(executor.map(_count_partition, csr, n_locations=n, level=level,
                                                 transitions=shared, pure=False))
            keys = np.concatenate([k for k, _ in parts]) if parts else np.empty(0, np.int64)
            counts = np.concatenate([c for _, c in parts]) if parts else np.empty(0, np.int64)
            unique, inverse = np.unique(keys, return_inverse=True)
            return unique, np.bincount(inverse, weights=counts, minlength=len(unique)).astype(np.int64)

        result = prefix_tree.sanitize_counts(counter, n, params, rng)
        tree, released = result.tree, result.release
        offsets, cells = released.expanded()
        lengths = np.diff(offsets)
        traj_id = np.repeat(np.arange(1, len(lengths) + 1), lengths)
        seq = np.arange(len(cells)) - np.repeat(offsets[:-1], lengths)
        lon, lat = inputs.grid.cell_centre(cells) if len(cells) else (np.empty(0), np.empty(0))
        points = pd.DataFrame({"traj_id": traj_id, "seq": seq, "cell": cells, "t": pd.NaT, "lon": lon, "lat": lat})
        return CandidateRelease(self.shape, points, {**tree.metadata(), "released_records": len(lengths),
                                  "released_points": len(cells)})

    def guarantee(self, params: prefix_tree.PrefixTreeParams) -> Guarantee:
        """ε-DP per trajectory record (Chen, Fung, Desai 2012, Thm 4.3), with the caveats that bound its
        meaning: :func:`mechanisms.prefix_tree.guarantee`."""
        return prefix_tree.guarantee(params)
