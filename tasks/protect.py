"""Protect: run the release's privacy mechanism on the Dask partitions.

The registry maps mechanism names to adapters (``tasks/adapters/``). An adapter parses and validates the
mechanism's parameters (before any data is read), states its guarantee, and runs it: raw-data work on the
workers, only noisy aggregates on the driver.
"""

from __future__ import annotations

from typing import Any

from tasks.adapters.adatrace import AdaTraceAdapter
from tasks.adapters.base import MechanismAdapter
from tasks.adapters.dpt import DptAdapter
from tasks.adapters.dummy import DummyAdapter
from tasks.adapters.fastpub import FastPubAdapter
from tasks.adapters.fgs_pufferfish import FgsPufferfishAdapter
from tasks.adapters.glove import GloveAdapter
from tasks.adapters.klt import KltAdapter
from tasks.adapters.kpsi_anonymity import KPsiAdapter
from tasks.adapters.mixzone import MixzoneAdapter
from tasks.adapters.objtrace import ObjTraceAdapter
from tasks.adapters.prefix_tree import PrefixTreeAdapter
from tasks.adapters.w4m import W4MAdapter
from trajpub.errors import ParameterError
from trajpub.spec import ReleaseSpec

__all__ = ["MECHANISMS", "MechanismAdapter", "adapter", "parse_params", "parse_spec"]

MECHANISMS: dict[str, MechanismAdapter] = {"prefix_tree": PrefixTreeAdapter(),
                                           "fgs_pufferfish": FgsPufferfishAdapter(),
                                           "fastpub": FastPubAdapter(),
                                           "kpsi_anonymity": KPsiAdapter(),
                                           "glove": GloveAdapter(),
                                           "klt": KltAdapter(),
                                           "mixzone": MixzoneAdapter(),
                                           "dummy": DummyAdapter(),
                                           "dpt": DptAdapter(),
                                           "adatrace": AdaTraceAdapter(),
                                           "objtrace": ObjTraceAdapter(),
                                           "w4m": W4MAdapter()}


def adapter(name: str) -> MechanismAdapter:
    if name not in MECHANISMS:
        raise ParameterError(f"unknown mechanism '{name}'; available: {', '.join(sorted(MECHANISMS))}", "mechanism")
    return MECHANISMS[name]


def parse_spec(spec: dict) -> tuple[ReleaseSpec, Any]:
    """The release spec and the mechanism's parameters, both validated: unknown names are errors."""
    parsed = ReleaseSpec.from_dict(spec)
    return parsed, parse_params(parsed)


def parse_params(spec: ReleaseSpec) -> Any:
    """The parameters of ``spec``'s mechanism, validated before anything is planned or charged: unknown, missing
    or out-of-range parameters, and a release the mechanism cannot run with the spec's public inputs (the
    adapter's optional ``check_spec``, e.g. a window too short for FGS-Pufferfish's whole days)."""
    mech = adapter(spec.mechanism)
    params = mech.parse_params(spec.params)
    check_spec = getattr(mech, "check_spec", None)
    if check_spec is not None:
        check_spec(spec, params)
    return params
