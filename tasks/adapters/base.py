"""What every mechanism adapter provides, and the candidate release it returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
from distributed import Client, Future

from trajpub.grid import GridSpec
from trajpub.guarantee import Guarantee

#: The extra columns of a generalised sample (GLOVE, KLT): its lon/lat rectangle and the end of its time span
#: (``t`` starts it; ``lon``, ``lat`` are the rectangle's centre).
GENERALISED_COLUMNS = ("lon_min", "lat_min", "lon_max", "lat_max", "t_end")


@dataclass(frozen=True)
class Protected:
    """A candidate release and the mechanism's run metadata (JSON-safe, no seed).

    ``product`` "trajectories": ``points`` has one row per released point (``traj_id, seq, cell, t, lon, lat``;
    anonymity sets and groups add ``set_id``; generalised samples add :data:`GENERALISED_COLUMNS`; truthful
    releases also carry the owner's ``object_id``, which the audit uses and publication drops). ``owners``
    (optional; ``traj_id, object_id, source_traj_id``, one row per released trajectory) is stored privately: it
    says which released trajectories are an object's own when the points do not (anonymity sets), and which raw
    trajectory a renumbered truthful record comes from (the audit's point error pairs them through it).
    ``product`` "fragments": ``fragments`` has one row per released fragment (``fragment_id, cells,
    estimated_count, round, lon, lat``, the last two the cell centres) and ``points`` is empty.
    """

    points: pd.DataFrame
    metadata: dict
    product: str = "trajectories"
    fragments: pd.DataFrame | None = None
    owners: pd.DataFrame | None = None

    @property
    def released_nothing(self) -> bool:
        """No point (trajectories) or no fragment (fragments): nothing to audit or publish (FASTPub admitting no
        fragment at its k, say)."""
        released = self.fragments if self.product == "fragments" else self.points
        return released is None or len(released) == 0


class MechanismAdapter(Protocol):
    """A mechanism in the release flow. Optionally also ``check_spec(spec, params) -> None``: refuse (with a
    ParameterError) a release the mechanism cannot run with the spec's public inputs (window, grid), before
    the plan charges its budget; :func:`tasks.protect.parse_params` calls it."""

    #: "synthetic" (no released record belongs to a person) or "truthful" (each released record is an
    #: object's own, perturbed): it decides which form of the linkage attack the audit runs.
    release_kind: str

    def parse_params(self, params: dict) -> Any: ...
    def guarantee(self, params: Any) -> Guarantee: ...
    def max_records_per_object(self, params: Any) -> int | None: ...
    def run(self, client: Client, prepared: list[Future], grid: GridSpec, params: Any,
            rng: np.random.Generator) -> Protected: ...


