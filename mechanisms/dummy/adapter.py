"""Dummy trajectories (DTPP, Liu et al. 2019) per trajectory on the Dask partitions. Candidates come from a
public road network read from PostGIS (``road_network`` names one in ``roads.networks``), built once and
broadcast, or, with ``road_network: null``, from fixed sub-cell centres built on each worker for its cells.

Output: anonymity sets (``set_id`` published, ``traj_id = set_id·k + member + 1``), no ``object_id`` on the
points; the real member of each set goes to the private owner table, as for (k-Ψ)-anonymity.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import dummy
from trajpub.candidate import CandidateRelease, Shape
from trajpub.executor import Executor
from trajpub.grid import GridSpec
from trajpub.guarantee import Guarantee
from trajpub.mechanism import OnRoadNetwork, PublicInputs, RoadNetworkMechanism


def _points(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop_duplicates(["traj_id", "t"])[["object_id", "traj_id", "t", "x", "y", "lon", "lat"]]


def _keys(df: pd.DataFrame) -> np.ndarray:
    return dummy.trajectory_keys(df)


def _generate(df: pd.DataFrame, candidates, params: dummy.DummyParams, rngs: list, set_ids: np.ndarray,
              bbox: tuple, cell_size_m: float):
    pts = _points(df)
    if candidates is None:
        grid = GridSpec(tuple(bbox), cell_size_m)
        candidates = dummy.subcell_candidates(dummy.cell_keys(pts["lon"], pts["lat"], params.cell_deg),
                                              params.cell_deg, params.subcells, grid.project)
    out = dummy.generate_batch(pts, candidates, params, rngs, set_ids)
    return out.published, out.owners, out.summary()


def _road_candidates(network, params: dummy.DummyParams, bbox: tuple, cell_size_m: float) -> dummy.Candidates:
    grid = GridSpec(tuple(bbox), cell_size_m)
    return dummy.road_candidates(network, grid.unproject, params.cell_deg, params.candidate_spacing_m)


class Dummy(RoadNetworkMechanism):
    """DTPP dummies: k trajectories per real one (k−1 dummies sharing its exposed locations), published as
    anonymity sets; which member is real goes to the private owner table."""

    name = "dummy"
    shape = Shape.ANONYMITY_SETS
    Params = dummy.DummyParams

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, setup: OnRoadNetwork,
                    rng: np.random.Generator) -> CandidateRelease:
        """Candidates built once (road network) or per worker (sub-cell centres); each trajectory's dummies
        drawn on its worker with its own generator, set ids drawn on the driver."""
        grid = inputs.grid
        params = setup.params
        bbox, size = tuple(grid.bbox), grid.cell_size_m
        candidates = None
        network = inputs.road_network
        if network is not None:
            [network_f] = executor.scatter([network], hash=False)
            built = executor.submit(_road_candidates, network_f, params, bbox, size, pure=False)
            [candidates] = executor.scatter([built.result()], broadcast=True, hash=False)
        keys = executor.gather(executor.map(_keys, prepared, pure=False))
        counts = [len(k) for k in keys]
        set_ids = rng.permutation(sum(counts)).astype(np.int64)  # random: reveals nothing of the input order
        rngs = rng.spawn(sum(counts))
        bounds = np.r_[0, np.cumsum(counts)]
        futures = [executor.submit(_generate, part, candidates, params, rngs[a:b], set_ids[a:b], bbox, size,
                                   pure=False)
                   for part, a, b in zip(prepared, bounds[:-1], bounds[1:], strict=True) if b > a]
        results = executor.gather(futures)
        k = params.k
        cols = ["set_id", "traj_id", "seq", "cell", "t", "lon", "lat", "x", "y"]
        published = pd.concat([r[0] for r in results], ignore_index=True) if results else pd.DataFrame()
        owners = pd.concat([r[1] for r in results], ignore_index=True) if results else pd.DataFrame(
            columns=["set_id", "member", "object_id", "source_traj_id"])
        if len(published):
            published["traj_id"] = published["set_id"].to_numpy(np.int64) * k + published["member"] + 1
            published["cell"] = grid.cell_of(published["x"].to_numpy(), published["y"].to_numpy())
            published = published.sort_values(["set_id", "traj_id", "seq"], kind="stable")
        else:
            published = pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
        owner_table = pd.DataFrame({
            "traj_id": owners["set_id"].to_numpy(np.int64) * k + owners["member"].to_numpy(np.int64) + 1,
            "object_id": owners["object_id"].astype(str).to_numpy(),
            "source_traj_id": owners["source_traj_id"].to_numpy(np.int64)})
        summaries = [r[2] for r in results]
        total = {key: sum(s[key] for s in summaries) for key in summaries[0] if key != "suppressed_by_reason"} \
            if summaries else {}
        reasons: dict[str, int] = {}
        for s in summaries:
            for key, v in s["suppressed_by_reason"].items():
                reasons[key] = reasons.get(key, 0) + v
        meta = {"mechanism": "dummy", "params": params.to_dict(), "road_network": setup.road_network,
                "road_network_source": setup.network_source,
                "candidate_source": "road_network" if network is not None else "subcells",
                **total, "suppressed_by_reason": reasons,
                "released_records": int(published["traj_id"].nunique()), "released_points": len(published)}
        return CandidateRelease(self.shape, published[cols].reset_index(drop=True), meta, owners=owner_table)

    def network_guarantee(self, params: dummy.DummyParams, network_source: str) -> Guarantee:
        """Heuristic (k, l) dummy anonymity against an adversary who knows the exposed locations (DTPP,
        Liu et al. 2019); what the network's source changes: :func:`mechanisms.dummy.guarantee`."""
        return dummy.guarantee(params, network_source)
