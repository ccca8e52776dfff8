"""Start-cell linkage: does the release start a trajectory in the cell where a raw trajectory starts? A teaching
example (docs/extending.md) of the attack lifecycle (:class:`audits.attack.Attack`).

Each raw trajectory is a target; the adversary succeeds on it when some released trajectory starts in its start
cell. The baseline is the same question for a cell drawn uniformly from the cells the raw data visits: the share
of those cells where a released trajectory starts. A release whose starts ignore the data succeeds at about the
baseline rate (risk near 0); the raw data released unchanged succeeds on every target.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from audits.attack import Attack
from audits.result import AttackResult

NAME = "toy_start_cell"


@dataclass(frozen=True)
class StartCellParams:
    """No parameter: the attack reads the release's own cells."""


def _starts(frame: pd.DataFrame) -> pd.Series:
    return frame.sort_values(["traj_id", "seq"], kind="stable").groupby("traj_id")["cell"].first()


class StartCell(Attack[StartCellParams]):
    name = NAME
    raw_columns = ("traj_id", "seq", "cell")
    release_columns = ("traj_id", "seq", "cell")

    def _attack(self, raw: pd.DataFrame, release: pd.DataFrame) -> AttackResult:
        released = set(_starts(release).tolist())
        targets = _starts(raw)
        visited = set(raw["cell"].tolist())
        hits = targets.isin(released)
        return AttackResult(attack=NAME, n_targets=len(targets), n_successes=float(hits.sum()),
                            baseline=len(visited & released) / len(visited),
                            evidence={"released_start_cells": len(released), "visited_cells": len(visited)})
