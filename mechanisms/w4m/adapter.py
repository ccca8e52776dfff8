"""W4M, (k,δ)-anonymity by EDR clustering and space translation (Abul, Bonchi, Nanni 2010), on
the Dask partitions.

The work is split so that raw points stay on the workers: each partition becomes a compact trajectory table;
the tables are joined on a worker; candidate pairs (exact spatio-temporal pruning) are found there; the EDR of
the candidate pairs runs in blocks of similar cost across the workers; the greedy clustering runs as one task;
the editing and translation run in blocks of clusters. The driver sees pair indices, EDR values, cluster labels
and, at the end, the released points. Release parameters are :class:`mechanisms.w4m.W4MParams`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import w4m
from trajpub.candidate import CandidateRelease, Shape
from trajpub.executor import Executor
from trajpub.guarantee import Guarantee
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.trajectories import Trajectories

#: Target number of EDR blocks per worker (more blocks balance better, fewer cost less overhead).
EDR_BLOCKS_PER_WORKER = 4
#: Clusters per translation task.
CLUSTERS_PER_BLOCK = 200


def _extract(df: pd.DataFrame) -> tuple[Trajectories, int]:
    """On a worker: the partition's trajectories as flat arrays, and the number of repeated timestamps
    dropped."""
    return w4m.from_frame(df)


def _join(*parts: tuple[Trajectories, int]) -> Trajectories:
    return Trajectories.concat([p[0] for p in parts])


def _lengths_and_dropped(traj: Trajectories, *parts: tuple[Trajectories, int]) -> tuple[np.ndarray, int]:
    return traj.lengths, int(sum(p[1] for p in parts))


def _edr_block(traj: Trajectories, pairs: np.ndarray, params: w4m.W4MParams) -> np.ndarray:
    return w4m.edr_batch(traj, pairs, params.match_m, params.time_tolerance_s)


def _translate_block(traj: Trajectories, clustering: w4m.Clustering, params: w4m.W4MParams,
                     clusters: np.ndarray) -> tuple[pd.DataFrame, int]:
    return w4m.translate_clusters(traj, clustering, params, clusters)


def _cost_blocks(cost: np.ndarray, n_blocks: int) -> list[np.ndarray]:
    """Split indices ``0..len(cost)`` (sorted by cost, so each block has similar shapes) into about
    ``n_blocks`` runs of similar total cost."""
    if len(cost) == 0:
        return []
    order = np.argsort(cost, kind="stable")
    cum = np.cumsum(cost[order])
    cut = np.searchsorted(cum, cum[-1] * np.arange(1, n_blocks) / n_blocks)
    return [b for b in np.split(order, np.unique(cut)) if len(b)]


class W4M(Mechanism):
    """W4M as a release mechanism: truthful, edited trajectories published in sets (``set_id``) of at least k,
    co-localised within δ at every published timestamp; outliers suppressed."""

    name = "w4m"
    shape = Shape.ANONYMITY_SETS
    Params = w4m.W4MParams

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, params: w4m.W4MParams,
                    rng: np.random.Generator) -> CandidateRelease:
        """Raw points stay on the workers: the driver sees pair indices, EDR values, cluster labels and, at
        the end, the released points (the module docstring)."""
        grid = inputs.grid
        rng_cluster, rng_ids = rng.spawn(2)  # the same streams as mechanisms.w4m.anonymize
        parts = executor.map(_extract, prepared, pure=False)
        table = executor.submit(_join, *parts, pure=False)
        lengths, dropped = executor.submit(_lengths_and_dropped, table, *parts, pure=False).result()
        pairs = executor.submit(w4m.candidate_pairs, table, params.match_m, params.time_tolerance_s,
                                pure=False).result()
        n_workers = max(1, len(executor.scheduler_info()["workers"]))
        blocks = _cost_blocks(lengths[pairs[:, 0]] * lengths[pairs[:, 1]], EDR_BLOCKS_PER_WORKER * n_workers)
        edr_futures = [executor.submit(_edr_block, table, pairs[b], params, pure=False) for b in blocks]
        edr = np.empty(len(pairs), dtype=np.int64)
        for b, values in zip(blocks, executor.gather(edr_futures), strict=True):
            edr[b] = values
        dist = w4m.normalised(edr, lengths[pairs[:, 0]], lengths[pairs[:, 1]])
        clustering_future = executor.submit(w4m.greedy_clusters, table, pairs, dist, params, rng_cluster,
                                            pure=False)
        clustering = clustering_future.result()
        ids = np.arange(clustering.n_clusters)
        chunks = [ids[a:a + CLUSTERS_PER_BLOCK] for a in range(0, len(ids), CLUSTERS_PER_BLOCK)]
        results = executor.gather([executor.submit(_translate_block, table, clustering_future, params, c, pure=False)
                                   for c in chunks])
        frames = [r[0] for r in results]
        deleted = sum(r[1] for r in results)
        points = (pd.concat(frames, ignore_index=True) if frames
                  else w4m.translate_clusters(Trajectories.concat([]), clustering, params)[0])
        published = w4m.publish(points, clustering.n_clusters, rng_ids)
        summary = w4m.summarise(lengths, clustering, published, deleted, len(pairs), dropped)
        lon, lat = grid.unproject(published["x"].to_numpy(), published["y"].to_numpy())
        published["lon"], published["lat"] = lon, lat
        published["cell"] = grid.cell_of(published["x"].to_numpy(), published["y"].to_numpy())
        meta = {"mechanism": "w4m", "params": params.to_dict(), **summary,
                "points_outside_grid": int((published["cell"] < 0).sum()),
                "k_delta_verified": w4m.is_k_delta_anonymous(
                    published, params.k, params.delta_m, owners="object_id" if params.distinct_objects else None),
                "time_grid": "each set is published at its pivot's timestamps",
                "edr_pruning": "exact: a pruned pair has no matchable point pair, so its EDR is max(n, m)"}
        cols = ["set_id", "traj_id", "object_id", "seq", "cell", "t", "lon", "lat", "x", "y"]
        owners = published[["traj_id", "object_id", "source_traj_id"]].drop_duplicates("traj_id")
        return CandidateRelease(self.shape, published[cols].reset_index(drop=True), meta, owners=owners.reset_index(drop=True))

    def guarantee(self, params: w4m.W4MParams) -> Guarantee:
        """Heuristic (k,δ)-anonymity of co-localised sets (Abul, Bonchi, Nanni 2010), and what it does not
        cover: :func:`mechanisms.w4m.guarantee`."""
        return w4m.guarantee(params)
