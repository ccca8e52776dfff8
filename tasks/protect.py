"""Protect: run the release's privacy mechanism on the Dask partitions.

The registry maps mechanism names to adapters. An adapter parses and validates the mechanism's parameters
(before any data is read), states its guarantee, and runs it: raw-data work on the workers, only noisy
aggregates on the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
from distributed import Client, Future

from mechanisms import fgs_pufferfish as fgs
from mechanisms import prefix_tree
from trajpub.errors import ParameterError
from trajpub.grid import GridSpec
from trajpub.guarantee import Guarantee
from trajpub.segment import cell_sequences


@dataclass(frozen=True)
class Protected:
    """A candidate release: one row per released point (``traj_id, seq, cell, t, lon, lat``; truthful releases
    also carry the owner's ``object_id``, which the audit uses and publication drops) plus the mechanism's run
    metadata (JSON-safe, no seed)."""

    points: pd.DataFrame
    metadata: dict


class MechanismAdapter(Protocol):
    #: "synthetic" (no released record belongs to a person) or "truthful" (each released record is an
    #: object's own, perturbed): it decides which form of the linkage attack the audit runs.
    release_kind: str

    def parse_params(self, params: dict) -> Any: ...
    def guarantee(self, params: Any) -> Guarantee: ...
    def max_records_per_object(self, params: Any) -> int | None: ...
    def run(self, client: Client, prepared: list[Future], grid: GridSpec, params: Any,
            rng: np.random.Generator) -> Protected: ...


def _partition_sequences(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    _, offsets, cells = cell_sequences(df)
    return offsets, cells


def _count_partition(csr: tuple[np.ndarray, np.ndarray], n_locations: int, level: int,
                     transitions: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    return prefix_tree.count_level(csr[0], csr[1], n_locations, level, transitions)


class PrefixTreeAdapter:
    """Chen, Fung, Desai (2012), the noisy prefix tree over grid cells. Each level's true prefix counts are
    computed on the partitions and summed on the driver; only the noisy tree lives on the driver."""

    release_kind = "synthetic"

    def parse_params(self, params: dict) -> prefix_tree.PrefixTreeParams:
        return prefix_tree.PrefixTreeParams.from_dict(params)

    def guarantee(self, params: prefix_tree.PrefixTreeParams) -> Guarantee:
        return prefix_tree.guarantee(params)

    def max_records_per_object(self, params: prefix_tree.PrefixTreeParams) -> int | None:
        return params.max_records_per_object

    def run(self, client: Client, prepared: list[Future], grid: GridSpec, params: prefix_tree.PrefixTreeParams,
            rng: np.random.Generator) -> Protected:
        n = grid.n_cells
        csr = client.map(_partition_sequences, prepared, pure=False)

        def counter(level: int, transitions: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
            [shared] = client.scatter([transitions], broadcast=True, hash=False)  # one object, on every worker
            parts = client.gather(client.map(_count_partition, csr, n_locations=n, level=level,
                                             transitions=shared, pure=False))
            keys = np.concatenate([k for k, _ in parts]) if parts else np.empty(0, np.int64)
            counts = np.concatenate([c for _, c in parts]) if parts else np.empty(0, np.int64)
            unique, inverse = np.unique(keys, return_inverse=True)
            return unique, np.bincount(inverse, weights=counts, minlength=len(unique)).astype(np.int64)

        tree = prefix_tree.build_tree(counter, n, params, rng)
        released = prefix_tree.release(tree, params, rng)
        offsets, cells = released.expanded()
        lengths = np.diff(offsets)
        traj_id = np.repeat(np.arange(1, len(lengths) + 1), lengths)
        seq = np.arange(len(cells)) - np.repeat(offsets[:-1], lengths)
        lon, lat = grid.cell_centre(cells) if len(cells) else (np.empty(0), np.empty(0))
        points = pd.DataFrame({"traj_id": traj_id, "seq": seq, "cell": cells, "t": pd.NaT, "lon": lon, "lat": lat})
        return Protected(points, {**tree.metadata(), "released_records": len(lengths),
                                  "released_points": len(cells)})


def _fgs_prepare(df: pd.DataFrame, grid: GridSpec, params: fgs.FgsParams) -> list[tuple]:
    """On a worker: each object's daily slot series, as (object_id, dates, days)."""
    return list(fgs.prepare(df[["object_id", "t", "lon", "lat"]], grid, params).objects())


def _fgs_correlations(objects: list[tuple], params: fgs.FgsParams) -> np.ndarray:
    return np.array([fgs.object_correlation(days, params) for _, _, days in objects]).reshape(
        len(objects), 2, -1)


def _fgs_release(objects: list[tuple], rng: np.random.Generator, params: fgs.FgsParams,
                 b_c0: tuple[float, float], grid: GridSpec) -> pd.DataFrame:
    """On a worker: Alg. 1 for every object of the partition, each with its own noise stream."""
    frames = []
    for (object_id, dates, days), object_rng in zip(objects, rng.spawn(len(objects)), strict=True):
        released, _ = fgs.release_object(days, params, object_rng, b_c0=b_c0)
        frames.append(fgs.released_points(object_id, dates, released, grid, params.day_timezone))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _fgs_correlation_stats(objects: list[tuple], rng: np.random.Generator, params: fgs.FgsParams,
                           b_c0: tuple[float, float]) -> list:
    """On a worker: the C' statistics of simulated releases of each object (spec §5.4 steps 1-2). These
    simulated releases are the auditor's, never published; they only estimate ε."""
    return [fgs.correlation_stats(fgs.noisy_correlations(days, params, object_rng, n_realizations=FGS_EMPIRICAL_RUNS,
                                                         b_c0=b_c0))
            for (_, _, days), object_rng in zip(objects, rng.spawn(len(objects)), strict=True)]


FGS_EMPIRICAL_RUNS = 50  # simulated releases per object for the empirical ε (the bench goes to 20,000)


class FgsPufferfishAdapter:
    """Ou et al. (2018), Fourier-coefficient Laplace noise per object (or the CTS / FPA baselines). Each object's
    days are prepared, correlated and released on the workers; only the correlations (for the noise calibration
    and the analytic ε) come to the driver. A truthful release: each released day is one object's own."""

    release_kind = "truthful"

    def parse_params(self, params: dict) -> fgs.FgsParams:
        parsed = fgs.FgsParams.from_dict(params)
        if parsed.method == "fgs" and parsed.epsilon is None:
            raise ParameterError("a governed release must know its epsilon before it reads data: give epsilon "
                                 "(b_C0 is then calibrated to it), not b_c0 or location_std_m",
                                 "fgs_pufferfish.epsilon")
        if parsed.mean_trajectory == "withhold":
            raise ParameterError("the release flow publishes positions; mean_trajectory 'withhold' leaves only "
                                 "deviations, which it cannot publish as points", "fgs_pufferfish.mean_trajectory")
        return parsed

    def guarantee(self, params: fgs.FgsParams) -> Guarantee:
        return fgs.guarantee(params)

    def max_records_per_object(self, params: fgs.FgsParams) -> int | None:
        return None

    def run(self, client: Client, prepared: list[Future], grid: GridSpec, params: fgs.FgsParams,
            rng: np.random.Generator) -> Protected:
        objects = client.map(_fgs_prepare, prepared, grid=grid, params=params, pure=False)
        correlations = np.concatenate([c for c in client.gather(client.map(_fgs_correlations, objects,
                                                                           params=params, pure=False)) if len(c)])
        b_c0 = fgs.noise_calibration(params, correlations)
        frames = client.gather(client.map(_fgs_release, objects, rng.spawn(len(objects)), params=params,
                                          b_c0=b_c0, grid=grid, pure=False))
        points = pd.concat([f for f in frames if len(f)], ignore_index=True)
        points["traj_id"] = points.groupby(["object_id", "traj_id"], sort=False).ngroup() + 1
        points["cell"] = grid.cell_of(points["x"].to_numpy(), points["y"].to_numpy())
        analytic = fgs.analytic_epsilon(correlations, params, b_c0)
        stats = client.gather(client.map(_fgs_correlation_stats, objects, rng.spawn(len(objects)), params=params,
                                         b_c0=b_c0, pure=False))
        empirical = fgs.empirical_epsilon([s for part in stats for s in part])
        return Protected(points[["object_id", "traj_id", "seq", "cell", "t", "lon", "lat"]],
                         {"mechanism": "fgs_pufferfish", "params": params.to_dict(),
                          "analytic_epsilon": analytic.to_dict(), "empirical_epsilon": empirical.to_dict(),
                          "objects": len(correlations),
                          "released_records": int(points["traj_id"].nunique()),
                          "released_points": len(points)})


MECHANISMS: dict[str, MechanismAdapter] = {"prefix_tree": PrefixTreeAdapter(),
                                           "fgs_pufferfish": FgsPufferfishAdapter()}


def adapter(name: str) -> MechanismAdapter:
    if name not in MECHANISMS:
        raise ParameterError(f"unknown mechanism '{name}'; available: {', '.join(sorted(MECHANISMS))}", "mechanism")
    return MECHANISMS[name]
