"""The DP audit of every mechanism's privacy claim: the neighbouring pairs each mechanism's package states
(``dp_audit.py``, :class:`trajpub.dp_scenario.Scenario`), found through :data:`mechanisms.registry.REGISTRY`, and
audited with :mod:`audits.dp_audit`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audits.dp_audit import AuditOutcome, audit_pair
from mechanisms.registry import REGISTRY, package_module
from trajpub.dp_scenario import Scenario
from trajpub.errors import ParameterError


def scenarios_of(mechanism: str) -> list[Scenario]:
    """The scenarios the package of the registered ``mechanism`` states (``dp_audit.py``; none without one)."""
    found = package_module(mechanism, "dp_audit")
    return found.scenarios() if found is not None else []


def all_scenarios() -> list[Scenario]:
    """Every registered mechanism's scenarios."""
    return [s for name in sorted(REGISTRY) for s in scenarios_of(name)]


@dataclass(frozen=True)
class AuditedClaim:
    """One scenario run at ``run_epsilon`` and audited against the claim the mechanism makes at ``epsilon``
    (in the scenario's unit, and for the whole object)."""

    scenario: Scenario
    epsilon: float
    run_epsilon: float
    claim: float
    object_claim: float
    outcome: AuditOutcome


def audit_mechanism(mechanism: str, epsilon: float, *, run_epsilon: float | None = None, tight_only: bool = False,
                    selection_runs: int = 2000, runs: int = 10_000, seed: int = 0) -> list[AuditedClaim]:
    """Every scenario of ``mechanism`` audited against its claim at ``epsilon`` (the small datasets of this
    module, not a release's data). ``run_epsilon`` (default ``epsilon``) is the ε the mechanism really runs
    at: 2·``epsilon`` is the negative control, meaningful on the ``tight`` scenarios. For the non-DP claims
    (``fgs_pufferfish``, ``kpsi_anonymity``) this is the empirical lower bound a review can print next to the
    claimed ε."""
    chosen = [s for s in scenarios_of(mechanism) if s.tight or not tight_only]
    if not chosen and not tight_only:
        raise ParameterError(f"no audit scenario for mechanism {mechanism!r}", "dp_scenarios.audit_mechanism")
    run_eps = epsilon if run_epsilon is None else run_epsilon
    rng = np.random.default_rng(seed)
    out = []
    for s in chosen:
        outcome = audit_pair(lambda which, n, r, s=s: s.run(which, n, run_eps, r), selection_runs, runs, rng)
        out.append(AuditedClaim(s, epsilon, run_eps, epsilon, epsilon * s.object_factor, outcome))
    return out
