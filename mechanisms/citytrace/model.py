"""The noisy model: every statistic of :class:`~.counting.CityTraceCounts` with Laplace noise drawn through
:mod:`trajpub.noise`; the density as a quadtree whose level k gets ε_k (:meth:`CityTraceParams.level_epsilons`).
Nothing else of the data reaches the synthesis, which is post-processing of these noisy values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.citytrace import privtree
from mechanisms.citytrace.counting import CityTraceCounts
from mechanisms.citytrace.params import PARTS, CityTraceParams, fine_grid
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
    leaves: privtree.Leaves | None = None
    fine: np.ndarray | None = None

    def metadata(self) -> dict:
        """JSON-safe facts about the model: the budget, the noise scales, the noisy record count (no seed); for a
        PrivTree density its ε split and its leaves per level (released: the decomposition is DP)."""
        density = ({"density_level_epsilons": self.params.level_epsilons(),
                    "density_level_scales": self.params.level_scales()} if self.leaves is None else
                   {"density_privtree_epsilons": dict(zip(("tests", "leaves", "sub_levels"),
                                                          self.params.privtree_epsilons(), strict=True)),
                    "density_leaves_per_level": np.bincount(self.leaves.level).tolist()})
        return {"epsilon_parts": self.params.budget(), **density,
                "noise_scales": {part: self.params.scale(part) for part in PARTS if part != "density"},
                "noisy_records": float(self.noisy["records"][0])}


def fit(counts: CityTraceCounts, geometry: Geometry, params: CityTraceParams,
        rng: np.random.Generator) -> NoisyModel:
    """Noise every part once, in the order of :data:`~.params.PARTS` (sequential composition: Σ ε_part = ε); the
    density level by level, level k with sensitivity 1 and ε_k (Σ_k ε_k = ε_density)."""
    noisy, leaves = {}, None
    grid = geometry.model
    for part in PARTS:
        true = np.atleast_1d(np.asarray(getattr(counts, part), dtype=float))
        if part == "density" and params.density_model == "privtree":
            leaves, released = privtree_density(true, fine_grid(geometry, params), params, rng)
            noisy |= released
            continue
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
    fine = None if leaves is None else fine_estimate(noisy, leaves, fine_grid(geometry, params), params)
    return NoisyModel(params, geometry, noisy, leaves, fine)


def fine_estimate(noisy: dict[str, np.ndarray], leaves: privtree.Leaves, grid, params: CityTraceParams
                  ) -> np.ndarray:
    """Per fine cell weights of the PrivTree density (post-processing of the released leaves and counts): the
    leaves' noisy counts thresholded as :func:`mechanisms.objtrace.quadtree.sparse_weights`, refined top-down
    by the sub-levels (:func:`.privtree.refine`, the ``snr`` rule)."""
    _, eps_leaf, eps_subs = params.privtree_epsilons()
    leaf = privtree.leaf_of_cell(leaves, grid.n_cols, grid.n_rows)
    nodes = [privtree.sub_nodes(leaves, leaf, grid.n_cols, grid.n_rows, j) for j in range(1, len(eps_subs) + 1)]
    return privtree.refine(quadtree.sparse_weights(noisy["density"], 1.0 / eps_leaf), leaf,
                           [noisy[f"density_sub{j}"] for j in range(1, len(eps_subs) + 1)], nodes,
                           [1.0 / e for e in eps_subs], params.snr)


def privtree_density(fine: np.ndarray, grid, params: CityTraceParams, rng: np.random.Generator
                     ) -> tuple[privtree.Leaves, dict[str, np.ndarray]]:
    """The PrivTree density (:mod:`.privtree`): the leaves (ε_tests), their noisy counts (``density``, ε_leaves)
    and the noisy counts of each sub-level's partition (``density_sub1..J``, ε_j each), all with sensitivity 1
    (every object's vector has L1 norm <= 1 and each is a partition of the grid)."""
    eps_tree, eps_leaf, eps_subs = params.privtree_epsilons()
    leaves = privtree.decompose(fine, grid.n_cols, grid.n_rows, eps_tree, rng)
    leaf = privtree.leaf_of_cell(leaves, grid.n_cols, grid.n_rows)
    out = {"density": noise.laplace_real(np.bincount(leaf, weights=fine, minlength=len(leaves.level)), 1.0,
                                         eps_leaf, rng)}
    for j, eps_j in enumerate(eps_subs, start=1):
        node = privtree.sub_nodes(leaves, leaf, grid.n_cols, grid.n_rows, j)
        out[f"density_sub{j}"] = noise.laplace_real(np.bincount(node, weights=fine), 1.0, eps_j, rng)
    return leaves, out
