"""The noisy model: every statistic of :class:`~.counting.ObjTraceCounts` with Laplace noise of scale
sensitivity / ε_part (:meth:`ObjTraceParams.scale`), drawn through :mod:`trajpub.noise`. Nothing else of the
data reaches the synthesis, which is post-processing of these noisy values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.objtrace.counting import ObjTraceCounts
from mechanisms.objtrace.geometry import Geometry
from mechanisms.objtrace.params import PARTS, ObjTraceParams
from trajpub import noise


@dataclass(frozen=True, eq=False)
class NoisyModel:
    """Released (noisy) statistics only; no true count is kept."""

    params: ObjTraceParams
    geometry: Geometry
    noisy: dict[str, np.ndarray]

    def metadata(self) -> dict:
        """JSON-safe facts about the model: the budget, the noise scales, the noisy record count (no seed)."""
        return {"epsilon_parts": self.params.budget(),
                "noise_scales": {part: self.params.scale(part) for part in PARTS},
                "noisy_records": float(self.noisy["records"][0])}


def fit(counts: ObjTraceCounts, geometry: Geometry, params: ObjTraceParams, rng: np.random.Generator) -> NoisyModel:
    """Noise every part once, in the order of :data:`~.params.PARTS` (sequential composition: Σ ε_part = ε)."""
    noisy = {}
    for part in PARTS:
        true = np.atleast_1d(np.asarray(getattr(counts, part), dtype=float))
        noisy[part] = true + noise.laplace(params.scale(part), true.shape, rng)
    return NoisyModel(params, geometry, noisy)


def sparse_weights(noisy: np.ndarray, scale: float) -> np.ndarray:
    """Noisy counts below ``scale · ln(n)`` set to 0 (n = number of bins); the clipped counts if none is left.

    Pr[Laplace(b) >= b ln n] = 1/(2n), so on average at most half an empty bin survives, while the clipped
    noise of n empty bins (about n b / 2) would otherwise swamp a sparse histogram (DPT's start-cell rule,
    :func:`mechanisms.dpt.synthesis.start_weights`). Post-processing with a public threshold.
    """
    kept = np.where(noisy >= scale * np.log(max(len(noisy), 2)), noisy, 0.0)
    return kept if kept.sum() > 0 else np.clip(noisy, 0, None)
