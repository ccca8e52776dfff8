"""The ``trajpub`` command line, one module per area: :mod:`~flows.cli.services`, :mod:`~flows.cli.dataset`,
:mod:`~flows.cli.release`, :mod:`~flows.cli.steward`, :mod:`~flows.cli.budget`, :mod:`~flows.cli.roads`,
:mod:`~flows.cli.lineage`, :mod:`~flows.cli.console`. Each registers its commands on :data:`flows.cli.base.main`."""

from flows.cli import budget, console, dataset, lineage, release, roads, services, steward  # noqa: F401  (registration)
from flows.cli.base import main

__all__ = ["main"]
