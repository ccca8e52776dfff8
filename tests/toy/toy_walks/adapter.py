"""Toy walks: a synthetic release of random walks on the release grid, as many as a noisy count of the input's
trajectory records. A teaching example (docs/extending.md), not a useful mechanism: the walks keep nothing of
the data but its size.

Privacy. The only statistic read is the number of trajectory records n; adding or removing one record changes it
by 1, so n + Laplace(1/ε) is ε-DP per record (Dwork, McSherry, Nissim, Smith 2006, Thm 1), and with at most
``max_records_per_object`` records per object, kε per object (group privacy, Dwork and Roth 2014, Thm 2.2). The
walks are drawn from the public grid and the rng only (post-processing).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from trajpub import noise
from trajpub.candidate import CandidateRelease, Shape
from trajpub.guarantee import Guarantee
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.params import Params, Scope

_P = Scope("toy_walks")


@dataclass(frozen=True)
class ToyWalksParams(Params):
    """ε of the noisy count, the points per walk, and the records the preparation keeps per object."""

    scope = _P

    epsilon: float = 1.0
    length: int = 5
    max_records_per_object: int | None = 5

    def __post_init__(self) -> None:
        _P.require_real(self.epsilon, "epsilon", 0.0)
        _P.require_int(self.length, "length", 1)
        _P.require_optional_int(self.max_records_per_object, "max_records_per_object", 1)


def noisy_count(n: int, epsilon: float, rng: np.random.Generator) -> float:
    """The number of records with Laplace(1/ε) noise: the toy's only DP step (the module docstring)."""
    return float(n + noise.laplace(1.0 / epsilon, (), rng))


class ToyWalks(Mechanism):
    """Random walks on the grid, as many as a noisy count of the records (a synthetic release)."""

    name = "toy_walks"
    shape = Shape.SYNTHETIC
    Params = ToyWalksParams

    def guarantee(self, params: ToyWalksParams) -> Guarantee:
        """ε-DP per trajectory record (the module docstring's proof), mapped to objects by group privacy."""
        statement = (f"epsilon-differential privacy with epsilon = {params.epsilon:g} per trajectory record: the "
                     "release reads only the number of records, with Laplace noise; the walks are random.")
        return Guarantee.per_record(params.epsilon, statement, (noise.CAVEAT,), params.max_records_per_object)

    def release(self, trajectories: pd.DataFrame, inputs: PublicInputs, params: ToyWalksParams,
                rng: np.random.Generator) -> CandidateRelease:
        grid = inputs.grid
        noisy = noisy_count(trajectories["traj_id"].nunique(), params.epsilon, rng)
        n = max(0, round(noisy))
        col = rng.integers(0, grid.n_cols, n)[:, None] + np.cumsum(rng.integers(-1, 2, (n, params.length)), 1)
        row = rng.integers(0, grid.n_rows, n)[:, None] + np.cumsum(rng.integers(-1, 2, (n, params.length)), 1)
        cells = (np.clip(row, 0, grid.n_rows - 1) * grid.n_cols + np.clip(col, 0, grid.n_cols - 1)).ravel()
        lon, lat = grid.cell_centre(cells)
        points = pd.DataFrame({"traj_id": np.repeat(np.arange(1, n + 1), params.length),
                               "seq": np.tile(np.arange(params.length), n), "cell": cells,
                               "t": pd.Series(pd.NaT, index=range(len(cells)), dtype="datetime64[ns, UTC]"),
                               "lon": lon, "lat": lat})
        return CandidateRelease(self.shape, points, {"mechanism": self.name, "params": asdict(params),
                                                     "released_records": n, "released_points": len(points)})
