"""The chaos bench: ``python -m bench.chaos --faults 100 --seed 42`` (bench/CHAOS_RESULTS.md).

Random faults (:mod:`bench.chaos.faults`) against at least four concurrent releases on two datasets, run on a
private set of services (:mod:`bench.chaos.services`: PostgreSQL, Prefect and Dask of its own, in a temporary
state folder and on free ports, never the shared ones); after each fault ``trajpub recover``, ``trajpub verify``
and the invariants in SQL (:mod:`bench.chaos.invariants`). The releases and the steward deciding them:
:mod:`bench.chaos.releases`; the loop: :mod:`bench.chaos.run`; the report: :mod:`bench.chaos.report`.
tests/integration/test_chaos.py runs the same code with a handful of faults."""
