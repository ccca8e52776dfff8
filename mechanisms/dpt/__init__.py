"""DPT: differentially private trajectory synthesis with hierarchical reference systems.

Paper: X. He, G. Cormode, A. Machanavajjhala, C. M. Procopiuc, D. Srivastava, "DPT: Differentially Private
Trajectory Synthesis Using Hierarchical Reference Systems", PVLDB 8(11):1154-1165, 2015.
Survey: Jin, Hua, Francia, Chao, Orlowska, Zhou, "A Survey and Experimental Study on Privacy-Preserving
Trajectory Data Publishing", IEEE TKDE 35(6), 2023 (Sec. 3.1.3, 5: DPT with ε = 5.0, authors' code not public;
LA 0.006, INF 0.995, DE 0.559, TE 0.356, FFP 0.591 on T-Drive; "needs data volume").

Public surface: :class:`DptParams`, :func:`guarantee`, :func:`count_points` (true counts of one partition, runs
next to the data), :func:`merge_counts`, :func:`fit` (every noisy release and the model selection),
:func:`synthesize_from_model` and :func:`to_points` (post-processing), and :func:`synthesize` (all of it from the
summed counts).

Pipeline: discretise each trajectory into one reference system (:mod:`.reference`) → true counts per partition
(:mod:`.counting`) → noisy statistics and model selection (:mod:`.model`) → direction-weighted Markov sampling
(:mod:`.synthesis`) → points at cell centres (:mod:`.mechanism`).

Decisions where the paper is silent, or that we could not check against it (only the paper's abstract was
available to us; we followed it, the survey's summary and our reading of the method), and deviations:

1. Reference systems: system k is the release grid coarsened by 2**k (cell sizes s, 2s, 4s, ...; ``n_levels``,
   default 3), square cells with 8 neighbour moves. The paper's anchor-point systems may differ in shape.
2. Assignment: a WHOLE trajectory goes to one system, the finest in which at most ``jump_tolerance`` (0.1) of its
   moves jump over a cell; repeated cells are collapsed; remaining jumps are filled with a straight line of
   neighbouring cells. The paper may split a trajectory into per-speed segments; one system per record makes the
   systems' counts disjoint, so they compose in parallel (each tree gets the whole tree budget).
3. Truncation: each record keeps its first ``max_transitions`` (m, default 30) moves, so depth-D node counts have
   L1 sensitivity m+2−D under add/remove of one record (documented in :meth:`DptParams.depth_sensitivity`).
4. Tree: node counts of depths 2..h (n-gram occurrence counts; depth D = D cells), dense over every possible node
   of the system so that absent nodes are noised too. Depth 1 (cell visits) is not released: the synthesis does
   not need it. Within a tree ε_D ∝ Δ_D, which gives every depth the same Laplace scale.
5. Model selection: the paper's exact error formula is not reproduced. We spend ``select_fraction`` of ε on noisy
   numbers of distinct occupied nodes per system and depth and, with the noisy length histograms, estimate the
   mean count per occupied node; a depth is kept while that mean is ≥ ``snr`` × its Laplace scale, and a system
   that fails at depth 2 is dropped (all dropped → the largest is kept at order 1). See :mod:`.model`.
6. Budget: ε = ε_select + ε_length + ε_start + ε_tree (fractions 0.05, 0.1, 0.1, rest 0.75 by default); the
   number of synthetic trajectories is the noisy count Σ N̂_k from the length histograms (no extra charge), or
   the public ``n_synthetic``.
7. Synthesis: system ∝ N̂_k, length and start cell from the clipped noisy histograms (so lengths come from a
   noisy distribution, not from an end symbol), moves from the highest-order context whose noisy child total is
   ≥ ``snr`` noise standard deviations (back-off to lower orders; order 1 always usable; uniform if all ≤ 0).
   Direction weighting: probability × γ**turn with turn in 45° steps (γ = ``direction_decay``, default 0.8,
   chosen by us on T-Drive, see :class:`DptParams`), applied by default only to moves drawn from an order-1
   context (a higher-order context already encodes the previous move); the paper's weighting function may
   differ.
8. Output: lon/lat at the centre of the synthetic cell of its system (block of 2**k × 2**k base cells clipped
   to the grid), no jitter; ``cell`` = the base grid cell of that point; ``t`` is NaT (no times are modelled).
9. Privacy unit: one trajectory record, neighbouring = add/remove; object-level ε by group privacy with
   ``max_records_per_object`` (enforced by the pipeline, as for prefix_tree).
10. Start cells: with Laplace(b) noise on every cell the clipped noise of the empty cells would outweigh the real
   starts, so noisy start counts below b·ln(n_cells) are set to 0 (post-processing, :func:`.synthesis.start_weights`).
11. No constrained inference (consistency between parent and children counts) as in prefix_tree: n-gram counts
   are not parent-sum-consistent (a window at a trajectory's end has no child), and back-off covers thin contexts.
12. Run metadata holds only public parameters and noisy values (no true input count), as prefix_tree does.

What to expect (T-Drive sample, 2 km grid, ε = 5, defaults): at 300 taxis the 2 km system is dropped and the 4 km
and 8 km systems are kept at order 1; the model reaches order 3 only with ε ≈ 50 or more. This is the survey's
"DPT needs data volume" in our implementation.

Reused from :mod:`mechanisms.prefix_tree`: :func:`~mechanisms.prefix_tree.check_csr` (the public-universe check of
CSR sequences). Its counting walks a prefix tree from each trajectory's start and its noise uses the Thm 4.1
threshold trick; DPT needs n-gram counts of every window with neighbour moves, so that code is not reused.
"""

from mechanisms.dpt.counting import DptCounts, count_discretised, merge_counts
from mechanisms.dpt.guarantee import guarantee
from mechanisms.dpt.mechanism import DptResult, count_points, hierarchy_of, synthesize, to_points
from mechanisms.dpt.model import NoisyModel, check_model_size, fit, model_size, select_heights
from mechanisms.dpt.params import DIRECTIONS, DptParams
from mechanisms.dpt.reference import Discretised, Hierarchy, discretise
from mechanisms.dpt.synthesis import Synthetic, direction_weights, synthesize_from_model, walk

__all__ = [
    "DIRECTIONS",
    "Discretised",
    "DptCounts",
    "DptParams",
    "DptResult",
    "Hierarchy",
    "NoisyModel",
    "Synthetic",
    "check_model_size",
    "count_discretised",
    "count_points",
    "direction_weights",
    "discretise",
    "fit",
    "guarantee",
    "hierarchy_of",
    "merge_counts",
    "model_size",
    "select_heights",
    "synthesize",
    "synthesize_from_model",
    "to_points",
    "walk",
]
