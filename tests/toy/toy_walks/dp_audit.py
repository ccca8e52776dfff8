"""The neighbouring pair on which the DP audit (:mod:`audits.dp_scenarios`) tests the toy's claim, ε-DP per
trajectory record (:mod:`trajpub.dp_scenario`): the noisy count of N_OBJECTS records against N_OBJECTS + 1."""

from __future__ import annotations

import numpy as np

from trajpub.dp_scenario import N_OBJECTS, Scenario

from .adapter import noisy_count


def _run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    return np.array([noisy_count(N_OBJECTS + which, epsilon, rng) for _ in range(n)])


def scenarios() -> list[Scenario]:
    return [Scenario("toy_walks", "one more record", "epsilon-DP", "one trajectory record", 1, _run, True)]
