"""The noisy model: every statistic of :class:`~.counting.ObjTraceCounts` with Laplace noise of scale
sensitivity / ε_part (:meth:`ObjTraceParams.scale`), drawn through :mod:`trajpub.noise`. Nothing else of the
data reaches the synthesis, which is post-processing of these noisy values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.objtrace import quadtree
from mechanisms.objtrace.counting import ObjTraceCounts
from mechanisms.objtrace.geometry import Geometry
from mechanisms.objtrace.params import PARTS, SPATIAL_PARTS, ObjTraceParams
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
    """Noise every part once, in the order of :data:`~.params.PARTS` (sequential composition: Σ ε_part = ε); a
    part of :data:`~.params.SPATIAL_PARTS` as every level of its quadtree (:func:`.quadtree.level_sums`)."""
    noisy = {}
    grid = geometry.model
    for part in PARTS:
        true = np.atleast_1d(np.asarray(getattr(counts, part), dtype=float))
        if part in SPATIAL_PARTS:
            true = quadtree.level_sums(true, grid.n_cols, grid.n_rows, params.quadtree_levels)
        # real-valued (per-object normalised) counts: snapped to the noise grid, the rounding paid in the scale
        eps_part = params.budget()[part]
        noisy[part] = noise.laplace_real(true, params.scale(part) * eps_part, eps_part, rng)
    return NoisyModel(params, geometry, noisy)
