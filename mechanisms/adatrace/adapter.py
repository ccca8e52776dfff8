"""AdaTrace (Gursoy et al., CCS 2018) on the Dask partitions: true counts per partition, summed on the driver,
noise and synthesis on the driver (they read only the noisy synopsis); with ``attack_resilience`` the raw-data
questions of the sniffing and outlier checks are answered on the workers (:class:`DaskOracle`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import adatrace
from trajpub.candidate import CandidateRelease, Shape
from trajpub.executor import Executor, summed
from trajpub.guarantee import Guarantee
from trajpub.mechanism import Mechanism, PublicInputs


def _trajectories(df: pd.DataFrame) -> adatrace.Trajectories:
    return adatrace.Trajectories.from_frame(df[["traj_id", "seq", "x", "y"]])


def _features(trajs: adatrace.Trajectories) -> dict[str, np.ndarray]:
    return adatrace.trajectory_features(trajs.offsets, trajs.x, trajs.y)


def _nearest(features: dict, feature: str, query: np.ndarray) -> np.ndarray:
    return adatrace.nearest_distance(features[feature], query)


def _count_within(features: dict, feature: str, query: np.ndarray, centre: np.ndarray, tol: float) -> np.ndarray:
    return adatrace.count_within(features[feature], query, centre, tol)


class DaskOracle:
    """:class:`mechanisms.adatrace.RawOracle` whose answers are computed next to the raw partitions; only the
    answers (indices, minima, counts) come back to the driver."""

    def __init__(self, executor: Executor, trajs: list):
        self.executor = executor
        self.trajs = trajs
        self.features = executor.map(_features, trajs, pure=False)

    def sniffing_failures(self, grid, synthetic, sniff, zone, shared_threshold):
        [g, s] = self.executor.scatter([grid, synthetic], broadcast=True, hash=False)
        parts = self.executor.gather(self.executor.map(adatrace.sniffing_failures, self.trajs, grid=g, synthetic=s,
                                                       sniff=sniff, zone=zone, shared_threshold=shared_threshold,
                                                       pure=False))
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)

    def nearest(self, feature, query):
        parts = self.executor.gather(self.executor.map(_nearest, self.features, feature=feature, query=query,
                                                       pure=False))
        return np.min(np.vstack(parts), axis=0) if parts else np.full(len(query), np.inf)

    def count_within(self, feature, query, centre, tol):
        parts = self.executor.gather(self.executor.map(_count_within, self.features, feature=feature, query=query,
                                                       centre=centre, tol=tol, pure=False))
        return np.sum(np.vstack(parts), axis=0) if parts else np.zeros(len(query), np.int64)


class AdaTrace(Mechanism):
    """AdaTrace as a release mechanism: synthetic trajectories, one point per visited adaptive-grid cell, no
    timestamps."""

    name = "adatrace"
    shape = Shape.SYNTHETIC
    Params = adatrace.AdaTraceParams

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, params: adatrace.AdaTraceParams,
                    rng: np.random.Generator) -> CandidateRelease:
        """Trip, length and density counts on the workers, summed on the driver; noise and synthesis on the
        driver from the noisy synopsis, and the resilience checks' raw-data questions answered on the workers."""
        grid = inputs.grid
        extent = grid.extent  # the flow grid's projected bbox: a public parameter of the release
        trajs = executor.map(_trajectories, prepared, pure=False)
        top = adatrace.top_grid(extent, params)
        true_top = np.sum(executor.gather(executor.map(adatrace.top_density, trajs, grid=top, pure=False)), axis=0)
        noisy_top = adatrace.noisy_top_density(true_top, params, rng)
        agrid = adatrace.adaptive_grid(extent, noisy_top, params)
        agrid.edges, agrid.hops  # noqa: B018  (computed once on the driver, shipped with the grid)
        [g] = executor.scatter([agrid], broadcast=True, hash=False)
        counts = summed(executor, adatrace.feature_counts, trajs, grid=g, transition_cap=params.transition_cap,
                        max_length=params.max_length)
        syn = adatrace.noisy_synopsis(agrid, noisy_top, counts, params, rng)
        oracle = DaskOracle(executor, trajs) if params.reads_raw_after_synopsis else None
        result = adatrace.release(syn, rng, oracle)
        pts = result.points
        x, y = pts["x"].to_numpy(), pts["y"].to_numpy()
        lon, lat = grid.unproject(x, y) if len(pts) else (np.empty(0), np.empty(0))
        points = pd.DataFrame({"traj_id": pts["traj_id"].to_numpy(np.int64), "seq": pts["seq"].to_numpy(np.int64),
                               "cell": grid.cell_of(x, y), "t": pd.Series(pd.NaT, index=pts.index,
                                                                          dtype="datetime64[ns, UTC]"),
                               "lon": lon, "lat": lat, "x": x, "y": y})
        meta = {"mechanism": "adatrace", "params": params.to_dict(),
                # no true count here (as DPT): the noisy number of input trajectories (Σ noisy trip counts)
                "noisy_input_trajectories": syn.noisy_count,
                "released_records": int(pts["traj_id"].nunique()), "released_points": len(pts),
                **result.report}
        return CandidateRelease(self.shape, points, _json_safe(meta))


    def guarantee(self, params: adatrace.AdaTraceParams) -> Guarantee:
        """ε-DP per trajectory record for the synopsis (Gursoy et al., CCS 2018), and for the trajectories
        unless the resilience checks read the raw data: :func:`mechanisms.adatrace.guarantee`."""
        return adatrace.guarantee(params)

def _json_safe(obj):
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return _json_safe(obj.tolist())
    return obj
