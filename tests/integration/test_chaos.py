"""The chaos bench's short version (bench/chaos, bench/CHAOS_RESULTS.md for the full run): two random
faults (kill -9 of flows, commands, Dask workers and scheduler, the Prefect server; PostgreSQL crash-restarts; a
lost worker) against four concurrent releases on two datasets, on services of the bench's own (a private
PostgreSQL, Prefect server and Dask cluster: the shared ones are never stopped, so the test runs beside the
others), with ``trajpub recover``, ``trajpub verify`` and the invariants checked after each fault."""

from __future__ import annotations

import pytest

from bench.chaos.run import run

pytestmark = pytest.mark.integration


def test_random_faults_leave_every_invariant_holding_and_no_release_hung():
    result = run(n_faults=2, seed=20261208, n_taxis=20, gap_s=(1, 5), hung_s=600, drain_s=600)
    assert len(result.faults) == 2
    assert not result.broken, "\n".join(f"after fault {n}: {v.invariant}: {v.where}: {v.what}"
                                        for n, v in result.broken)
    assert not result.hung, f"hung releases: {sorted(result.hung)}"
    assert sum(result.outcomes.values()) >= 4, result.outcomes  # the faults hit releases, not an idle system
