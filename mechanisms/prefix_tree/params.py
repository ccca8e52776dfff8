"""Parameters of the noisy prefix tree and the constants derived from them.

Chen, Fung, Desai, "Differentially Private Trajectory Data Publication" (arXiv:1112.2020), Sec. IV-A;
the choices G1, G3, G7, G9 of docs/design.md, Prefix tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trajpub.errors import ParameterError
from trajpub.params import Params, Scope

EXPANSION_POLICIES = ("parent_bound", "literal", "min_expand_count")
CONSISTENCY_MODES = ("projected", "paper", "none")
ROUNDING_MODES = ("half_up", "stochastic")
NEIGHBOURING_RELATIONS = ("add_remove", "replace")


_P = Scope("prefix_tree")


@dataclass(frozen=True)
class PrefixTreeParams(Params):
    """Public parameters of one prefix-tree release; none of them may be derived from the data.

    epsilon: total budget ε, split uniformly over the levels, ε̄ = ε/h (Sec. IV-A; no adaptive split, G2).
    height: h, the number of noisy levels; longer trajectories are truncated to their h-prefix (G5, G10). The
        default is 3 (it was 12): each level gets ε/h, and on the T-Drive sample (taxi-days of dozens of cells)
        deeper trees released noise: at ε = 1 on 4 km cells, pattern F1 0.005 at h = 12 against 0.21 at h = 3,
        density JSD 0.33 against 0.23 (``bench/DEFAULTS_RESULTS.md``). A record is at most h cells long.
    expansion_policy: which noisy nodes are expanded at the next level (G1):
        "literal" expands every node, as Procedure 1 does; the tree grows like (p_θ·|L|)^depth when
        p_θ·|L| ≥ 1, so it is only usable for |L| < 34. "parent_bound" keeps at most ⌊c(v)/θ⌋ children of
        a non-root node v (those with the largest noisy counts). "min_expand_count" expands v only when
        c(v) ≥ min_expand_count. Both deviations look only at released noisy counts, so they cost no budget.
    min_expand_count: θ_exp, required by "min_expand_count"; optional with "parent_bound", where it adds
        the same expansion test (needed for large |L|: parent_bound alone still grows geometrically, because
        the child it keeps is the largest of about p_θ·|L| spurious candidates); not allowed with "literal".
        An expanded spurious node has on average p_θ·|L|·exp(−(θ_exp − θ)/b) expanded spurious children,
        so spurious subtrees stay finite when θ_exp > θ + b·ln(p_θ·|L|) (≈ 2.2·θ for |L| = 1000); see
        :meth:`subcritical_expand_count`. The default "auto" is that subcritical value under "parent_bound"
        (computed from public inputs when |L| is known, :meth:`expand_threshold`) and no threshold under
        "literal"; ``None`` means no threshold.
    max_nodes: the build raises when the tree plus the candidates of the level being built would exceed
        this many nodes (never truncates silently); it also bounds memory.
    consistency: "projected" (default, G7), "paper" (the literal top-down formula of Sec. IV-B, G6) or
        "none" (the paper's "Basic" release without constrained inference, Sec. IV-B).
    rounding: "half_up" or "stochastic" (unbiased floor + Bernoulli) for terminating counts (G9).
    neighbouring: "add_remove" (the paper's relation, per-level sensitivity 1) or "replace" (sensitivity 2,
        which doubles the Laplace scale and θ, G3).
    max_records_per_object: the caller's cap on records per object (person, vehicle); it is not enforced
        here, only recorded and used for the object-level statement of the guarantee (group privacy).
    """

    scope = _P

    epsilon: float = 1.0
    height: int = 3
    expansion_policy: str = "parent_bound"
    min_expand_count: float | str | None = "auto"
    max_nodes: int = 10_000_000
    consistency: str = "projected"
    rounding: str = "half_up"
    neighbouring: str = "add_remove"
    max_records_per_object: int | None = None

    def __post_init__(self) -> None:
        _P.require_real(self.epsilon, "epsilon", 0)
        _P.require_int(self.height, "height", 1)
        _P.require_choice(self.expansion_policy, "expansion_policy", EXPANSION_POLICIES)
        if self.expansion_policy == "min_expand_count":
            if self.min_expand_count in (None, "auto"):
                raise ParameterError(
                    "expansion_policy 'min_expand_count' needs min_expand_count (θ_exp)",
                    _P.where("min_expand_count"),
                )
            _P.require_real(self.min_expand_count, "min_expand_count", 0)
        elif self.min_expand_count == "auto":
            pass
        elif self.min_expand_count is not None:
            if self.expansion_policy == "literal":
                raise ParameterError(
                    "min_expand_count cannot be combined with expansion_policy 'literal', which expands "
                    "every node",
                    _P.where("min_expand_count"),
                )
            _P.require_real(self.min_expand_count, "min_expand_count", 0)
        _P.require_int(self.max_nodes, "max_nodes", 1)
        _P.require_choice(self.consistency, "consistency", CONSISTENCY_MODES)
        _P.require_choice(self.rounding, "rounding", ROUNDING_MODES)
        _P.require_choice(self.neighbouring, "neighbouring", NEIGHBOURING_RELATIONS)
        if self.max_records_per_object is not None:
            _P.require_int(self.max_records_per_object, "max_records_per_object", 1)

    @property
    def sensitivity(self) -> int:
        """L1 sensitivity of one level's candidate count vector: 1 under add/remove, 2 under replace (G3)."""
        return 1 if self.neighbouring == "add_remove" else 2

    @property
    def epsilon_bar(self) -> float:
        """Per-level budget ε̄ = ε/h (Sec. IV-A, uniform allocation)."""
        return self.epsilon / self.height

    @property
    def laplace_scale(self) -> float:
        """Laplace scale b = Δ/ε̄ of NoisyCount (Thm 3.1); Δ = 1 in the paper."""
        return self.sensitivity / self.epsilon_bar

    @property
    def theta(self) -> float:
        """Non-emptiness threshold θ = 2√2/ε̄, two standard deviations of the noise (Sec. IV-A), times Δ."""
        return 2.0 * math.sqrt(2.0) * self.laplace_scale

    @property
    def p_theta(self) -> float:
        """Pr[Laplace(b) ≥ θ] = exp(−θ/b)/2 = exp(−2√2)/2 ≈ 0.0295529 for every ε and h (Thm 4.1)."""
        return 0.5 * math.exp(-self.theta / self.laplace_scale)

    def subcritical_expand_count(self, n_locations: int, branching: float = 0.5) -> float:
        """θ_exp at which an expanded spurious node has on average ``branching`` expanded spurious children.

        An expanded node gets about p_θ·|L| spurious children (Thm 4.1), each with count θ + Exp(b); one of
        them reaches θ_exp with probability exp(−(θ_exp − θ)/b). Solving p_θ·|L|·exp(−(θ_exp − θ)/b) =
        branching gives θ_exp = θ + b·ln(p_θ·|L|/branching), never below θ. Public inputs only, so using it
        as ``min_expand_count`` is DP-safe.
        """
        return self.theta + self.laplace_scale * max(math.log(self.p_theta * n_locations / branching), 0.0)

    def expand_threshold(self, n_locations: int) -> float | None:
        """The θ_exp a build over |L| = ``n_locations`` uses: "auto" resolved (see the class docstring)."""
        if self.min_expand_count == "auto":
            return self.subcritical_expand_count(n_locations) if self.expansion_policy == "parent_bound" else None
        return self.min_expand_count
