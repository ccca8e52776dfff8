"""The noisy model: every statistic of :class:`~.counting.CityTraceCounts` with Laplace noise drawn through
:mod:`trajpub.noise`; the density as a quadtree whose level k gets ε_k (:meth:`CityTraceParams.level_epsilons`).
Nothing else of the data reaches the synthesis, which is post-processing of these noisy values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.citytrace.counting import CityTraceCounts
from mechanisms.citytrace.params import PARTS, CityTraceParams
from mechanisms.objtrace import quadtree
from mechanisms.objtrace.geometry import Geometry
from trajpub import noise


@dataclass(frozen=True, eq=False)
class NoisyModel:
    """Released (noisy) statistics only; no true count is kept. ``noisy["density"]`` holds the quadtree's levels
    in :func:`mechanisms.objtrace.quadtree.level_sums` layout."""

    params: CityTraceParams
    geometry: Geometry
    noisy: dict[str, np.ndarray]

    def metadata(self) -> dict:
        """JSON-safe facts about the model: the budget, the noise scales, the noisy record count (no seed)."""
        return {"epsilon_parts": self.params.budget(),
                "density_level_epsilons": self.params.level_epsilons(),
                "noise_scales": {part: self.params.scale(part) for part in PARTS if part != "density"},
                "density_level_scales": self.params.level_scales(),
                "noisy_records": float(self.noisy["records"][0])}


def fit(counts: CityTraceCounts, geometry: Geometry, params: CityTraceParams,
        rng: np.random.Generator) -> NoisyModel:
    """Noise every part once, in the order of :data:`~.params.PARTS` (sequential composition: Σ ε_part = ε); the
    density level by level, level k with sensitivity 1 and ε_k (Σ_k ε_k = ε_density)."""
    noisy = {}
    grid = geometry.model
    for part in PARTS:
        true = np.atleast_1d(np.asarray(getattr(counts, part), dtype=float))
        if part == "density":
            levels = []
            for k, eps_k in enumerate(params.level_epsilons()):
                block, n_blocks = quadtree.block_index(grid.n_cols, grid.n_rows, k)
                level = np.bincount(block, weights=true, minlength=n_blocks)
                levels.append(noise.laplace_real(level, 1.0, eps_k, rng))
            noisy[part] = np.concatenate(levels)
            continue
        # real-valued (per-object normalised) counts: snapped to the noise grid, the rounding paid in the scale
        eps_part = params.budget()[part]
        noisy[part] = noise.laplace_real(true, params.sensitivity(part), eps_part, rng)
    return NoisyModel(params, geometry, noisy)
