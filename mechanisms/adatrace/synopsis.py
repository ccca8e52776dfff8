"""The noisy synopsis of AdaTrace (Sec. 4): every released number is a true count plus Laplace noise of scale
Δ/ε_part (or an exponential-mechanism draw), and everything after that reads only the noisy values.

Budget (sequential composition, ε = Σ parts, :attr:`AdaTraceParams.budget`):

Real-valued parts (1-3) are snapped to the noise grid before the noise (:func:`trajpub.noise.laplace_real`,
whose scale pays for the rounding, ≤ 0.1 % more noise); counts (4-5) get :func:`trajpub.noise.laplace`.

1. ``grid_top``: top-level densities (L1 sensitivity 1: a trajectory's point weights 1/|T| sum to 1).
2. ``grid_leaf``: leaf densities on the grid chosen from (1) (sensitivity 1 for the same reason).
3. ``markov``: transition counts over the adjacency edges of (2) (sensitivity C = ``transition_cap``).
4. ``trip``: start-top → end-top counts (one per trajectory: sensitivity 1).
5. model "detour_histogram": ``length_detour``, one noisy histogram of detours (one count per trajectory).
   Model "median": ``length_global``: the exponential mechanism picks one median route length of all trajectories from
   {1..max_length}, utility −|#{<x} − #{>x}| (sensitivity 1); ``length_trip``: the same for every trip. The
   trips partition the trajectories, so the per-trip draws compose in parallel: ε_length_trip in total.

Parts 2-5 are computed on a grid that is a function of part 1's output (adaptive composition, still Σ εᵢ).
Under "replace" every sensitivity doubles. The number of synthetic trajectories is the unclipped sum of the
noisy trip counts (post-processing) unless the caller fixes it publicly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.sparse import csr_matrix

from mechanisms.adatrace.counting import FeatureCounts
from mechanisms.adatrace.grid import AdaptiveGrid, subdivision
from mechanisms.adatrace.params import AdaTraceParams
from trajpub import noise


def top_grid(extent: tuple[float, float, float, float], params: AdaTraceParams) -> AdaptiveGrid:
    """The top level alone (every split 1): what the first counting pass needs."""
    return AdaptiveGrid(tuple(float(v) for v in extent), params.top_level,
                        np.ones(params.top_level ** 2, np.int64))


def noisy_top_density(true_top: np.ndarray, params: AdaTraceParams, rng: np.random.Generator) -> np.ndarray:
    """Step 1: the top-level densities plus Laplace(Δ/ε_grid_top) (real-valued: :func:`trajpub.noise.laplace_real`)."""
    return noise.laplace_real(true_top, params.sensitivity["grid_top"], params.budget["grid_top"], rng)


def adaptive_grid(extent: tuple[float, float, float, float], noisy_top: np.ndarray,
                  params: AdaTraceParams) -> AdaptiveGrid:
    """Step 1b (post-processing): split each top cell into mᵢ×mᵢ leaves from its noisy density."""
    m = subdivision(noisy_top, params.budget["grid_leaf"], params.subdivision_constant, params.max_subdivision)
    return AdaptiveGrid(tuple(float(v) for v in extent), params.top_level, m)


def noisy_medians(length_hist: np.ndarray, epsilon: float, sensitivity: float,
                  rng: np.random.Generator) -> np.ndarray:
    """One exponential-mechanism median per row of ``length_hist`` (counts of lengths 1..max_length).

    Candidate x ∈ {1..max_length} has utility u(x) = −|#{< x} − #{> x}| and probability ∝ exp(ε·u(x)/(2Δu))
    (McSherry-Talwar), sampled exactly by :func:`trajpub.noise.exponential_mechanism`. Returns lengths
    (1-based).
    """
    h = np.asarray(length_hist, dtype=float)
    below = np.cumsum(h, axis=1) - h  # #{< x}
    above = h.sum(axis=1, keepdims=True) - below - h  # #{> x}
    return noise.exponential_mechanism(-np.abs(below - above), epsilon, sensitivity, rng) + 1


@dataclass(frozen=True)
class Synopsis:
    """Everything AdaTrace releases internally: noisy values and the public parameters, nothing raw."""

    grid: AdaptiveGrid
    noisy_top: np.ndarray
    noisy_leaf: np.ndarray
    noisy_transitions: np.ndarray
    noisy_trips: np.ndarray
    median_length: np.ndarray | None
    global_median: int | None
    params: AdaTraceParams
    noisy_detour: np.ndarray | None = None

    @property
    def noisy_count(self) -> float:
        """The noisy number of trajectories: Σ of the unclipped noisy trip counts (unbiased)."""
        return float(self.noisy_trips.sum())

    def n_synthetic(self) -> int:
        if self.params.n_synthetic is not None:
            return int(self.params.n_synthetic)
        return max(round(self.noisy_count), 0)

    @cached_property
    def trip_probabilities(self) -> np.ndarray:
        """(L²·L²,) trip distribution: noisy counts below :attr:`AdaTraceParams.trip_cut` set to 0 (clipped at 0
        if that leaves nothing), normalised (uniform if all are ≤ 0)."""
        raw = self.noisy_trips.ravel()
        p = np.where(raw >= self.params.trip_cut, np.maximum(raw, 0.0), 0.0)
        if p.sum() <= 0:
            p = np.maximum(raw, 0.0)
        return p / p.sum() if p.sum() > 0 else np.full(len(p), 1.0 / len(p))

    @cached_property
    def detour_probabilities(self) -> np.ndarray:
        """(max_length,) detour distribution ("detour_histogram" model): noisy counts clipped at 0, normalised
        (no detour if all are ≤ 0)."""
        p = np.maximum(self.noisy_detour, 0.0)
        if p.sum() <= 0:
            p = np.r_[1.0, np.zeros(len(p) - 1)]
        return p / p.sum()

    @cached_property
    def synthesis_length(self) -> np.ndarray:
        """(L²·L²,) the median length used for each trip: its own noisy median when its noisy count reaches
        :attr:`AdaTraceParams.confident_trip_count`, otherwise the global noisy median (post-processing)."""
        confident = self.noisy_trips.ravel() >= self.params.confident_trip_count
        return np.where(confident, self.median_length, self.global_median)

    @cached_property
    def leaf_weights(self) -> np.ndarray:
        """(K,) noisy leaf densities clipped at 0; within a top cell whose leaves are all 0, uniform."""
        w = np.maximum(self.noisy_leaf, 0.0)
        top = self.grid.leaf_top
        total = np.bincount(top, weights=w, minlength=self.grid.n_top)
        return np.where(total[top] > 0, w, 1.0)

    @cached_property
    def transition_matrix(self) -> csr_matrix:
        """Row-stochastic (K, K) sparse matrix on the adjacency edges: noisy counts clipped at 0 and normalised
        per row; a row with no positive count moves uniformly to its neighbours."""
        g = self.grid
        k = g.n_leaves
        w = np.maximum(self.noisy_transitions, 0.0)
        src = g.edges[:, 0]
        row_sum = np.bincount(src, weights=w, minlength=k)
        deg = np.bincount(src, minlength=k)
        vals = np.where(row_sum[src] > 0, w / np.where(row_sum[src] > 0, row_sum[src], 1.0),
                        1.0 / np.maximum(deg[src], 1))
        return csr_matrix((vals, (src, g.edges[:, 1])), shape=(k, k))

    @cached_property
    def markov_prior(self) -> np.ndarray:
        """(E,) the noisy transition counts clipped at 0 and normalised over the whole matrix (the Java's
        ``getMarkovList`` form, used as the Bayesian test's prior)."""
        w = np.maximum(self.noisy_transitions, 0.0)
        return w / w.sum() if w.sum() > 0 else np.full(len(w), 1.0 / max(len(w), 1))

    def leaf_rank(self, rank: int) -> int:
        """The leaf with the ``rank``-th largest noisy density (1 = densest; ties by leaf index); the last leaf
        if there are fewer leaves."""
        order = np.lexsort((np.arange(self.grid.n_leaves), -self.noisy_leaf))
        return int(order[min(rank, len(order)) - 1])

    def metadata(self) -> dict:
        return {"grid": self.grid.to_dict(), "noisy_trajectory_count": round(self.noisy_count, 3),
                "edges": len(self.grid.edges), "budget": self.params.budget,
                "global_median_length": self.global_median, "trip_cut": self.params.trip_cut,
                "confident_trip_count": (self.params.confident_trip_count
                                         if math.isfinite(self.params.confident_trip_count) else None),
                "noise_scale": self.params.noise_scale}


def noisy_synopsis(grid: AdaptiveGrid, noisy_top: np.ndarray, counts: FeatureCounts, params: AdaTraceParams,
                   rng: np.random.Generator) -> Synopsis:
    """Steps 2-5: noise on the (summed) true counts of ``grid``."""
    b, eps, sens = params.noise_scale, params.budget, params.sensitivity
    leaf = noise.laplace_real(counts.leaf_density, sens["grid_leaf"], eps["grid_leaf"], rng)
    trans = noise.laplace_real(counts.transitions, sens["markov"], eps["markov"], rng)
    trips = counts.trips + noise.laplace(b["trip"], counts.trips.shape, rng)
    if params.length_model == "detour_histogram":
        detour = counts.detour_hist + noise.laplace(b["length_detour"], counts.detour_hist.shape, rng)
        return Synopsis(grid, np.asarray(noisy_top, float), leaf, trans, trips, None, None, params, detour)
    med = noisy_medians(counts.length_hist, eps["length_trip"], sens["length_trip"], rng)
    glob = noisy_medians(counts.length_hist.sum(axis=0, keepdims=True), eps["length_global"],
                         sens["length_global"], rng)
    return Synopsis(grid, np.asarray(noisy_top, float), leaf, trans, trips, med, int(glob[0]), params)
