"""Protect: spec parsing and the Dask runner. The mechanisms themselves are found through
:data:`mechanisms.registry.REGISTRY`."""

from __future__ import annotations

from typing import Any

import numpy as np

from mechanisms.registry import mechanism
from trajpub.candidate import CandidateRelease
from trajpub.executor import Executor
from trajpub.mechanism import Mechanism, PublicInputs, checked
from trajpub.spec import ReleaseSpec

__all__ = ["parse_params", "parse_spec", "run"]


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


def run(mech: Mechanism, executor: Executor, prepared: list, inputs: PublicInputs, params: Any,
        rng: np.random.Generator) -> CandidateRelease:
    """The Dask runner: the mechanism on the prepared partitions (futures on ``executor``'s workers), its output
    checked against its shape. A mechanism that distributes its work does so; any other is released on one
    worker (:meth:`trajpub.mechanism.Mechanism.partitioned`)."""
    return checked(mech, mech.partitioned(executor, prepared, inputs, params, rng))
