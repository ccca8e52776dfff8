"""Parameters of an AdaTrace release and the privacy constants derived from them.

Gursoy, Liu, Truex, Yu, Wei, "Utility-aware synthesis of differentially private and attack-resilient location
traces", ACM CCS 2018; the defaults marked [Ada-code] come from the authors' Java code (git-disl/AdaTrace,
``Main.java``); the survey (Jin et al., TKDE 2023, Sec. 5.1) ran it at ε = 5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trajpub.errors import ParameterError
from trajpub.params import Params, Scope

NEIGHBOURING_RELATIONS = ("add_remove", "replace")
LENGTH_MODELS = ("median", "detour_histogram")
BUDGET_PARTS = ("grid", "markov", "trip", "length")

_P = Scope("adatrace")


@dataclass(frozen=True)
class AdaTraceParams(Params):
    """Public parameters of one AdaTrace release; none of them may be derived from the data.

    epsilon: total budget ε (survey default 5.0; the Java default is 1.0).
    budget_split: fractions of ε for (grid, markov, trip, length), [Ada-code] (0.05, 0.35, 0.50, 0.10); they
        must be positive and sum to 1. The grid part is split again between the top level and the leaves by
        ``grid_top_fraction``.
    grid_top_fraction: α, the share of the grid budget spent on the top-level counts; the leaves get 1 − α
        (Qardaji, Yang, Li, ICDE 2013, adaptive grids, α = 0.5).
    top_level: L, the top level is an L×L grid over the public extent ([Ada-code] 6).
    subdivision_constant: c₂ in the subdivision rule m = ⌈√(ñ·ε_leaf/c₂)⌉ (Qardaji et al. c/2 = 5).
    max_subdivision: public cap on m (bounds the number of leaf cells at L²·m_max²).
    transition_cap: C, the total weight one trajectory may put into the transition counts: each of its n
        transitions counts min(1, C/n), so the L1 sensitivity of the transition vector is C (C = 1 is the
        Java code's per-trajectory normalisation by n).
    max_length: public cap (in leaf cells) on a route length; the domain of the noisy median and the longest
        synthetic trajectory (longer real routes count as ``max_length``; [Ada-code] precomputes 100 steps).
    length_model: "detour_histogram" (default) or "median". "median" is DP-STAR's median length estimation (a
        noisy median per trip). "detour_histogram" releases one noisy histogram of the detour, route length −
        (hop distance between the end leaves + 1), over {0..max_length−1}, and samples it for every synthetic
        trajectory, so a trip's length is its shortest route plus a detour (the Java code also models the
        extra length beyond the shortest route, but per trip and fitted on raw data). Default because it keeps
        the spread of lengths a median drops: length-histogram JSD 0.05 vs 0.32 on 300 T-Drive taxis, ε = 5.
    length_global_fraction: γ ("median" model only), the share of the length budget spent on ONE global noisy median (all
        trajectories); the per-trip medians get 1 − γ. Trips too small for their own median use the global one.
    n_synthetic: number of synthetic trajectories; ``None`` (default) uses the noisy trajectory count, the
        unclipped sum of the noisy trip counts (post-processing, no extra budget).
    trip_threshold: noisy trip counts below it get probability 0 in synthesis (post-processing that removes
        most of the mass that Laplace noise puts on the L⁴ empty trips); "auto" = b_trip·ln(L⁴), about the
        largest value pure noise reaches; ``None`` = clip at 0 only (the Java code).
    attack_resilience: run the three resilience checks of Sec. 5.2 / [Ada-code] (Bayesian inference, partial
        sniffing, outlier leakage). The sniffing and outlier checks read the raw data, which voids the DP
        proof of the released output (see :func:`mechanisms.adatrace.guarantee`); default False.
    resilience_reads_raw: with ``attack_resilience``, run the two checks that read raw data (partial sniffing
        and the plausible-deniability part of outlier leakage) as the paper does (True, default), or only the
        synopsis-only checks (Bayesian inference, rare-cell location outliers), which keep the ε-DP proof.
    bayes_threshold: ϑ, the largest allowed JSD (natural log) between prior and posterior ([Ada-code] 0.1).
    sensitive_zone_rank / sniff_region_rank: the sensitive zone and the sniff region are the leaves with this
        rank in the NOISY leaf density ([Ada-code] 10th and 12th densest cell, ranked on raw data there).
    sniff_shared_cells: a sniffed real trajectory's best DTW match fails when it shares at least this many
        distinct leaf cells with it ([Ada-code] INTERSECTION_THRESHOLD = 5).
    outlier_neighbours, n_outliers, closest_fraction, deniability_kappa, deniability_beta: the outlier test
        ([Ada-code] k = 50 nearest neighbours, top 200 outliers, 0.1·diag, κ = 100, β = 0.05).
    rare_leaf_density: a synthetic trajectory that visits a leaf whose noisy density is below this value is a
        location-visit outlier and is dropped (our synopsis-only replacement of the Java's DTW test).
    max_resilience_rounds: rounds of the Bayesian re-generation loop before the remaining zone-crossing
        trajectories are dropped.
    neighbouring: "add_remove" (sensitivities as stated) or "replace" (every sensitivity doubles).
    max_records_per_object: the caller's cap on trajectory records per object; recorded for the object-level
        statement of the guarantee (group privacy), not enforced here.
    """

    scope = _P

    epsilon: float = 5.0
    budget_split: tuple[float, float, float, float] = (0.05, 0.35, 0.50, 0.10)
    grid_top_fraction: float = 0.5
    top_level: int = 6
    subdivision_constant: float = 5.0
    max_subdivision: int = 8
    transition_cap: float = 1.0
    max_length: int = 100
    length_model: str = "detour_histogram"
    length_global_fraction: float = 0.5
    n_synthetic: int | None = None
    trip_threshold: float | str | None = "auto"
    attack_resilience: bool = False
    resilience_reads_raw: bool = True
    bayes_threshold: float = 0.1
    sensitive_zone_rank: int = 10
    sniff_region_rank: int = 12
    sniff_shared_cells: int = 5
    outlier_neighbours: int = 50
    n_outliers: int = 200
    closest_fraction: float = 0.1
    deniability_kappa: int = 100
    deniability_beta: float = 0.05
    rare_leaf_density: float = 1.0
    max_resilience_rounds: int = 10
    neighbouring: str = "add_remove"
    max_records_per_object: int | None = None

    def __post_init__(self) -> None:
        _P.require_real(self.epsilon, "epsilon", 0)
        split = self.budget_split
        if isinstance(split, list):
            object.__setattr__(self, "budget_split", tuple(split))
            split = self.budget_split
        if not isinstance(split, tuple) or len(split) != 4:
            raise ParameterError(f"budget_split must be four fractions (grid, markov, trip, length), got {split!r}",
                                 _P.where("budget_split"))
        for w in split:
            _P.require_real(w, "budget_split", 0, 1)
        if abs(math.fsum(split) - 1.0) > 1e-9:
            raise ParameterError(f"budget_split must sum to 1, got {math.fsum(split)!r}", _P.where("budget_split"))
        _P.require_real(self.grid_top_fraction, "grid_top_fraction", 0, 1)
        if self.grid_top_fraction >= 1:
            raise ParameterError("grid_top_fraction must be < 1 (the leaves need budget)",
                                 _P.where("grid_top_fraction"))
        _P.require_int(self.top_level, "top_level", 1)
        _P.require_real(self.subdivision_constant, "subdivision_constant", 0)
        _P.require_int(self.max_subdivision, "max_subdivision", 1)
        _P.require_real(self.transition_cap, "transition_cap", 0)
        _P.require_int(self.max_length, "max_length", 2)
        _P.require_choice(self.length_model, "length_model", LENGTH_MODELS)
        _P.require_real(self.length_global_fraction, "length_global_fraction", 0, 1)
        if self.length_global_fraction >= 1:
            raise ParameterError("length_global_fraction must be < 1 (the per-trip medians need budget)",
                                 _P.where("length_global_fraction"))
        _P.require_optional_int(self.n_synthetic, "n_synthetic", 0)
        if self.trip_threshold not in (None, "auto"):
            _P.require_real(self.trip_threshold, "trip_threshold", 0, open_low=False)
        _P.require_bool(self.attack_resilience, "attack_resilience")
        _P.require_bool(self.resilience_reads_raw, "resilience_reads_raw")
        _P.require_real(self.bayes_threshold, "bayes_threshold", 0, math.log(2))
        _P.require_int(self.sensitive_zone_rank, "sensitive_zone_rank", 1)
        _P.require_int(self.sniff_region_rank, "sniff_region_rank", 1)
        _P.require_int(self.sniff_shared_cells, "sniff_shared_cells", 1)
        _P.require_int(self.outlier_neighbours, "outlier_neighbours", 1)
        _P.require_int(self.n_outliers, "n_outliers", 0)
        _P.require_real(self.closest_fraction, "closest_fraction", 0, 1)
        _P.require_int(self.deniability_kappa, "deniability_kappa", 1)
        _P.require_real(self.deniability_beta, "deniability_beta", 0, 1)
        _P.require_real(self.rare_leaf_density, "rare_leaf_density", 0, open_low=False)
        _P.require_int(self.max_resilience_rounds, "max_resilience_rounds", 0)
        _P.require_choice(self.neighbouring, "neighbouring", NEIGHBOURING_RELATIONS)
        _P.require_optional_int(self.max_records_per_object, "max_records_per_object", 1)


    # --- the budget ------------------------------------------------------------------------------------------

    @property
    def budget(self) -> dict[str, float]:
        """ε of each component: grid_top, grid_leaf, markov, trip, then length_global and length_trip (model
        "median") or length_detour (model "detour_histogram"). The last part is ε minus the others, lowered by
        a few ulps if needed, so the exact sum of the floating-point parts never exceeds ε (and is within
        ~1e-15·ε of it)."""
        g, m, t, _ = self.budget_split
        eps = self.epsilon
        grid = eps * g
        top = grid * self.grid_top_fraction
        parts = {"grid_top": top, "grid_leaf": grid - top, "markov": eps * m, "trip": eps * t}
        length = eps - math.fsum(parts.values())
        if self.length_model == "detour_histogram":
            parts["length_detour"] = length
        else:
            parts["length_global"] = length * self.length_global_fraction
            parts["length_trip"] = length - parts["length_global"]
        last = next(reversed(parts))
        while math.fsum(parts.values()) > eps:
            parts[last] = math.nextafter(parts[last], 0.0)
        return parts

    @property
    def reads_raw_after_synopsis(self) -> bool:
        """Whether anything after the noisy synopsis reads the raw data (then the output is not proven DP)."""
        return self.attack_resilience and self.resilience_reads_raw

    @property
    def neighbour_factor(self) -> int:
        """1 under add/remove, 2 under replace (a replaced record is one removal plus one addition)."""
        return 1 if self.neighbouring == "add_remove" else 2

    @property
    def sensitivity(self) -> dict[str, float]:
        """L1 sensitivity of each released vector (the length parts: of the exponential mechanism's utility).

        grid_top, grid_leaf: a trajectory adds (points in cell)/(its points) to each cell: weights ≥ 0 that sum
        to 1. markov: each of its n transitions adds min(1, C/n): total ≤ C. trip: one count. length_global,
        length_trip: the utility −|#{<x} − #{>x}| of a median changes by at most 1 (per trip: each trajectory
        is in one trip, so the per-trip draws compose in parallel). length_detour: one count per trajectory.
        """
        f = self.neighbour_factor
        base = {"grid_top": 1.0 * f, "grid_leaf": 1.0 * f, "markov": float(self.transition_cap) * f,
                "trip": 1.0 * f}
        if self.length_model == "detour_histogram":
            return {**base, "length_detour": 1.0 * f}
        return {**base, "length_global": 1.0 * f, "length_trip": 1.0 * f}

    @property
    def noise_scale(self) -> dict[str, float]:
        """Laplace scale b = Δ/ε_part of each noisy count vector (the length parts: Δu/ε)."""
        eps, sens = self.budget, self.sensitivity
        return {k: sens[k] / eps[k] for k in eps}

    @property
    def trip_cut(self) -> float:
        """The trip threshold in use (:attr:`trip_threshold` resolved; public inputs only)."""
        if self.trip_threshold is None:
            return 0.0
        if self.trip_threshold == "auto":
            return self.noise_scale["trip"] * math.log(self.top_level ** 4) if self.top_level > 1 else 0.0
        return float(self.trip_threshold)

    @property
    def confident_trip_count(self) -> float:
        """A trip needs at least this noisy count for its own noisy median to be used: below it the exponential
        mechanism over {1..max_length} is close to uniform (its utility gap 2Δu·ln(max_length)/ε_length is not
        reached). Public inputs only."""
        if self.length_model != "median":
            return math.inf
        return 2.0 * self.sensitivity["length_trip"] * math.log(self.max_length) / self.budget["length_trip"]
