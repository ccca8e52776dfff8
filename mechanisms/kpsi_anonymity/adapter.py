"""(k-Ψ)-anonymity (Chen, Li, Zhang 2020) per trajectory on the Dask partitions, dummies on a road
network from ``roads.*`` (read by :mod:`tasks.public_inputs`) or, without one, uniformly in the disc (the stated fallback).

Release parameters are :class:`mechanisms.kpsi_anonymity.KPsiParams` plus ``road_network``: the name of a
network in ``roads.networks`` (``null`` for none). Without a network the release must use ``road_aware: false``
and ``psi_mode: constant`` with ``delta_m``, and its guarantee says that dummies may be off-road.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import kpsi_anonymity as kpsi
from trajpub.candidate import CandidateRelease, Shape
from trajpub.executor import Executor
from trajpub.guarantee import Guarantee
from trajpub.mechanism import OnRoadNetwork, PublicInputs, RoadNetworkMechanism


def _trajectories(df: pd.DataFrame) -> pd.DataFrame:
    """On a worker: the partition's trajectories in the mechanism's canonical order. Fixes with a timestamp
    already seen in their trajectory are left out (the mechanism needs strictly increasing times)."""
    return kpsi.trajectory_keys(df.drop_duplicates(["traj_id", "t"]))


def _anonymize(df: pd.DataFrame, network, params: kpsi.KPsiParams, rngs: list, set_ids: np.ndarray,
               crs) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """On a worker: Phase 1 and 2 for every trajectory of the partition, each with its own generator."""
    points = df.drop_duplicates(["traj_id", "t"])[["object_id", "traj_id", "seq", "t", "x", "y"]]
    out = kpsi.anonymize_batch(points, network, params, rngs, set_ids, crs=crs)
    return out.published, out.private, out.summary()


class KPsi(RoadNetworkMechanism):
    """(k-Ψ)-anonymity as a release mechanism: k trajectories per real one (k−1 dummies), Laplace-perturbed,
    published as anonymity sets (``set_id``); which member is real goes to the private owner table."""

    name = "kpsi_anonymity"
    shape = Shape.ANONYMITY_SETS
    Params = kpsi.KPsiParams

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, setup: OnRoadNetwork,
                    rng: np.random.Generator) -> CandidateRelease:
        """Phases 1 and 2 for each trajectory on its worker with its own generator; set ids drawn on the
        driver, the network broadcast once."""
        grid = inputs.grid
        network = None
        if inputs.road_network is not None:
            [network] = executor.scatter([inputs.road_network], broadcast=True, hash=False)
        keys = executor.gather(executor.map(_trajectories, prepared, pure=False))
        counts = [len(k) for k in keys]
        set_ids = rng.permutation(sum(counts)).astype(np.int64)  # random: reveals nothing of the input order
        rngs = rng.spawn(sum(counts))
        bounds = np.r_[0, np.cumsum(counts)]
        futures = [executor.submit(_anonymize, part, network, setup.params, rngs[a:b], set_ids[a:b], grid.crs,
                                   pure=False)
                   for part, a, b in zip(prepared, bounds[:-1], bounds[1:], strict=True) if b > a]
        results = executor.gather(futures)
        published = pd.concat([r[0] for r in results], ignore_index=True)
        private = pd.concat([r[1] for r in results], ignore_index=True)
        k = setup.params.k
        published["traj_id"] = published["set_id"] * k + published["member"] + 1
        published["cell"] = grid.cell_of(published["x"].to_numpy(), published["y"].to_numpy())
        real = private[private["is_real"]]
        owners = pd.DataFrame({"traj_id": real["set_id"].to_numpy() * k + real["member"].to_numpy() + 1,
                               "object_id": real["object_id"].astype(str).to_numpy(),
                               "source_traj_id": real["traj_id"].to_numpy()})
        summaries = [r[2] for r in results]
        meta = {"mechanism": "kpsi_anonymity", "params": setup.params.to_dict(),
                "road_network": setup.road_network, "road_network_source": setup.network_source,
                "input_trajectories": sum(s["input_trajectories"] for s in summaries),
                "published_sets": sum(s["published_sets"] for s in summaries),
                "released_records": int(published["traj_id"].nunique()), "released_points": len(published)}
        return CandidateRelease(self.shape, published[["set_id", "traj_id", "seq", "cell", "t", "lon", "lat", "x", "y"]], meta,
                         owners=owners)

    def network_guarantee(self, params: kpsi.KPsiParams, network_source: str) -> Guarantee:
        """Heuristic (k-Ψ)-anonymity with a per-axis Laplace perturbation (Chen, Li, Zhang 2020); what the
        network's source changes: :func:`mechanisms.kpsi_anonymity.guarantee`."""
        return kpsi.guarantee(params, network_source)
