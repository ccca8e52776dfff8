"""FASTPub on in-memory data: one call that builds the client population and runs the server.

For notebooks and tests. The server and the clients get *independent* generators spawned from ``rng``, as in
the real protocol, where the server never knows the clients' coins. A distributed pipeline builds its own
population (see :mod:`mechanisms.fastpub.population`) and calls :func:`~mechanisms.fastpub.server.run_server`.
"""

from __future__ import annotations

import numpy as np

from mechanisms.fastpub.params import FastPubParams
from mechanisms.fastpub.population import InMemoryPopulation
from mechanisms.fastpub.result import FastPubResult
from mechanisms.fastpub.server import run_server


def fastpub(offsets: np.ndarray, cells: np.ndarray, n_locations: int, params: FastPubParams,
            rng: np.random.Generator, multiplicity: np.ndarray | None = None, *, per_client: bool = False,
            noise_free: bool = False, record_participants: bool = False) -> FastPubResult:
    """Run ``params.method`` on CSR trajectories (one client each, or ``multiplicity`` copies each)."""
    server_rng, client_rng = rng.spawn(2)
    population = InMemoryPopulation(offsets, cells, n_locations, client_rng, multiplicity,
                                    per_client=per_client)
    return run_server(params, population, n_locations, server_rng, noise_free=noise_free,
                      record_participants=record_participants)
