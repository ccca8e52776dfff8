"""The noisy DPT model: every statistic the synthesis reads, each with its Laplace noise, and model selection.

Order of the releases (sequential composition, Σ = ε; :meth:`DptParams.budget`):

1. ``select``: per system k and depth D = 2..max_order+1 the number U_{k,D} of distinct occupied depth-D nodes,
   with Laplace(select_sensitivity/ε_select) noise (one trajectory changes at most m+2−D of them, in one system).
2. ``length``: per system the histogram of trajectory lengths (1..m+1 cells), Laplace(1/ε_length) per bin.
3. ``start``: per system the histogram of start cells over ALL cells of the system, Laplace(1/ε_start) per cell.
4. Model selection, post-processing of 1–2 only: N̂_k = Σ clip(length histogram), T̂_{k,D} = Σ_n clip(ĥ_k[n])·(n−D+1)⁺
   (windows of D cells), and the height h_k = the largest h such that every depth D ≤ h has
   T̂_{k,D}/max(Û_{k,D}, 1) ≥ snr · b(h), b(h) = Σ_{D=2}^h Δ_D / ε_tree. A system failing at D = 2 is dropped
   (DPT drops noisy, low-utility systems); if every system fails, the one with the largest N̂_k is kept at h = 2.
5. ``tree``: for each kept system the node counts of depths 2..h_k, dense over ALL n_cells_k·8^(D−1) possible
   nodes (so a node's absence reveals nothing), Laplace(b(h_k)) each. Each trajectory is in one system, so the
   systems' trees compose in parallel and each may use the whole ε_tree; within a tree ε_D ∝ Δ_D.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mechanisms.dpt.counting import DptCounts
from mechanisms.dpt.params import N_DIRECTIONS, DptParams
from mechanisms.dpt.reference import Hierarchy
from trajpub import noise
from trajpub.errors import ParameterError


def model_size(hierarchy: Hierarchy, params: DptParams) -> int:
    """The largest number of noisy node counts a release can hold (every system at the maximal height)."""
    return sum(hierarchy.n_cells(k) * N_DIRECTIONS ** (d - 1)
               for k in range(hierarchy.n_levels) for d in range(2, params.max_height + 1))


def check_model_size(hierarchy: Hierarchy, params: DptParams) -> None:
    """Refuse, from public inputs only, a model whose dense node arrays would exceed ``max_nodes``."""
    size = model_size(hierarchy, params)
    if size > params.max_nodes:
        raise ParameterError(
            f"the model would hold up to {size} noisy node counts (grid {hierarchy.n_cols}x{hierarchy.n_rows}, "
            f"{hierarchy.n_levels} systems, max_order {params.max_order}), more than max_nodes = "
            f"{params.max_nodes}; lower max_order or use a coarser grid", "dpt.max_order")


@dataclass
class NoisyModel:
    """Released (noisy) statistics only; no true count is kept."""

    params: DptParams
    hierarchy: Hierarchy
    noisy_distinct: np.ndarray          # (n_levels, max_height-1): Û_{k,D}, D = 2..max_height
    noisy_lengths: np.ndarray           # (n_levels, m+2): index n = number of cells (index 0 unused, 0)
    noisy_starts: list[np.ndarray]      # per system, one value per cell
    heights: np.ndarray                 # per system: chosen tree height, 0 = dropped
    nodes: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)  # (level, depth) -> noisy counts

    def system_sizes(self) -> np.ndarray:
        """N̂_k: the clipped noisy length histograms' totals."""
        return np.clip(self.noisy_lengths, 0, None).sum(axis=1)

    def node_scale(self, level: int) -> float:
        """The Laplace scale of system ``level``'s node counts."""
        return self.params.tree_scale(int(self.heights[level]))

    def metadata(self) -> dict:
        """JSON-safe facts about the model (noisy values only, no seed)."""
        b = self.params.budget()
        return {
            "epsilon_parts": {k: float(v) for k, v in b.items()},
            "select_scale": self.params.select_scale(),
            "length_scale": self.params.length_scale(),
            "start_scale": self.params.start_scale(),
            "systems": [
                {"level": k, "cell_size_factor": 1 << k, "height": int(self.heights[k]),
                 "markov_order": max(int(self.heights[k]) - 1, 0), "kept": bool(self.heights[k] > 0),
                 "noisy_trajectories": float(self.system_sizes()[k]),
                 "node_scale": self.node_scale(k) if self.heights[k] > 0 else None}
                for k in range(self.hierarchy.n_levels)
            ],
        }


def _dense(keys: np.ndarray, counts: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=float)
    out[keys] = counts
    return out


def select_heights(noisy_lengths: np.ndarray, noisy_distinct: np.ndarray, params: DptParams) -> np.ndarray:
    """Step 4 of the module docstring: the tree height of each system (0 = dropped). Post-processing only."""
    n_levels = noisy_lengths.shape[0]
    hist = np.clip(noisy_lengths, 0, None)
    n_cells = np.arange(hist.shape[1])
    heights = np.zeros(n_levels, dtype=np.int64)
    for k in range(n_levels):
        for h in range(2, params.max_height + 1):
            scale = params.tree_scale(h)
            ok = True
            for d in range(2, h + 1):
                windows = float(np.sum(hist[k] * np.clip(n_cells - d + 1, 0, None)))
                occupied = max(float(noisy_distinct[k, d - 2]), 1.0)
                ok &= windows / occupied >= params.snr * scale
            if not ok:
                break
            heights[k] = h
    if not heights.any():
        sizes = hist.sum(axis=1)
        if sizes.max() >= 1:
            heights[int(np.argmax(sizes))] = 2
    return heights


def fit(counts: DptCounts, hierarchy: Hierarchy, params: DptParams, rng: np.random.Generator) -> NoisyModel:
    """Release the noisy statistics of the module docstring from the true ``counts`` and select the model."""
    check_model_size(hierarchy, params)
    n_levels, height_max, m = hierarchy.n_levels, params.max_height, params.max_transitions
    # 1. selection: distinct occupied nodes
    true_distinct = np.array([[len(counts.get("node", k, d)[0]) for d in range(2, height_max + 1)]
                              for k in range(n_levels)], dtype=float)
    noisy_distinct = true_distinct + noise.laplace(params.select_scale(), true_distinct.shape, rng)
    # 2. length histograms
    lengths = np.stack([_dense(*counts.get("length", k), m + 2) for k in range(n_levels)])
    length_noise = noise.laplace(params.length_scale(), lengths.shape, rng)
    length_noise[:, 0] = 0.0  # bin 0 (no cell) is empty by construction for every dataset: nothing to hide
    noisy_lengths = lengths + length_noise
    noisy_lengths[:, 0] = 0.0
    # 3. start histograms
    noisy_starts = []
    for k in range(n_levels):
        size = hierarchy.n_cells(k)
        start_noise = noise.laplace(params.start_scale(), size, rng)
        noisy_starts.append(_dense(*counts.get("start", k), size) + start_noise)
    # 4. selection (post-processing)
    heights = select_heights(noisy_lengths, noisy_distinct, params)
    model = NoisyModel(params, hierarchy, noisy_distinct, noisy_lengths, noisy_starts, heights)
    # 5. node counts of the kept systems
    for k in range(n_levels):
        h = int(heights[k])
        if h == 0:
            continue
        scale = params.tree_scale(h)
        for d in range(2, h + 1):
            size = hierarchy.n_cells(k) * N_DIRECTIONS ** (d - 1)
            model.nodes[(k, d)] = _dense(*counts.get("node", k, d), size) + noise.laplace(scale, size, rng)
    return model
