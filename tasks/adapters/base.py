"""What every mechanism adapter provides."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from distributed import Client, Future

from trajpub.candidate import CandidateRelease, Shape
from trajpub.grid import GridSpec
from trajpub.guarantee import Guarantee


class MechanismAdapter(Protocol):
    """A mechanism in the release flow. Optionally also ``check_spec(spec, params) -> None``: refuse (with a
    ParameterError) a release the mechanism cannot run with the spec's public inputs (window, grid), before
    the plan charges its budget; :func:`tasks.protect.parse_params` calls it."""

    #: the shape of what it releases
    shape: Shape

    def parse_params(self, params: dict) -> Any: ...
    def guarantee(self, params: Any) -> Guarantee: ...
    def max_records_per_object(self, params: Any) -> int | None: ...
    def run(self, client: Client, prepared: list[Future], grid: GridSpec, params: Any,
            rng: np.random.Generator) -> CandidateRelease: ...


