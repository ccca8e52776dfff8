"""GLOVE (Gramaglia and Fiore 2015) on the Dask partitions: fingerprints are built on the
workers, the pruned candidate graph's merge costs (the O(n²)-per-pair part) are computed in blocks on the workers,
and the greedy merging, which is sequential, runs on the driver over the costed graph.

Release parameters are :class:`mechanisms.glove.GloveParams`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from mechanisms import glove
from trajpub.candidate import CandidateRelease, Shape
from trajpub.executor import Executor
from trajpub.guarantee import Guarantee
from trajpub.mechanism import Mechanism, PublicInputs

#: Candidate pairs per Dask task.
PAIR_BLOCK = 4000


def _fingerprints(df: pd.DataFrame, params: glove.GloveParams) -> glove.Fingerprints:
    return glove.build_fingerprints(df[["object_id", "traj_id", "t", "lon", "lat", "x", "y"]], params)


def _costs(samples: list[np.ndarray], pairs: np.ndarray, params: glove.GloveParams) -> np.ndarray:
    return glove.pair_costs(samples, np.ones(len(samples), dtype=np.int64), pairs, params)


def concat_fingerprints(parts: list[glove.Fingerprints]) -> glove.Fingerprints:
    """The partitions' fingerprints as one collection, in partition order."""
    samples = [s for p in parts for s in p.samples]
    owners = np.asarray([o for p in parts for o in p.object_ids], dtype=object)
    sources = [s for p in parts for s in p.source_traj_ids]
    return glove.Fingerprints(samples, owners, sources)


def gather_fingerprints(executor: Executor, prepared: list, params: glove.GloveParams) -> glove.Fingerprints:
    """The fingerprints, built on the workers (an object's trajectories are all in one partition)."""
    return concat_fingerprints(executor.gather(executor.map(_fingerprints, prepared, params=params, pure=False)))


def costed_merge(executor: Executor, fps: glove.Fingerprints, params: glove.GloveParams,
                 refine: Callable[[np.ndarray], np.ndarray] | None = None) -> glove.MergeResult:
    """Candidate costs in blocks on the workers, then greedy merging on the driver (``refine``: see
    :func:`mechanisms.glove.greedy_merge`)."""
    keys = glove.locality_keys(fps, params)
    pairs = glove.candidate_pairs(keys, fps.object_ids, params.candidates)
    if len(pairs):
        [shared] = executor.scatter([fps.samples], broadcast=True, hash=False)
        blocks = [pairs[a:a + PAIR_BLOCK] for a in range(0, len(pairs), PAIR_BLOCK)]
        costs = np.concatenate(executor.gather(executor.map(_costs, [shared] * len(blocks), blocks, params=params,
                                                            pure=False)))
    else:
        costs = np.empty(0)
    return glove.greedy_merge(fps, params, pairs, costs, refine)


def single_sources(sources: pd.DataFrame) -> pd.DataFrame:
    """The owner table (``traj_id, object_id, source_traj_id``) of the records made of one source trajectory (a
    record of several, ``unit: object``, has no single source and is left out)."""
    return sources.drop_duplicates("traj_id", keep=False).reset_index(drop=True)


class Glove(Mechanism):
    """GLOVE as a release mechanism: truthful generalised records (rectangle + time span per sample), identical
    within each published group of >= k objects (``set_id``), each carrying its owner's ``object_id``."""

    name = "glove"
    shape = Shape.GENERALISED
    Params = glove.GloveParams

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, params: glove.GloveParams,
                    rng: np.random.Generator) -> CandidateRelease:
        """Fingerprints and the candidate pairs' merge costs on the workers; the greedy merging, which is
        sequential, on the driver over the costed graph."""
        grid = inputs.grid
        fps = gather_fingerprints(executor, prepared, params)
        result = costed_merge(executor, fps, params)
        points, sources = glove.release(fps, result, rng)
        points["cell"] = grid.cell_of(points["x"].to_numpy(), points["y"].to_numpy())
        meta = {"mechanism": "glove", "params": params.to_dict(), **glove.summary(fps, result, points)}
        return CandidateRelease(self.shape, points[["set_id", "traj_id", "seq", "cell", "t", "t_end", "lon", "lat", "lon_min",
                                 "lat_min", "lon_max", "lat_max", "x", "y", "object_id"]], meta,
                         owners=single_sources(sources))

    def guarantee(self, params: glove.GloveParams) -> Guarantee:
        """Heuristic k-anonymity by generalisation (Gramaglia and Fiore 2015), per trajectory or per object:
        :func:`mechanisms.glove.guarantee`."""
        return glove.guarantee(params)
