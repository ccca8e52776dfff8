"""FGS-Pufferfish (Ou et al. 2018) per object on the Dask partitions."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import fgs_pufferfish as fgs
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import InputError, ParameterError
from trajpub.executor import Executor
from trajpub.grid import GridSpec
from trajpub.guarantee import Guarantee
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.spec import ReleaseSpec


def _fgs_prepare(df: pd.DataFrame, grid: GridSpec, params: fgs.FgsParams) -> list[tuple]:
    """On a worker: each object's daily slot series, as (object_id, dates, days)."""
    return list(fgs.prepare(df[["object_id", "t", "lon", "lat"]], grid, params).objects())


def _fgs_correlations(objects: list[tuple], params: fgs.FgsParams) -> np.ndarray:
    if not objects:  # a partition without an object of enough valid days (the driver skips empty parts)
        return np.empty((0, 2, 0))
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
    """On a worker: the C' statistics of simulated releases of each object (docs/design.md, FGS-Pufferfish). These
    simulated releases are the auditor's, never published; they only estimate ε."""
    return [fgs.correlation_stats(fgs.noisy_correlations(days, params, object_rng, n_realizations=FGS_EMPIRICAL_RUNS,
                                                         b_c0=b_c0))
            for (_, _, days), object_rng in zip(objects, rng.spawn(len(objects)), strict=True)]


FGS_EMPIRICAL_RUNS = 50  # simulated releases per object for the empirical ε (the bench goes to 20,000)


class FgsPufferfish(Mechanism):
    """Ou et al. (2018), Fourier-coefficient Laplace noise per object (or the CTS / FPA baselines). Each object's
    days are prepared, correlated and released on the workers; only the correlations (for the noise calibration
    and the analytic ε) come to the driver. A truthful release: each released day is one object's own."""

    name = "fgs_pufferfish"
    shape = Shape.TRUTHFUL
    Params = fgs.FgsParams

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

    def check_spec(self, spec: ReleaseSpec, params: fgs.FgsParams) -> None:
        """Refuse, before the budget is charged, a window that cannot hold ``min_days`` releasable days (a short
        window would leave every object out: nothing to calibrate or release)."""
        n = fgs.days_in_window(params, spec.window_start, spec.window_end)
        if n is not None and n < params.min_days:
            raise ParameterError(
                f"FGS-Pufferfish releases whole days: an object needs {params.min_days} local days "
                f"({params.day_timezone}) with a fix within {params.max_gap_minutes:g} min of both midnights, and "
                f"the window {spec.window_start:%Y-%m-%d %H:%M} to {spec.window_end:%Y-%m-%d %H:%M} UTC can hold "
                f"{n}; widen the window (or lower min_days)", "fgs_pufferfish.window")

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, params: fgs.FgsParams,
                    rng: np.random.Generator) -> CandidateRelease:
        """Each object's days prepared, correlated and released on the workers; only the correlations
        (noise calibration, analytic ε) come to the driver."""
        grid = inputs.grid
        objects = executor.map(_fgs_prepare, prepared, grid=grid, params=params, pure=False)
        correlations = [c for c in executor.gather(executor.map(_fgs_correlations, objects, params=params,
                                                                pure=False)) if len(c)]
        if not correlations:  # data-dependent: the budget reserved at plan is spent (check_spec refuses windows)
            raise InputError(f"no object has {params.min_days} local days of at least {params.min_fixes_per_day} "
                             f"fixes without a gap over {params.max_gap_minutes:g} min: FGS-Pufferfish has nothing "
                             "to release", "fgs_pufferfish.min_days")
        correlations = np.concatenate(correlations)
        b_c0 = fgs.noise_calibration(params, correlations)
        frames = executor.gather(executor.map(_fgs_release, objects, rng.spawn(len(objects)), params=params,
                                              b_c0=b_c0, grid=grid, pure=False))
        points = pd.concat([f for f in frames if len(f)], ignore_index=True)
        points["traj_id"] = points.groupby(["object_id", "traj_id"], sort=False).ngroup() + 1
        points["cell"] = grid.cell_of(points["x"].to_numpy(), points["y"].to_numpy())
        analytic = fgs.analytic_epsilon(correlations, params, b_c0)
        stats = executor.gather(executor.map(_fgs_correlation_stats, objects, rng.spawn(len(objects)), params=params,
                                             b_c0=b_c0, pure=False))
        empirical = fgs.empirical_epsilon([s for part in stats for s in part])
        return CandidateRelease(self.shape, points[["object_id", "traj_id", "seq", "cell", "t", "lon", "lat"]],
                         {"mechanism": "fgs_pufferfish", "params": params.to_dict(),
                          "analytic_epsilon": analytic.to_dict(), "empirical_epsilon": empirical.to_dict(),
                          "objects": len(correlations),
                          "released_records": int(points["traj_id"].nunique()),
                          "released_points": len(points)})

    def guarantee(self, params: fgs.FgsParams) -> Guarantee:
        """ε-Pufferfish per object's temporal correlation (Ou et al. 2018), or a heuristic for the
        CTS and FPA baselines: :func:`mechanisms.fgs_pufferfish.guarantee`."""
        return fgs.guarantee(params)
