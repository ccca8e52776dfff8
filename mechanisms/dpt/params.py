"""Parameters of DPT and the privacy constants derived from them (budget split, sensitivities, noise scales).

He, Cormode, Machanavajjhala, Procopiuc, Srivastava, "DPT: Differentially private trajectory synthesis using
hierarchical reference systems", PVLDB 8(11), 2015. The decisions that are ours, not the paper's, are listed in
the package docstring (:mod:`mechanisms.dpt`).
"""

from __future__ import annotations

from dataclasses import dataclass

from trajpub.errors import ParameterError
from trajpub.params import Params, Scope

_P = Scope("dpt")

#: The eight moves to a neighbouring cell, ``(d_col, d_row)``, indexed by angle in steps of 45 degrees
#: (0 = east, 2 = north, 4 = west, 6 = south), so the turn between moves i and j is min(|i−j|, 8−|i−j|)·45°.
DIRECTIONS: tuple[tuple[int, int], ...] = ((1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1))
N_DIRECTIONS = len(DIRECTIONS)


@dataclass(frozen=True)
class DptParams(Params):
    """Public parameters of one DPT release; none of them may be derived from the data.

    epsilon: total budget ε (survey default 5.0). It is split into four parts that sum to ε exactly
        (:meth:`budget`): ``select_fraction`` (model selection: noisy numbers of distinct tree nodes),
        ``length_fraction`` (noisy length histograms, which also give the systems' sizes and the number of
        synthetic trajectories), ``start_fraction`` (noisy start-cell histograms) and the rest for the noisy
        prefix-tree node counts. Each trajectory belongs to exactly one reference system, so the systems
        compose in parallel: every system's tree uses the whole tree part.
    n_levels: number of hierarchical reference systems; system k has square cells of 2**k base-grid cells
        (cell size s·2**k for the release grid's s), so it models moves up to about s·2**k per fix.
    max_order: the largest Markov order l the model selection may pick; a system of order l keeps a prefix
        tree of height l+1 (node counts at depths 2..l+1; depth D is a sequence of D cells).
    max_transitions: public per-trajectory bound m: after discretisation a trajectory keeps its first m moves
        (m+1 cells). It bounds the L1 sensitivity of the depth-D node counts by m+2−D.
    jump_tolerance: a trajectory goes to the finest system in which at most this fraction of its moves jump
        over a cell (Chebyshev distance > 1); jumps that remain are filled by straight-line interpolation.
    snr: model selection keeps depth h of a system when the estimated mean count per occupied depth-h node is at
        least ``snr`` times that depth's Laplace scale; at synthesis a context is used only when its noisy
        child total is at least ``snr`` standard deviations of that total's noise (back-off otherwise).
    direction_decay: γ in (0, 1]: a candidate move that turns by j·45° from the previous move has its Markov
        probability multiplied by γ**j (direction-weighted sampling); 1.0 switches the weighting off. The default
        0.8 was chosen by us on the T-Drive sample (300 taxis, ε = 5): it brings the share of straight moves of
        the order-1 synthesis (15% unweighted) to the data's 22%, while 0.5 overshoots (36%) and degrades the
        spatial density. It is a fixed public default, never tuned on the data being released.
    weight_order1_only: apply the direction weights only to moves drawn from an order-1 context (default True).
        An order ≥ 2 context already contains the previous move, so weighting it again double-counts
        straightness (on T-Drive with ε huge, γ = 0.5 on every move raised straight moves from 22% to 41%).
    n_synthetic: number of synthetic trajectories; ``None`` (default) uses the noisy trajectory count from the
        length histograms (already paid for); an integer is a public choice.
    max_nodes: refuse a model whose dense node arrays would exceed this many counts (memory bound).
    max_records_per_object: the caller's cap on trajectory records per object (person, vehicle); only recorded
        here and used for the object-level statement of the guarantee (group privacy), as in prefix_tree.
    """

    scope = _P

    epsilon: float = 5.0
    n_levels: int = 3
    max_order: int = 3
    max_transitions: int = 30
    jump_tolerance: float = 0.1
    select_fraction: float = 0.05
    length_fraction: float = 0.1
    start_fraction: float = 0.1
    snr: float = 1.0
    direction_decay: float = 0.8
    weight_order1_only: bool = True
    n_synthetic: int | None = None
    max_nodes: int = 20_000_000
    max_records_per_object: int | None = None

    def __post_init__(self) -> None:
        _P.require_real(self.epsilon, "epsilon", 0)
        _P.require_int(self.n_levels, "n_levels", 1)
        if self.n_levels > 12:
            raise ParameterError(f"n_levels must be <= 12, got {self.n_levels}", _P.where("n_levels"))
        _P.require_int(self.max_order, "max_order", 1)
        if self.max_order > 6:
            raise ParameterError(f"max_order must be <= 6, got {self.max_order}", _P.where("max_order"))
        _P.require_int(self.max_transitions, "max_transitions", 1)
        if self.max_transitions < self.max_order:
            raise ParameterError(
                f"max_transitions ({self.max_transitions}) must be >= max_order ({self.max_order}): a shorter "
                "trajectory cannot reach the deepest tree level", _P.where("max_transitions"))
        _P.require_real(self.jump_tolerance, "jump_tolerance", 0, 1, open_low=False)
        for name in ("select_fraction", "length_fraction", "start_fraction"):
            _P.require_real(getattr(self, name), name, 0, 1)
        if self.select_fraction + self.length_fraction + self.start_fraction >= 1:
            raise ParameterError(
                "select_fraction + length_fraction + start_fraction must be < 1 (the rest is the tree's budget)",
                _P.where("start_fraction"))
        _P.require_real(self.snr, "snr", 0, open_low=False)
        _P.require_real(self.direction_decay, "direction_decay", 0, 1)
        _P.require_bool(self.weight_order1_only, "weight_order1_only")
        _P.require_optional_int(self.n_synthetic, "n_synthetic", 0)
        _P.require_int(self.max_nodes, "max_nodes", 1)
        _P.require_optional_int(self.max_records_per_object, "max_records_per_object", 1)



    # --- the budget and the sensitivities ------------------------------------------------------------------

    def budget(self) -> dict[str, float]:
        """The ε parts ``select``, ``length``, ``start``, ``tree``; they sum to ε (the tree gets the remainder)."""
        select = self.epsilon * self.select_fraction
        length = self.epsilon * self.length_fraction
        start = self.epsilon * self.start_fraction
        return {"select": select, "length": length, "start": start, "tree": self.epsilon - select - length - start}

    @property
    def max_height(self) -> int:
        """The deepest tree the selection may pick: max_order + 1 cells per node."""
        return self.max_order + 1

    def depth_sensitivity(self, depth: int) -> int:
        """L1 sensitivity of one system's depth-D node counts under add/remove of one trajectory.

        A kept trajectory has n ≤ m+1 cells (m = max_transitions) and holds n−D+1 windows of D cells, each adding
        1 to one node; the trajectory lies in one system only, so the whole count vector over all systems moves
        by at most m+2−D.
        """
        if depth < 2:
            raise ValueError("tree depths start at 2 (one move)")
        return max(self.max_transitions + 2 - depth, 0)

    def select_sensitivity(self) -> int:
        """L1 sensitivity of the selection vector (distinct occupied nodes at depths 2..max_height, per system).

        One trajectory creates or removes at most n−D+1 ≤ m+2−D distinct depth-D nodes, all in its own system.
        """
        return sum(self.depth_sensitivity(d) for d in range(2, self.max_height + 1))

    def select_scale(self) -> float:
        """Laplace scale of the selection counts: select_sensitivity / ε_select."""
        return self.select_sensitivity() / self.budget()["select"]

    def length_scale(self) -> float:
        """Laplace scale of the length histograms: one trajectory adds 1 to one bin of one system (Δ = 1)."""
        return 1.0 / self.budget()["length"]

    def start_scale(self) -> float:
        """Laplace scale of the start-cell histograms: one trajectory adds 1 to one cell of one system (Δ = 1)."""
        return 1.0 / self.budget()["start"]

    def depth_budgets(self, height: int) -> dict[int, float]:
        """ε_D for depths 2..height of a tree of that height: ε_tree split in proportion to the sensitivities.

        With ε_D ∝ Δ_D every depth gets the same Laplace scale Δ_D/ε_D = ΣΔ/ε_tree (:meth:`tree_scale`), and
        Σ_D ε_D = ε_tree.
        """
        total = sum(self.depth_sensitivity(d) for d in range(2, height + 1))
        eps_tree = self.budget()["tree"]
        return {d: eps_tree * self.depth_sensitivity(d) / total for d in range(2, height + 1)}

    def tree_scale(self, height: int) -> float:
        """The common Laplace scale of all node counts of a tree of this height: Σ_{D=2}^{height} Δ_D / ε_tree."""
        return sum(self.depth_sensitivity(d) for d in range(2, height + 1)) / self.budget()["tree"]
