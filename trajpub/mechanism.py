"""The one interface of a privacy mechanism, and its local runner.

A mechanism is pure: it reads trajectories (the prepared frame of :mod:`trajpub.frame`: ``object_id, traj_id,
seq, t, lon, lat, x, y, cell``; every object's trajectories together) and its public inputs, never a database
or a cluster, and returns a :class:`~trajpub.candidate.CandidateRelease` of its declared shape. It declares, as
plain class attributes and methods (so that go-to-definition leads from a spec's ε to the guarantee's text):

- ``name`` and ``shape``;
- ``Params``: a frozen parameters class with ``from_dict`` (refusing unknown or out-of-range values with a
  :class:`~trajpub.errors.ParameterError`) and ``to_dict``;
- ``guarantee(self, params)``: what a release protects (:class:`~trajpub.guarantee.Guarantee`), from the
  parameters and the public inputs' description only;
- ``release(trajectories, inputs, params, rng)``: the release on one in-memory frame; or, for a mechanism that
  distributes its work, ``partitioned(executor, prepared, inputs, params, rng)`` on the partitions (each holding
  whole objects) through an :class:`~trajpub.executor.Executor`, whose in-process form then gives ``release``.

Optional: ``public_inputs(params)`` names the road network or POI set it reads (resolved before it runs, by
:mod:`tasks.public_inputs`), ``check_spec(spec, params)`` refuses a release the spec's public inputs cannot hold,
and ``max_records_per_object(params)`` caps the records the preparation keeps per object.

A mechanism is one package and one line of :data:`mechanisms.registry.REGISTRY` (docs/extending.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import ParameterError, TrajpubError
from trajpub.executor import Executor, LocalExecutor
from trajpub.grid import GridSpec
from trajpub.guarantee import Guarantee
from trajpub.window import ReleaseWindow


@dataclass(frozen=True)
class PublicInputs:
    """What a release may read besides the raw data, all public: the release grid, and the road network and
    POIs its spec names, read before the mechanism runs (None when it names none; :mod:`tasks.public_inputs`).
    ``road_network_source`` says where the network comes from in the guarantees' words ("public", "synthetic",
    "derived_from_private_data"; "none" without one); ``pois_source`` describes the POIs. ``window``: the
    release's window and its dataset's time zone, where a synthesizer places its timestamps (None when the
    spec leaves an end open)."""

    grid: GridSpec
    road_network: Any = None
    road_network_source: str = "none"
    pois: pd.DataFrame | None = None
    pois_source: str | None = None
    window: ReleaseWindow | None = None


class Mechanism:
    """Base class. A subclass declares itself with plain class attributes and methods::

        class Toy(Mechanism):
            name = "toy"
            shape = Shape.SYNTHETIC
            Params = ToyParams

            def guarantee(self, params: ToyParams) -> Guarantee: ...

    and implements ``release`` or ``partitioned``."""

    name: ClassVar[str]
    shape: ClassVar[Shape]
    Params: ClassVar[type]

    def guarantee(self, params: Any) -> Guarantee:
        """What a release with ``params`` protects: the model, the unit, the statement, the privacy map."""
        raise NotImplementedError(f"{type(self).__name__} declares no guarantee")

    def parse_params(self, params: dict) -> Any:
        """The parameters, validated; pure (no database, no file beyond the spec)."""
        return self.Params.from_dict(dict(params))

    def public_inputs(self, params: Any) -> dict[str, Any]:
        """The named public inputs the release reads: ``{"road_network": name}``, ``{"pois": source}``."""
        return {}

    def resolved(self, params: Any, inputs: PublicInputs) -> Any:
        """The parameters completed with what the public-inputs step found (the guarantee may name it)."""
        return params

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

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, params: Any,
                    rng: np.random.Generator) -> CandidateRelease:
        """The release of the prepared partitions (``executor`` futures); by default the partitions are joined on
        one worker and released there (the raw data never reaches the driver)."""
        return executor.submit(_release_joined, self, inputs, params, rng, *prepared, pure=False).result()


class WindowedSynthesizer(Mechanism):
    """A synthesizer that places its timestamps in the release's window and bounds each object's contribution
    itself (ObjTrace, CityTrace): a spec must set both ends of its window, and the preparation drops no record."""

    def check_spec(self, spec, params: Any) -> None:
        """Both ends of the window must be set (a relative window, once resolved, sets them)."""
        if spec.window_start is None or spec.window_end is None:
            raise ParameterError(f"{self.name} places its timestamps in the release's window: the spec needs "
                                 "window_start and window_end, or a relative window {last: 7d, align: local_week}",
                                 "window")

    def max_records_per_object(self, params: Any) -> int | None:
        """None: the pipeline need not drop records; the mechanism bounds each object's contribution itself."""
        return None

    def window(self, inputs: PublicInputs) -> ReleaseWindow:
        """The release's window, where the timestamps go."""
        if inputs.window is None:
            raise ParameterError(f"{self.name} places its timestamps in the release's window, and none was given",
                                 "window")
        return inputs.window


@dataclass(frozen=True)
class OnRoadNetwork:
    """A mechanism's parameters and the road network its spec names (``road_network``; None: none).
    ``network_source`` is where the network comes from, in the guarantees' words: "none" without one, else
    filled in by the public-inputs step (None until then)."""

    params: Any
    road_network: str | None
    network_source: str | None = None


class RoadNetworkMechanism(Mechanism):
    """A mechanism whose spec may name a public road network (``road_network``, a network of ``roads.networks``):
    its parameters are :class:`OnRoadNetwork`; it states its guarantee in ``network_guarantee(params,
    network_source)``, and sets ``network_required = True`` to refuse a spec without a network."""

    network_required: ClassVar[bool] = False

    def network_guarantee(self, params: Any, network_source: str) -> Guarantee:
        """The guarantee of ``params`` on a network from ``network_source`` ("none" without one)."""
        raise NotImplementedError(f"{type(self).__name__} declares no network guarantee")

    def parse_params(self, params: dict) -> OnRoadNetwork:
        name = params.get("road_network")
        parsed = self.Params.from_dict(dict(params))
        if name is not None and (not isinstance(name, str) or not name) or name is None and self.network_required:
            needs = (f"{self.name} releases need a road network: road_network must name a network in roads.networks"
                     if self.network_required else "road_network must be a network name or null")
            raise ParameterError(f"{needs}, got {name!r}", f"{self.name}.road_network")
        if name is None:
            setup = OnRoadNetwork(parsed, None, "none")
            self.guarantee(setup)  # refuses, before any data is read, what needs a network
            return setup
        return OnRoadNetwork(parsed, name)

    def public_inputs(self, setup: OnRoadNetwork) -> dict[str, Any]:
        return {"road_network": setup.road_network} if setup.road_network else {}

    def resolved(self, setup: OnRoadNetwork, inputs: PublicInputs) -> OnRoadNetwork:
        return replace(setup, network_source=inputs.road_network_source)

    def guarantee(self, setup: OnRoadNetwork) -> Guarantee:
        if setup.network_source is None:
            raise TrajpubError(f"road network {setup.road_network} is not resolved yet: its source decides the "
                               "guarantee (tasks.public_inputs.resolve)", f"{self.name}.road_network")
        return self.network_guarantee(setup.params, setup.network_source)


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
