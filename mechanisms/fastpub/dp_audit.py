"""The neighbouring pairs on which the DP audit (:mod:`audits.dp_scenarios`) tests the claim of
FASTPub's local randomiser (Wang et al. 2022, Alg. 1, RESPOND): ε-LDP per client
(:mod:`trajpub.dp_scenario` says how a pair is chosen and what is measured)."""

from __future__ import annotations

import numpy as np

from mechanisms.fastpub.client import respond
from mechanisms.fastpub.params import noise_factor
from trajpub.dp_scenario import Run, Scenario


def _fastpub_run() -> Run:
    candidates = np.array([[0, 1], [1, 2], [5, 6], [6, 7]])
    trajectories = (np.array([0, 1, 2]), np.array([5, 6, 7]))  # hold disjoint halves of the candidates
    target = np.array([0, 0, 1, 1])  # the true answers of trajectory 1

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        eta = noise_factor(epsilon, len(candidates))
        bits = respond(trajectories[which], eta, np.tile(candidates, (n, 1)), rng).reshape(n, len(candidates))
        return (bits == target).sum(axis=1).astype(float)

    return run


def scenarios() -> list[Scenario]:
    return [Scenario("fastpub", "two trajectories of one client, all answers differ", "epsilon-LDP",
                     "one client's trajectory", 1, _fastpub_run(), True)]
