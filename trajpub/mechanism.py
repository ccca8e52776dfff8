"""The one interface of a privacy mechanism, and its local runner.

A mechanism is pure: it reads trajectories (the prepared frame of :mod:`trajpub.frame`: ``object_id, traj_id,
seq, t, lon, lat, x, y, cell``; every object's trajectories together) and its public inputs, never a database
or a cluster, and returns a :class:`~trajpub.candidate.CandidateRelease` of its declared shape. It declares:

- ``name`` and ``shape``;
- ``params_type``: a frozen parameters class with ``from_dict`` (refusing unknown or out-of-range values with a
  :class:`~trajpub.errors.ParameterError`) and ``to_dict``;
- ``guarantee(params)``: what a release protects (:class:`~trajpub.guarantee.Guarantee`), from the parameters
  and the public inputs' description only;
- ``release(trajectories, inputs, params, rng)``: the release on one in-memory frame; or, for a mechanism that
  distributes its work, ``partitioned(executor, parts, inputs, params, rng)`` on the partitions (each holding
  whole objects) through an executor (:mod:`trajpub.executor`), whose in-process form then gives ``release``.

Optional: ``public_inputs(params)`` names the road network or POI set it reads (resolved before it runs, by
:mod:`tasks.public_inputs`), ``check_spec(spec, params)`` refuses a release the spec's public inputs cannot hold,
and ``max_records_per_object(params)`` caps the records the preparation keeps per object.

A mechanism is registered by one line in :data:`tasks.protect.REGISTRY` (docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import TrajpubError
from trajpub.executor import LocalExecutor
from trajpub.grid import GridSpec
from trajpub.guarantee import Guarantee


@dataclass(frozen=True)
class PublicInputs:
    """What a release may read besides the raw data, all public: the release grid, and the road network and
    POIs its spec names, read before the mechanism runs (None when it names none)."""

    grid: GridSpec
    road_network: Any = None
    pois: pd.DataFrame | None = None


class Mechanism:
    """Base class: subclasses set the class attributes and implement ``release`` or ``partitioned``."""

    name: ClassVar[str]
    shape: ClassVar[Shape]
    params_type: ClassVar[type]
    guarantee: ClassVar[Callable[[Any], Guarantee]]

    def parse_params(self, params: dict) -> Any:
        """The parameters, validated; pure (no database, no file beyond the spec)."""
        return self.params_type.from_dict(dict(params))

    def public_inputs(self, params: Any) -> dict[str, Any]:
        """The named public inputs the release reads: ``{"road_network": name}``, ``{"pois": source}``."""
        return {}

    def check_spec(self, spec, params: Any) -> None:
        """Refuse a release the spec's public inputs (window, grid) cannot hold, before any budget is charged."""

    def max_records_per_object(self, params: Any) -> int | None:
        """The records per object the preparation keeps (None: all)."""
        return getattr(params, "max_records_per_object", None)

    def release(self, trajectories: pd.DataFrame, inputs: PublicInputs, params: Any,
                rng: np.random.Generator) -> CandidateRelease:
        """The release of one in-memory frame; a partitioned mechanism runs its partitioned form in process."""
        if type(self).partitioned is Mechanism.partitioned:
            raise TypeError(f"{type(self).__name__} implements neither release nor partitioned")
        return self.partitioned(LocalExecutor(), [trajectories], inputs, params, rng)

    def partitioned(self, executor, parts: list, inputs: PublicInputs, params: Any,
                    rng: np.random.Generator) -> CandidateRelease:
        """The release of partitions (``executor`` futures); by default the partitions are joined on one worker
        and released there (the raw data never reaches the driver)."""
        return executor.submit(_release_joined, self, inputs, params, rng, *parts, pure=False).result()


def _release_joined(mechanism: Mechanism, inputs: PublicInputs, params: Any, rng: np.random.Generator,
                    *parts: pd.DataFrame) -> CandidateRelease:
    return mechanism.release(pd.concat(parts, ignore_index=True), inputs, params, rng)


def checked(mechanism: Mechanism, candidate: CandidateRelease) -> CandidateRelease:
    """``candidate`` held to the mechanism's declared shape and that shape's columns."""
    if candidate.shape is not mechanism.shape:
        raise TrajpubError(f"{mechanism.name} declares {mechanism.shape.value} and released "
                           f"{candidate.shape.value}", "candidate release")
    return candidate.check()


def run_local(mechanism: Mechanism, trajectories: pd.DataFrame, inputs: PublicInputs, params: Any,
              rng: np.random.Generator) -> CandidateRelease:
    """The local runner: the mechanism on one in-memory frame, its output checked against its shape."""
    return checked(mechanism, mechanism.release(trajectories, inputs, params, rng))
