"""Toy sets: every input trajectory published at its cells' centres among ``k - 1`` copies shifted by a random
whole number of cells, in an anonymity set of k. A teaching example (docs/extending.md) of a shape other than
synthetic, not a useful mechanism: a shifted copy keeps the real record's times and moves, so an adversary who
knows a few of its points finds the real member.

Privacy. None that is proven: a heuristic k-anonymity claim (not DP, no ε); which member is real goes to the
private owner table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from trajpub.candidate import CandidateRelease, Shape
from trajpub.guarantee import Guarantee
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.params import Params, Scope

_P = Scope("toy_sets")


@dataclass(frozen=True)
class ToySetsParams(Params):
    """k, the records per set, and the most cells a copy is shifted by in each direction."""

    scope = _P

    k: int = 3
    max_shift_cells: int = 3

    def __post_init__(self) -> None:
        _P.require_int(self.k, "k", 2)
        _P.require_int(self.max_shift_cells, "max_shift_cells", 1)


class ToySets(Mechanism):
    """Each record in a set of k: itself and k - 1 shifted copies (an anonymity-set release)."""

    name = "toy_sets"
    shape = Shape.ANONYMITY_SETS
    Params = ToySetsParams

    def guarantee(self, params: ToySetsParams) -> Guarantee:
        """A heuristic: one record among k look-alikes, no bound on what the shifts reveal."""
        statement = (f"Each published trajectory is one of {params.k} in its set, the real one and copies shifted "
                     f"by up to {params.max_shift_cells} cells; not differential privacy.")
        caveat = "A copy keeps the real record's times and moves: knowing a few points finds the real one."
        return Guarantee.heuristic("k-anonymity (toy, heuristic)", "one trajectory", statement, (caveat,))

    def max_records_per_object(self, params: ToySetsParams) -> int | None:
        return None

    def release(self, trajectories: pd.DataFrame, inputs: PublicInputs, params: ToySetsParams,
                rng: np.random.Generator) -> CandidateRelease:
        grid = inputs.grid
        pts = trajectories[trajectories["cell"] >= 0].sort_values(["traj_id", "seq"], kind="stable")
        records = pd.unique(pts["traj_id"])
        set_of = pd.Series(rng.permutation(len(records)), index=records)  # random: nothing of the input order
        real = rng.integers(0, params.k, len(records))  # which member of each set is the real record
        row, col = np.divmod(pts["cell"].to_numpy(np.int64), grid.n_cols)
        frames = []
        for member in range(params.k):
            shift = rng.integers(-params.max_shift_cells, params.max_shift_cells + 1, (len(records), 2))
            shift[real == member] = 0
            per_point = pd.Series(np.arange(len(records)), index=records)[pts["traj_id"]].to_numpy()
            cells = (np.clip(row + shift[per_point, 0], 0, grid.n_rows - 1) * grid.n_cols
                     + np.clip(col + shift[per_point, 1], 0, grid.n_cols - 1))
            lon, lat = grid.cell_centre(cells)
            set_id = set_of[pts["traj_id"]].to_numpy()
            frames.append(pd.DataFrame({
                "set_id": set_id, "traj_id": set_id * params.k + member + 1,
                "seq": pts.groupby("traj_id").cumcount().to_numpy(), "cell": cells, "t": pts["t"].to_numpy(),
                "lon": lon, "lat": lat}))
        points = pd.concat(frames, ignore_index=True).sort_values(["traj_id", "seq"], kind="stable")
        owners = pd.DataFrame({"traj_id": set_of[records].to_numpy() * params.k + real + 1,
                               "object_id": pts.drop_duplicates("traj_id")["object_id"].astype(str).to_numpy(),
                               "source_traj_id": records})
        return CandidateRelease(self.shape, points.reset_index(drop=True),
                                {"mechanism": self.name, "params": asdict(params)}, owners=owners)
