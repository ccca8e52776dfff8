"""The registry of mechanisms: one line per mechanism, its name and where its class is.

A mechanism is one package (docs/extending.md) holding, besides its algorithm:

- ``adapter.py``: its :class:`~trajpub.mechanism.Mechanism` class (name, shape, ``Params``, ``guarantee``, the run);
- ``example.yaml``: its example release spec (``trajpub release run --mechanism NAME`` starts from it);
- ``contract.py``: the parameters the mechanism contract runs it with (``tests/unit/test_mechanism_contract.py``);
- ``dp_audit.py`` (optional): ``scenarios()``, the neighbouring datasets :mod:`audits.dp_scenarios` audits its
  ε claim on.

Everything else (the release flow, the tests, the audits) finds these through :data:`REGISTRY`. A class is imported
only when a release names it, so parsing a spec imports one mechanism.
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

from trajpub.errors import ParameterError
from trajpub.mechanism import Mechanism

__all__ = ["REGISTRY", "example_spec_file", "mechanism", "package_module", "registered"]

#: name -> "package.module:Class" of every mechanism a release can name.
REGISTRY: dict[str, str] = {
    "adatrace": "mechanisms.adatrace.adapter:AdaTrace",
    "citytrace": "mechanisms.citytrace.adapter:CityTrace",
    "dpt": "mechanisms.dpt.adapter:Dpt",
    "dummy": "mechanisms.dummy.adapter:Dummy",
    "fastpub": "mechanisms.fastpub.adapter:FastPub",
    "fgs_pufferfish": "mechanisms.fgs_pufferfish.adapter:FgsPufferfish",
    "glove": "mechanisms.glove.adapter:Glove",
    "klt": "mechanisms.klt.adapter:Klt",
    "kpsi_anonymity": "mechanisms.kpsi_anonymity.adapter:KPsi",
    "mixzone": "mechanisms.mixzone.adapter:Mixzone",
    "objtrace": "mechanisms.objtrace.adapter:ObjTrace",
    "prefix_tree": "mechanisms.prefix_tree.adapter:PrefixTree",
    "w4m": "mechanisms.w4m.adapter:W4M",
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


def _package(name: str) -> str:
    """The package of the mechanism ``name``: the module of its class, less the module's own name."""
    module = registered(name).split(":")[0]
    if "." not in module:
        raise ParameterError(f"{module} is not in a package: a mechanism is one package (docs/extending.md)",
                             "mechanism")
    return module.rpartition(".")[0]


def example_spec_file(name: str) -> Path:
    """The example release spec of the mechanism ``name``: ``example.yaml`` of its package."""
    spec = importlib.util.find_spec(_package(name))
    path = Path(next(iter(spec.submodule_search_locations))) / "example.yaml"
    if not path.is_file():
        raise ParameterError(f"mechanism '{name}' has no example spec: {path} does not exist", "mechanism")
    return path


def package_module(name: str, module: str) -> ModuleType | None:
    """The module ``module`` of the mechanism ``name``'s package ("contract", "dp_audit"), None when it has none."""
    full = f"{_package(name)}.{module}"
    return importlib.import_module(full) if importlib.util.find_spec(full) is not None else None
