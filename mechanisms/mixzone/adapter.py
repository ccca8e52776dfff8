"""Mix zones (UTMP placement, Liu et al. 2012) on the Dask partitions: the zones are placed once on a worker
from the road network alone, then every partition's trajectories are cut and (by default) their in-zone points
suppressed; pseudonyms are drawn on the driver as one random permutation over all fragments.

Release parameters are :class:`mechanisms.mixzone.MixzoneParams` plus ``road_network``: the name of a network
in ``roads.networks`` (required: mix zones sit on road intersections), read by :mod:`tasks.public_inputs`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import mixzone
from trajpub.candidate import CandidateRelease, Shape
from trajpub.executor import Executor
from trajpub.guarantee import Guarantee
from trajpub.mechanism import OnRoadNetwork, PublicInputs, RoadNetworkMechanism

_COLUMNS = ["object_id", "traj_id", "seq", "t", "lon", "lat", "x", "y", "cell"]


def _place(network, n_zones: int) -> mixzone.Placement:
    return mixzone.place_mix_zones(network, n_zones)


def _split(df: pd.DataFrame, zone_xy: np.ndarray, params: mixzone.MixzoneParams) -> tuple[pd.DataFrame, dict]:
    """On a worker: one partition's fragments (local numbers) and counts, plus the zones its points touch."""
    out, stats = mixzone.split_fragments(df[_COLUMNS], zone_xy, params)
    stats["zones_touched"] = np.unique(mixzone.covering_zone(df["x"].to_numpy(), df["y"].to_numpy(), zone_xy,
                                                             params.radius_m))
    return out.drop(columns=["zone"]), stats


class Mixzone(RoadNetworkMechanism):
    """Mix-zone pseudonym change: truthful fragments, each one person's, under fresh random identifiers."""

    name = "mixzone"
    shape = Shape.TRUTHFUL
    Params = mixzone.MixzoneParams
    network_required = True

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, setup: OnRoadNetwork,
                    rng: np.random.Generator) -> CandidateRelease:
        """Zones placed once on a worker from the road network alone; each partition's trajectories cut
        on its worker; the pseudonyms drawn on the driver as one permutation."""
        [network_f] = executor.scatter([inputs.road_network], hash=False)
        placement = executor.submit(_place, network_f, setup.params.n_zones, pure=False).result()
        [zone_xy] = executor.scatter([placement.zone_xy], broadcast=True, hash=False)
        results = executor.gather([executor.submit(_split, part, zone_xy, setup.params, pure=False)
                                   for part in prepared])
        counts = [s["released_fragments"] for _, s in results]
        pseudonyms = mixzone.assign_pseudonyms(sum(counts), rng)
        bounds = np.r_[0, np.cumsum(counts)]
        frames = [mixzone.finish(df, pseudonyms[a:b]) for (df, _), a, b
                  in zip(results, bounds[:-1], bounds[1:], strict=True) if b > a]
        points = (pd.concat(frames, ignore_index=True) if frames
                  else pd.DataFrame(columns=[*_COLUMNS, "source_traj_id"]))
        points = points.sort_values(["traj_id", "seq"], kind="stable").reset_index(drop=True)
        stats = {key: sum(s[key] for _, s in results) for key in results[0][1] if key != "zones_touched"} \
            if results else {}
        touched = np.concatenate([s["zones_touched"] for _, s in results]) if results else np.empty(0)
        stats["zones_touched"] = len(np.unique(touched[touched >= 0]))
        meta = {"mechanism": "mixzone", "params": setup.params.to_dict(), "road_network": setup.road_network,
                "road_network_source": setup.network_source, **placement.summary(), **stats,
                "released_records": int(points["traj_id"].nunique()), "released_points": len(points),
                "fragments_per_input_trajectory": (round(points["traj_id"].nunique()
                                                         / max(1, stats.get("input_trajectories", 0)), 3))}
        out = points[["object_id", "traj_id", "seq", "cell", "t", "lon", "lat", "x", "y"]]
        owners = points[["traj_id", "object_id", "source_traj_id"]].drop_duplicates("traj_id")
        return CandidateRelease(self.shape, out.reset_index(drop=True), meta, owners=owners.reset_index(drop=True))

    def network_guarantee(self, params: mixzone.MixzoneParams, network_source: str) -> Guarantee:
        """Heuristic unlinkability of fragments (UTMP mix zones, Liu et al. 2012), not DP; what the
        network's source changes: :func:`mechanisms.mixzone.guarantee`."""
        return mixzone.guarantee(params, network_source)
