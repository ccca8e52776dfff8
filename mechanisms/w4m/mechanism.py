"""W4M end to end on one in-memory frame, and the steps the Dask adapter runs separately."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms.w4m.clustering import Clustering, greedy_clusters
from mechanisms.w4m.edr import candidate_pairs, edr_batch, normalised
from mechanisms.w4m.params import W4MParams
from mechanisms.w4m.trajectories import Trajectories, from_frame
from mechanisms.w4m.translate import INSERTED, KEPT, MOVED, translate_clusters

#: Columns of a published W4M release (``object_id`` is the owner: the audit uses it, publication drops it).
PUBLISHED = ["set_id", "traj_id", "object_id", "seq", "t", "x", "y"]


@dataclass(frozen=True)
class W4MRelease:
    """``points``: the published points (:data:`PUBLISHED` plus the private diagnostics ``source_traj_id,
    origin, shift_m``); ``clustering``; ``summary``: JSON-safe counts."""

    points: pd.DataFrame
    clustering: Clustering
    summary: dict


def pairwise_distances(traj: Trajectories, params: W4MParams) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs (exact pruning) and their normalised EDR, in one process."""
    pairs = candidate_pairs(traj, params.match_m, params.time_tolerance_s)
    e = edr_batch(traj, pairs, params.match_m, params.time_tolerance_s)
    lengths = traj.lengths
    return pairs, normalised(e, lengths[pairs[:, 0]], lengths[pairs[:, 1]])


def publish(points: pd.DataFrame, n_clusters: int, rng: np.random.Generator) -> pd.DataFrame:
    """Published ids: ``set_id`` a random permutation of the cluster index, ``traj_id`` a random permutation
    over all released trajectories (neither reveals the input order nor which member is the pivot); ``t`` as
    tz-aware UTC timestamps."""
    set_of = rng.permutation(n_clusters).astype(np.int64)
    out = points.copy()
    out["set_id"] = set_of[out["cluster"].to_numpy()] if len(out) else np.zeros(0, np.int64)
    key = out["cluster"].to_numpy() * (out["member"].max() + 1 if len(out) else 1) + out["member"].to_numpy()
    uniq, inv = np.unique(key, return_inverse=True)
    out["traj_id"] = rng.permutation(len(uniq)).astype(np.int64)[inv]
    out["t"] = pd.to_datetime(out["t"].to_numpy(np.float64) * 1e9, utc=True) if len(out) else pd.Series(
        [], dtype="datetime64[ns, UTC]")
    out = out.sort_values(["set_id", "traj_id", "seq"], kind="stable").reset_index(drop=True)
    return out[PUBLISHED + ["source_traj_id", "origin", "shift_m"]]


def summarise(lengths: np.ndarray, clustering: Clustering, points: pd.DataFrame, deleted: int, n_pairs: int,
              dropped_duplicates: int = 0) -> dict:
    """JSON-safe counts and diagnostics of a release (no ids, no seed); ``lengths`` are the input
    trajectories' point counts."""
    n, total = len(lengths), int(np.sum(lengths))
    trashed = clustering.trashed
    origin = points["origin"].to_numpy() if len(points) else np.zeros(0, np.int8)
    shift = points["shift_m"].to_numpy() if len(points) else np.zeros(0)
    sizes = np.bincount(clustering.labels[clustering.labels >= 0], minlength=clustering.n_clusters)
    return {
        "input_trajectories": n,
        "input_points": total,
        "duplicate_timestamps_dropped": int(dropped_duplicates),
        "edr_pairs_total": n * (n - 1) // 2,
        "edr_pairs_computed": int(n_pairs),
        "edr_pairs_pruned_exact": n * (n - 1) // 2 - int(n_pairs),
        "clusters": int(clustering.n_clusters),
        "cluster_size_max": int(sizes.max()) if len(sizes) else 0,
        "infeasible": bool(clustering.infeasible),
        "suppressed_trajectories": len(trashed),
        "suppressed_points_trashed": int(lengths[trashed].sum()),
        "suppressed_points_deleted_by_editing": int(deleted),
        "inserted_points": int((origin == INSERTED).sum()),
        "kept_points": int((origin == KEPT).sum()),
        "moved_points": int((origin == MOVED).sum()),
        "kept_fraction_of_input_points": float((origin == KEPT).sum() / total) if total else 0.0,
        "released_records": int(points["traj_id"].nunique()) if "traj_id" in points else int(
            points[["cluster", "member"]].drop_duplicates().shape[0]),
        "released_points": len(points),
        "shift_m_mean": float(shift.mean()) if len(shift) else 0.0,
        "shift_m_median": float(np.median(shift)) if len(shift) else 0.0,
        "shift_m_max": float(shift.max()) if len(shift) else 0.0,
    }


def anonymize(df: pd.DataFrame, params: W4MParams, rng: np.random.Generator) -> W4MRelease:
    """W4M on a frame with ``object_id, traj_id, seq, t, x, y``: exact-pruned EDR, greedy clustering with a
    bounded trash, editing and translation into cylinders of radius δ/2, random published ids. ``rng`` drives
    the clustering's tie-break and first pivot and the published ids (``rng.spawn(2)``)."""
    rng_cluster, rng_ids = rng.spawn(2)
    traj, dropped = from_frame(df)
    pairs, dist = pairwise_distances(traj, params)
    clustering = greedy_clusters(traj, pairs, dist, params, rng_cluster)
    points, deleted = translate_clusters(traj, clustering, params)
    published = publish(points, clustering.n_clusters, rng_ids)
    return W4MRelease(published, clustering, summarise(traj.lengths, clustering, published, deleted, len(pairs), dropped))
