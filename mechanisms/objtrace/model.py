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


def adaptive_weights(noisy: np.ndarray, n_cols: int, n_rows: int, scale: float, levels: int) -> np.ndarray:
    """A cell histogram at adaptive resolution from noisy per-cell counts (post-processing, no budget).

    Finest level first: a cell keeps its own noisy count when it clears the threshold of
    :func:`sparse_weights`; cells still unassigned take, at the first level k = 1..``levels`` where their
    2**k x 2**k block's noisy sum S clears ``sd_k · sqrt(2 ln n_k)`` (sd_k = sqrt(2 · 4**k) · scale, the sum's
    noise standard deviation; n_k blocks: about the largest of n_k pure-noise sums), an equal share of S minus
    what the block's assigned cells already hold. So dense areas keep model-cell detail and sparse areas get a
    smoothed, block-level density, as the adaptive grids of AdaTrace (Gursoy et al., CCS 2018, Sec. 4.1) and
    the quadtrees of private spatial decompositions, without spending budget on the coarser levels.
    """
    grid = noisy.reshape(n_rows, n_cols)
    est = np.where(grid >= scale * np.log(max(grid.size, 2)), grid, 0.0)
    assigned = est > 0
    rows, cols = np.indices(grid.shape)
    for k in range(1, levels + 1):
        block = (rows >> k) * (-(-n_cols >> k)) + (cols >> k)
        n_blocks = int(block.max()) + 1
        total = np.bincount(block.ravel(), weights=grid.ravel(), minlength=n_blocks)
        held = np.bincount(block.ravel(), weights=est.ravel(), minlength=n_blocks)
        free = np.bincount(block.ravel(), weights=(~assigned).ravel(), minlength=n_blocks)
        threshold = np.sqrt(2.0 * 4**k) * scale * np.sqrt(2 * np.log(max(n_blocks, 2)))
        share = np.where((total >= threshold) & (free > 0), np.clip(total - held, 0, None) / np.maximum(free, 1), 0)
        take = ~assigned & (share[block] > 0)
        est[take] = share[block][take]
        assigned |= take
    est = est.ravel()
    return est if est.sum() > 0 else np.clip(noisy, 0, None)


def sparse_weights(noisy: np.ndarray, scale: float) -> np.ndarray:
    """Noisy counts below ``scale · ln(n)`` set to 0 (n = number of bins); the clipped counts if none is left.

    Pr[Laplace(b) >= b ln n] = 1/(2n), so on average at most half an empty bin survives, while the clipped
    noise of n empty bins (about n b / 2) would otherwise swamp a sparse histogram (DPT's start-cell rule,
    :func:`mechanisms.dpt.synthesis.start_weights`). Post-processing with a public threshold.
    """
    kept = np.where(noisy >= scale * np.log(max(len(noisy), 2)), noisy, 0.0)
    return kept if kept.sum() > 0 else np.clip(noisy, 0, None)
