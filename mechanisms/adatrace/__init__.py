"""AdaTrace: differentially private, attack-resilient, utility-aware trajectory synthesis.

Paper: M. E. Gursoy, L. Liu, S. Truex, L. Yu, W. Wei, "Utility-aware synthesis of differentially private and
attack-resilient location traces", ACM CCS 2018 (authors' Java code: git-disl/AdaTrace, cited as [Ada-code]);
DP-STAR (Gursoy et al., IEEE TMC 2019) is the same pipeline without the resilience layer. Survey: Jin, Hua,
Francia, Chao, Orlowska, Zhou, "A Survey and Experimental Study on Privacy-Preserving Trajectory Data
Publishing" (IEEE TKDE 2023), Sec. 3.1.3 and ref. [50]; settings, Sec. 5.1: ε = 5.

Pipeline (privacy unit: one trajectory record; every count's per-trajectory contribution is bounded):

1. top-level L×L density grid over the public extent, noisy (ε_grid·α); each top cell split into m×m leaves
   with m = ⌈√(ñ·ε_leaf/c₂)⌉ (:func:`subdivision`), noisy leaf densities (ε_grid·(1−α));
2. first-order Markov model: noisy transition counts between adjacent leaves (ε_markov);
3. trip distribution: noisy start-top → end-top counts (ε_trip);
4. route length (ε_length): by default one noisy histogram of detours (length − shortest hop route − 1);
   or (``length_model = "median"``, the paper's DP-STAR form) a noisy median per trip by the exponential
   mechanism (ε_length·(1−γ), parallel over trips) and one global noisy median (ε_length·γ) for the trips
   too small for their own;
5. synthesis: trip → start/end leaves → length → destination-biased Markov walk → one uniform point per leaf;
6. optional attack resilience (Bayesian inference, partial sniffing, outlier leakage), see
   :mod:`mechanisms.adatrace.resilience` for which checks read raw data.

Privacy (neighbouring databases differ by one trajectory record; proof sketch). Steps 1-4 are Laplace
mechanisms on count vectors whose L1 sensitivity is stated in :attr:`AdaTraceParams.sensitivity` (checked on
exact cases in the tests) and exponential mechanisms with utility sensitivity 1; the per-trip medians act on
disjoint subsets (parallel composition). Each later step is chosen from earlier noisy outputs only (the leaves
from the noisy top level), so adaptive sequential composition gives Σ εᵢ = ε (:attr:`AdaTraceParams.budget`).
Synthesis, the point sampling, the Bayesian check and the rare-cell rule read only the synopsis, public
parameters and fresh randomness: post-processing, so the released trajectories are ε-DP. This FAILS when
``attack_resilience`` and ``resilience_reads_raw`` are both true: the sniffing and plausible-deniability checks
read the raw data (as the paper's do), and the guarantee then says the output is not proven DP.

Decisions where the paper is silent or where we deviate (and why):

- Extent: the PUBLIC extent of the flow grid (the metric rectangle spanned by its projected bbox corners, the
  same rectangle the flow grid's cells cover; its corners reach slightly past the lon/lat box), not the data's
  bounding box (the Java's choice leaks the extremes). On the T-Drive bbox (~190 km) the 6×6 top cells are
  ~31 km wide, so most trips start and end in the same one or two top cells: raise ``top_level`` for a city.
- Subdivision: Qardaji et al.'s adaptive-grid rule m = ⌈√(ñ·ε_leaf/c₂)⌉, c₂ = 5, α = 0.5, capped at
  ``max_subdivision`` (the paper follows Qardaji's guideline; the Java uses ⌈5ñ/(|D|·ε)⌉ with the raw |D|).
  The Java never adds noise to the leaf densities (it uses raw counts to place points); we do, and they place
  start/end leaves and points.
- States of the Markov model: the leaves (the paper's adaptive cells; the Java uses the 6×6 top cells). Moves
  only between touching leaves; raw moves between non-touching leaves are interpolated along the segment.
- Transition weights: each of a trajectory's n moves counts min(1, C/n) (sensitivity C = ``transition_cap``;
  C = 1 is the Java's 1/n normalisation).
- Trips over top cells (as the Java's DP-STAR variant): 1,296 noisy counts for L = 6; over the leaves the
  noise of the empty pairs would swamp the signal. Noisy trip counts below b_trip·ln(L⁴) get probability 0
  in synthesis (``trip_threshold``, post-processing; the Java only clips at 0).
- Route length, default ``detour_histogram`` (our choice): a synthetic trip's length is its shortest hop
  route plus a detour drawn from one noisy histogram (one count per trajectory, sensitivity 1). The Java models
  the same "extra length beyond the shortest route", but per trip and with a uniform/geometric/Poisson law
  fitted on the RAW lengths (not DP). Measured on 300 T-Drive taxis at ε = 5: length-histogram JSD 0.05, vs
  0.32 for the median model, whose every trajectory of a trip has the same length.
- Route length, ``median`` (the paper's/DP-STAR "median length estimation"): one exponential-mechanism median
  per trip over the public domain {1..max_length} (utility −|#{<x} − #{>x}|, sensitivity 1); trips whose noisy count is below
  2·ln(max_length)/ε_length_trip (where the mechanism is close to uniform) use one global noisy median instead
  (γ = ``length_global_fraction`` of the length budget; our addition). The Java additionally fits a
  uniform/geometric/Poisson law using the RAW lengths and the raw maximum, which is not DP; we release only the
  median, so all synthetic trajectories of one trip (and end-point pair) have the same length.
- Length unit: leaves of the collapsed, interpolated sequence; a synthetic trajectory has one point per leaf
  visit (the real ones have one per GPS fix), no timestamps. The walk length is at least hops + 1.
- Synthetic count: the unclipped sum of the noisy trip counts (unbiased, post-processing) unless
  ``n_synthetic`` fixes it publicly (the Java uses the raw |D|).
- Resilience: ``resilience_reads_raw = false`` runs only the synopsis-only checks (our addition, proven DP).
  Zone and sniff region ranked on the NOISY leaf densities, Bayesian prior = noisy synopsis
  (Java: raw); sniffing and outlier tests read raw data as the paper's do; the Java's DTW location-visit test
  is replaced by a noisy-density rule; length-outlier scale from the synthetic data (Java: raw range); shared
  cells counted as distinct leaves (the Java counts near-identical points, which random points never are).
- Walk dead ends: when P·P^r gives the end zero probability, a neighbour from which the end is reachable in
  the remaining moves is chosen (Java: a jump along the straight route).
- Where the work runs: the counting passes on the partitions (the adapter), noise and synthesis on the driver
  (they read only the synopsis; a few seconds for thousands of trajectories, so not chunked on Dask).

Public surface: :class:`AdaTraceParams`, :func:`guarantee`, :func:`sanitize` (in memory), and the steps the
adapter distributes: :class:`Trajectories`, :func:`top_density`, :func:`feature_counts`, :func:`top_grid`,
:func:`noisy_top_density`, :func:`adaptive_grid`, :func:`noisy_synopsis`, :func:`release`,
:class:`RawOracle` and the raw-side checks :func:`sniffing_failures`, :func:`trajectory_features`,
:func:`nearest_distance`, :func:`count_within`.
"""

