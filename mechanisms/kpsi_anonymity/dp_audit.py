"""The neighbouring pairs on which the DP audit (:mod:`audits.dp_scenarios`) tests the claim of
(k-Ψ)-anonymity (Chen, Li, Zhang 2020): not DP; ε per location of its Laplace perturbation
(:mod:`trajpub.dp_scenario` says how a pair is chosen and what is measured)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.kpsi_anonymity import KPsiParams, anonymize
from trajpub.dp_scenario import Run, Scenario


def _kpsi_run() -> Run:
    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        params = KPsiParams(k=4, epsilon=epsilon, epsilon_semantics="per_location", psi_mode="constant",
                            delta_m=200.0, road_aware=False)
        x = 1000.0 + 100.0 * which  # the real location, moved 100 m east in the neighbour (inside Ψ)
        frame = pd.DataFrame({"object_id": np.arange(n), "traj_id": 1, "seq": 0,
                              "t": pd.Timestamp("2020-01-01", tz="UTC"), "x": x, "y": 1000.0})
        published = anonymize(frame, None, params, rng).published  # one independent set per object
        return published.groupby("set_id")["x"].mean().to_numpy()  # the set's centroid

    return run


def scenarios() -> list[Scenario]:
    return [Scenario("kpsi_anonymity", "the real location moved 100 m inside its disc", "(k-Psi)",
                     "one location", 1, _kpsi_run(), False)]
