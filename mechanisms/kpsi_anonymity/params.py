"""Parameters of a (k-Ψ)-anonymity release: Chen, Li, Zhang (2020), §7 defaults, with
the choices A1–A16 of docs/design.md, (k-Ψ)-anonymity.

Every field is public and fixed before the data is read. The paper's own choices are the defaults where it has
one (k = 8, ε = 1, the range-based noise scale, ε per axis); the rest are our reconstructions.
"""

from __future__ import annotations

from dataclasses import dataclass

from trajpub.errors import ParameterError
from trajpub.params import Params, Scope

PSI_MODES = ("segment", "point", "constant")
NOISE_SCALES = ("paper", "diameter", "data_independent")
EPSILON_SEMANTICS = ("paper_per_axis", "per_location", "per_trajectory")
LINKINGS = ("reachable", "index")
ON_INFEASIBLE = ("raise", "suppress_trajectory")

_P = Scope("kpsi_anonymity", resolved=("road_network",))


@dataclass(frozen=True)
class KPsiParams(Params):
    """Public parameters of the two phases (Alg. 1 and 2).

    Anonymity (Phase 1, §4.2, Alg. 1):
    k: anonymity degree, trajectories per published set (1 real + k−1 dummies); paper 8.
    psi_mode: how δ_i is chosen (A1, ours): "segment" (default; δ_i = clip(max(δ_seg(e_real),
    (1+μ)·r_k(p)),
        δ_min, δ_max) with δ_seg(e) = clip((1+μ)·max r_k over the edge's endpoints and midpoint)), "point"
        (δ_i = clip((1+μ)·r_k(p), δ_min, δ_max)) or "constant" (the (k-δ) ablation: δ_i = ``delta_m``).
        r_k(p) is the distance from p to its k-th nearest edge.
    delta_m: δ of the "constant" mode, metres; None takes the largest δ_seg of the network (feasible at
        every edge's anchors). Required for "constant" without a road network.
    delta_min_m, delta_max_m: the clip of adaptive δ_i (our defaults 50 m and 500 m).
    mu: margin on r_k (0.1). growth, max_grow: an infeasible disc (fewer than k−1 usable edges) is widened by
        ``growth`` up to ``max_grow`` times, never beyond δ_max (A4); "constant" never grows.
    min_part_m: ℓ_min, the least length an edge must have inside the disc to host a dummy (1 m).
    min_separation_m: d_sep, the least distance between any two of the k locations at one timestamp (1 m).
    max_tries: draws per timestamp before the trajectory is declared infeasible (replaces the paper's GOTO 3).
    on_infeasible: "raise" (default; :class:`InfeasibleError`) or "suppress_trajectory" (the trajectory is
        left out of the release and reported in the status).
    linking: how dummy locations are chained over time (A5): "reachable" (default, ours; each dummy moves
        to an edge within network distance B_i = min(κ·max(v_i, v_floor)·Δt_i, max_link_budget_m) of its
        previous position, v_i the real object's speed) or "index" (the paper's Alg. 1: independent per step).
    kappa, v_floor_mps, max_link_budget_m: the travel budget of "reachable" (1.5, 5 m/s, 1000 m).
    road_aware: place dummies on road edges (the paper's method, default) or uniformly in the disc (the
    paper's
        Fig. 6 baseline and the fallback when no road network exists; dummies may then be off-road).
    snap_real: move each real location onto its nearest edge before Phase 1 (A14), so that a real GPS
    point
        off the road does not stand out among on-road dummies; costs utility.

    Perturbation (Phase 2, §5.2–5.3, Alg. 2):
    epsilon: the privacy parameter; its meaning is set by ``epsilon_semantics``: "paper_per_axis" (default,
        the paper: ε per axis per location, i.e. 2ε per location and 2nε per trajectory), "per_location"
        (ε/2 per axis) or "per_trajectory" (ε/(2n) per axis for a trajectory of n points).
    noise_scale: Δ in b = Δ/ε_axis: "paper" (the coordinate range of the k locations at the timestamp, per
        axis; data-dependent, A6), "diameter" (2δ_i; depends on the data through δ_i) or
        "data_independent" (2·δ_cap with δ_cap = δ_max, or δ in "constant" mode; leaks nothing).
    noise_floor_m: r_floor, the least Δ (A8), so that b > 0 (1 m).
    """

    scope = _P

    k: int = 8
    epsilon: float = 1.0
    epsilon_semantics: str = "paper_per_axis"
    noise_scale: str = "paper"
    noise_floor_m: float = 1.0
    psi_mode: str = "segment"
    delta_m: float | None = None
    delta_min_m: float = 50.0
    delta_max_m: float = 500.0
    mu: float = 0.1
    growth: float = 1.25
    max_grow: int = 8
    min_part_m: float = 1.0
    min_separation_m: float = 1.0
    max_tries: int = 50
    on_infeasible: str = "raise"
    linking: str = "reachable"
    kappa: float = 1.5
    v_floor_mps: float = 5.0
    max_link_budget_m: float = 1000.0
    road_aware: bool = True
    snap_real: bool = False

    def __post_init__(self) -> None:
        _P.require_int(self.k, "k", 2)
        _P.require_real(self.epsilon, "epsilon", 0.0)
        _P.require_choice(self.epsilon_semantics, "epsilon_semantics", EPSILON_SEMANTICS)
        _P.require_choice(self.noise_scale, "noise_scale", NOISE_SCALES)
        _P.require_real(self.noise_floor_m, "noise_floor_m", 0.0)
        _P.require_choice(self.psi_mode, "psi_mode", PSI_MODES)
        _P.require_real(self.delta_min_m, "delta_min_m", 0.0)
        _P.require_real(self.delta_max_m, "delta_max_m", 0.0)
        if self.delta_max_m < self.delta_min_m:
            raise ParameterError(f"delta_max_m ({self.delta_max_m:g}) must be >= delta_min_m "
                                 f"({self.delta_min_m:g})", _P.where("delta_max_m"))
        if self.delta_m is not None:
            if self.psi_mode != "constant":
                raise ParameterError("delta_m is only used with psi_mode 'constant'", _P.where("delta_m"))
            _P.require_real(self.delta_m, "delta_m", 0.0)
        _P.require_real(self.mu, "mu", 0.0, open_low=False)
        _P.require_real(self.growth, "growth", 1.0)
        _P.require_int(self.max_grow, "max_grow", 0)
        _P.require_real(self.min_part_m, "min_part_m", 0.0)
        _P.require_real(self.min_separation_m, "min_separation_m", 0.0, open_low=False)
        _P.require_int(self.max_tries, "max_tries", 1)
        _P.require_choice(self.on_infeasible, "on_infeasible", ON_INFEASIBLE)
        _P.require_choice(self.linking, "linking", LINKINGS)
        _P.require_real(self.kappa, "kappa", 0.0)
        _P.require_real(self.v_floor_mps, "v_floor_mps", 0.0, open_low=False)
        _P.require_real(self.max_link_budget_m, "max_link_budget_m", 0.0)
        for flag in ("road_aware", "snap_real"):
            _P.require_bool(getattr(self, flag), flag)
        if self.snap_real and not self.road_aware:
            raise ParameterError("snap_real needs a road network (road_aware true)", _P.where("snap_real"))

    def epsilon_per_axis(self, n_points):
        """ε used for each axis of each location (§5.2, A7); ``n_points`` is the trajectory length
        (scalar or array), used by "per_trajectory" only."""
        if self.epsilon_semantics == "paper_per_axis":
            return self.epsilon + 0.0 * n_points
        if self.epsilon_semantics == "per_location":
            return self.epsilon / 2.0 + 0.0 * n_points
        return self.epsilon / (2.0 * n_points)