from mechanisms.adatrace.counting import (
    FeatureCounts,
    Trajectories,
    feature_counts,
    leaf_density,
    leaf_sequences,
    top_density,
)
from mechanisms.adatrace.grid import AdaptiveGrid, subdivision
from mechanisms.adatrace.guarantee import guarantee
from mechanisms.adatrace.mechanism import AdaTraceResult, release, sanitize, synthetic_points
from mechanisms.adatrace.params import AdaTraceParams
from mechanisms.adatrace.resilience import (
    LocalOracle,
    RawOracle,
    SyntheticSet,
    apply_resilience,
    bayesian_defense,
    count_within,
    jsd,
    knn_outliers,
    nearest_distance,
    outlier_defense,
    sniffing_failures,
    trajectory_features,
)
from mechanisms.adatrace.synopsis import (
    Synopsis,
    adaptive_grid,
    noisy_medians,
    noisy_synopsis,
    noisy_top_density,
    top_grid,
)
from mechanisms.adatrace.synthesis import generate, plan_trips, walk

__all__ = [
    "AdaTraceParams",
    "AdaTraceResult",
    "AdaptiveGrid",
    "FeatureCounts",
    "LocalOracle",
    "RawOracle",
    "Synopsis",
    "SyntheticSet",
    "Trajectories",
    "adaptive_grid",
    "apply_resilience",
    "bayesian_defense",
    "count_within",
    "feature_counts",
    "generate",
    "guarantee",
    "jsd",
    "knn_outliers",
    "leaf_density",
    "leaf_sequences",
    "nearest_distance",
    "noisy_medians",
    "noisy_synopsis",
    "noisy_top_density",
    "outlier_defense",
    "plan_trips",
    "release",
    "sanitize",
    "sniffing_failures",
    "subdivision",
    "synthetic_points",
    "top_density",
    "top_grid",
    "trajectory_features",
    "walk",
]
