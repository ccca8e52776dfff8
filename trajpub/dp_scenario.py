"""A neighbouring pair on which :mod:`audits.dp_audit` audits a mechanism's privacy claim; each mechanism's
package states its own in ``dp_audit.py`` (``scenarios()``), and :mod:`audits.dp_scenarios` finds them through the
registry.

Every scenario runs the mechanism's own code (its DP step) on a small dataset (tens of objects, a small grid) and on
a neighbour that differs in one object, chosen adversarially:

- "outlier": the extra object goes where no other object goes (its count moves from 0 to 1);
- "duplicate": the extra object repeats an existing one (a count moves from c to c + 1);
- "max contribution": the extra object holds ``RECORDS`` trajectory records on the outlier path, the most a
  record-level mechanism lets one object contribute here (ε per record, so up to RECORDS·ε per object);
  for ObjTrace, whose claim is per object, 3× its per-object record cap (it must stay within ε).

The statistic is the noisy value of the count the extra object moves, read from the DP part of the mechanism
(the noisy tree of ``build_tree``, the noisy model of ``fit``, the noisy synopsis of ``noisy_synopsis``, run
on the true counts of the pair): everything the mechanisms release is post-processing of those, so a bound
on them is a bound on the release, and skipping the synthesis keeps 10⁴ runs affordable. Runs are batched where
the mechanism allows it exactly (see each ``run``): one call on R disjoint copies of the dataset gives R
independent draws of the statistic. The configurations put most of ε on that single count
(height 1, a budget split that favours it), so the claim is nearly tight there and a mechanism that used half
the noise it claims (run at 2ε, audited against ε) is caught.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

RECORDS = 3  # records of the "max contribution" object
N_OBJECTS = 20

Run = Callable[[int, int, float, np.random.Generator], np.ndarray]


@dataclass(frozen=True)
class Scenario:
    """One neighbouring pair of one mechanism. ``run(which, n, epsilon, rng)`` returns n statistics of
    independent runs on dataset ``which`` (0 or 1) with the mechanism configured for ``epsilon``."""

    mechanism: str
    neighbours: str
    model: str  # "epsilon-DP", "epsilon-LDP", "Pufferfish", "(k-Psi)"
    unit: str  # the unit the claim is stated in: the claim for this pair is the mechanism's ε
    object_factor: float  # the object-level claim for this pair: ε·object_factor (group privacy)
    run: Run
    tight: bool  # the negative control (run at 2ε) should be caught


def batched(n: int, per_call: int, call: Callable[[int], np.ndarray]) -> np.ndarray:
    """n statistics from calls that each return up to ``per_call`` independent ones."""
    out = [call(min(per_call, n - done)) for done in range(0, n, per_call)]
    return np.concatenate(out) if out else np.empty(0)


def record_level(mechanism: str, outlier: Run, duplicate: Run, most: Run) -> list[Scenario]:
    """The three pairs of a record-level ε-DP mechanism; only the single-record ones are tight."""
    unit = "one trajectory record"
    return [Scenario(mechanism, "outlier", "epsilon-DP", unit, 1, outlier, True),
            Scenario(mechanism, "duplicate", "epsilon-DP", unit, 1, duplicate, True),
            Scenario(mechanism, f"max contribution ({RECORDS} records)", "epsilon-DP", unit, RECORDS, most,
                     False)]
