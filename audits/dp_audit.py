"""Empirical lower bounds on ε from a mechanism's outputs on two neighbouring datasets (black-box DP auditing).

Following StatDP (Ding, Wang, Wang, Zhang, Kifer, "Detecting violations of differential privacy", CCS 2018,
§4: an event chosen on one batch of runs, tested on fresh runs) and DP-Sniper (Bichsel, Steffen, Bogunovic,
Vechev, S&P 2021, §IV: a threshold on a scalar statistic as the event, Clopper–Pearson bounds, Eq. 6):

1. run the mechanism on D₀ and D₁ (``sample(which, n, rng)`` returns n scalar statistics of independent runs);
2. on a first batch, pick the event E = {s ≥ t} or {s ≤ t} and the order (D₀ over D₁ or D₁ over D₀) whose
   bound (3) is largest;
3. on fresh runs, ε ≥ ln(p̲_a / p̄_b), with p̲_a the lower end of the 95 % Clopper–Pearson interval of
   P[M(D_a) ∈ E] and p̄_b the upper end for D_b (each end holds with probability ≥ 97.5 %, so the bound holds
   with probability ≥ 95 %: an ε-DP mechanism satisfies P[M(D_a) ∈ E] ≤ e^ε·P[M(D_b) ∈ E]).

The bound is a lower bound on the mechanism's true ε for this pair: a value above a claimed ε refutes the
claim (at 95 %); a value below it says nothing more than that this pair and event did not find a violation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

from trajpub.errors import ParameterError

Sampler = Callable[[int, int, np.random.Generator], np.ndarray]


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper & Pearson 1934) two-sided interval of a binomial proportion k/n."""
    if not (0 <= k <= n and n >= 1):
        raise ParameterError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}", "dp_audit.clopper_pearson")
    a = (1.0 - confidence) / 2.0
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1.0 - a, k + 1, n - k))
    return lo, hi


def epsilon_lower_bound(k_a: int, k_b: int, n_a: int, n_b: int, confidence: float = 0.95) -> float:
    """ln(p̲_a / p̄_b) with the Clopper–Pearson ends above, or 0 when the event gives no evidence."""
    lo_a = clopper_pearson(k_a, n_a, confidence)[0]
    hi_b = clopper_pearson(k_b, n_b, confidence)[1]
    return max(0.0, math.log(lo_a / hi_b)) if lo_a > 0 else 0.0


@dataclass(frozen=True)
class Event:
    """{s ≥ threshold} (``above``) or {s ≤ threshold}; ``first`` is the dataset in the numerator (0 or 1)."""

    threshold: float
    above: bool
    first: int

    def hits(self, s: np.ndarray) -> int:
        return int(np.count_nonzero(s >= self.threshold if self.above else s <= self.threshold))


def select_event(s0: np.ndarray, s1: np.ndarray, confidence: float = 0.95, n_thresholds: int = 200) -> Event:
    """The event of the largest bound on this (selection) batch, over thresholds at the pooled quantiles."""
    pooled = np.concatenate((s0, s1))
    pooled = pooled[np.isfinite(pooled)]
    thresholds = np.unique(np.quantile(pooled, np.linspace(0, 1, n_thresholds))) if len(pooled) else [0.0]
    best, best_bound = Event(float(thresholds[0]), True, 1), -1.0
    for t in thresholds:
        for above in (True, False):
            k = (Event(t, above, 0).hits(s0), Event(t, above, 0).hits(s1))
            for first in (0, 1):
                bound = epsilon_lower_bound(k[first], k[1 - first], len(s0), len(s1), confidence)
                if bound > best_bound:
                    best, best_bound = Event(float(t), above, first), bound
    return best


@dataclass(frozen=True)
class AuditOutcome:
    """One audited pair: the event, its frequencies on the fresh runs and the 95 % lower bound on ε."""

    event: Event
    runs: int  # fresh runs per dataset (the selection batch comes on top)
    selection_runs: int
    p_first: float
    p_second: float
    lower_bound: float


def audit_pair(sample: Sampler, selection_runs: int, runs: int, rng: np.random.Generator,
               confidence: float = 0.95) -> AuditOutcome:
    """Steps 1–3 of the module docstring; ``sample(which, n, rng)`` runs the mechanism n times on D_which."""
    if selection_runs < 1 or runs < 1:
        raise ParameterError("selection_runs and runs must be positive", "dp_audit.audit_pair")
    event = select_event(sample(0, selection_runs, rng), sample(1, selection_runs, rng), confidence)
    fresh = (sample(0, runs, rng), sample(1, runs, rng))
    k_a, k_b = event.hits(fresh[event.first]), event.hits(fresh[1 - event.first])
    return AuditOutcome(event, runs, selection_runs, k_a / runs, k_b / runs,
                        epsilon_lower_bound(k_a, k_b, runs, runs, confidence))
