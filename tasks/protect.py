"""Protect: the registry of mechanisms, spec parsing, and the Dask runner.

A mechanism (:class:`trajpub.mechanism.Mechanism`) is registered by one line of :data:`REGISTRY`, its name and
where its class is; the class is imported only when a release names it, so parsing a spec imports one mechanism.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

import numpy as np

from trajpub.candidate import CandidateRelease
from trajpub.errors import ParameterError
from trajpub.mechanism import Mechanism, PublicInputs, checked
from trajpub.spec import ReleaseSpec

__all__ = ["REGISTRY", "mechanism", "parse_params", "parse_spec", "registered", "run"]

#: name -> "module:Class" of every mechanism a release can name.
REGISTRY: dict[str, str] = {
    "adatrace": "tasks.adapters.adatrace:AdaTrace",
    "citytrace": "tasks.adapters.citytrace:CityTrace",
    "dpt": "tasks.adapters.dpt:Dpt",
    "dummy": "tasks.adapters.dummy:Dummy",
    "fastpub": "tasks.adapters.fastpub:FastPub",
    "fgs_pufferfish": "tasks.adapters.fgs_pufferfish:FgsPufferfish",
    "glove": "tasks.adapters.glove:Glove",
    "klt": "tasks.adapters.klt:Klt",
    "kpsi_anonymity": "tasks.adapters.kpsi_anonymity:KPsi",
    "mixzone": "tasks.adapters.mixzone:Mixzone",
    "objtrace": "tasks.adapters.objtrace:ObjTrace",
    "prefix_tree": "tasks.adapters.prefix_tree:PrefixTree",
    "w4m": "tasks.adapters.w4m:W4M",
}


def registered(name: str) -> str:
    """Where the mechanism ``name`` is ("module:Class"), without importing it; refuses an unknown name."""
    if name not in REGISTRY:
        raise ParameterError(f"unknown mechanism '{name}'; available: {', '.join(sorted(REGISTRY))}", "mechanism")
    return REGISTRY[name]


@cache
def mechanism(name: str) -> Mechanism:
    """The registered mechanism ``name`` (its module imported now)."""
    module, cls = registered(name).split(":")
    found = getattr(importlib.import_module(module), cls)()
    if found.name != name:
        raise ParameterError(f"{REGISTRY[name]} is registered as {name} and names itself {found.name}", "mechanism")
    return found


def parse_spec(spec: dict) -> tuple[ReleaseSpec, Any]:
    """The release spec and the mechanism's parameters, both validated: unknown names are errors."""
    parsed = ReleaseSpec.from_dict(spec)
    return parsed, parse_params(parsed)


def parse_params(spec: ReleaseSpec) -> Any:
    """The parameters of ``spec``'s mechanism, validated before anything is planned or charged: unknown, missing
    or out-of-range parameters, and a release the mechanism cannot run with the spec's public inputs (its
    ``check_spec``, e.g. a window too short for FGS-Pufferfish's whole days)."""
    mech = mechanism(spec.mechanism)
    params = mech.parse_params(spec.params)
    mech.check_spec(spec, params)
    return params


def run(mech: Mechanism, client, prepared: list, inputs: PublicInputs, params: Any,
        rng: np.random.Generator) -> CandidateRelease:
    """The Dask runner: the mechanism on the prepared partitions (futures on ``client``'s workers), its output
    checked against its shape. A mechanism that distributes its work does so; any other is released on one
    worker (:meth:`trajpub.mechanism.Mechanism.partitioned`)."""
    return checked(mech, mech.partitioned(client, prepared, inputs, params, rng))
