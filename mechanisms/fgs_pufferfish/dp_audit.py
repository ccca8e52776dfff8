"""The neighbouring pairs on which the DP audit (:mod:`audits.dp_scenarios`) tests the claim of
FGS-Pufferfish (Ou et al. 2018): not DP; its secrets are two objects' temporal correlations
(:mod:`trajpub.dp_scenario` says how a pair is chosen and what is measured)."""

from __future__ import annotations

import numpy as np

from mechanisms.fgs_pufferfish.mechanism import release_object
from mechanisms.fgs_pufferfish.params import FgsParams
from mechanisms.fgs_pufferfish.privacy import noise_calibration, object_correlation
from mechanisms.fgs_pufferfish.simulate import ar1_series
from trajpub.dp_scenario import Run, Scenario


def _fgs_run(statistic: str) -> Run:
    rng = np.random.default_rng(20182)
    # a jittery object (correlation time 1 slot) and a smooth one (8 slots), 6 days of 32 slots, metres
    objects = [np.moveaxis(ar1_series((6, 2), 32, tau, rng), 1, 2) * 300.0 for tau in (1.0, 8.0)]

    def run(which: int, n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        params = FgsParams(n_slots=32, epsilon=epsilon)
        b_c0 = noise_calibration(params, np.stack([object_correlation(o, params) for o in objects]))
        out = np.empty(n)
        for i in range(n):
            released = release_object(objects[which], params, rng, b_c0=b_c0)[0]
            if statistic == "mean":  # what any reader sees: the published mean trajectory's first x
                out[i] = released.mean[0, 0]
            else:  # the claim's own adversary: the lag-1 correlation of the released x deviations
                x = released.deviation[..., 0]
                out[i] = (x[:, 1:] * x[:, :-1]).mean() / max((x * x).mean(), 1e-300)
        return out

    return run


def scenarios() -> list[Scenario]:
    unit = "the temporal correlation of one object"
    return [Scenario("fgs_pufferfish", "the two objects (secret pair), lag-1 correlation statistic", "Pufferfish",
                     unit, 1, _fgs_run("correlation"), False),
            Scenario("fgs_pufferfish", "the two objects (secret pair), published-mean statistic", "Pufferfish",
                     unit, 1, _fgs_run("mean"), False)]
