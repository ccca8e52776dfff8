"""Parameters of CityTrace and the privacy constants derived from them (budget split, noise scales).

As in ObjTrace (:mod:`mechanisms.objtrace.params`), every released statistic is a histogram to which one object
contributes a vector of L1 norm at most 1, except the record count (at most ``max_records_per_object``). The
density (each object's most visited cells, 1/k each) is a quadtree whose levels share the density's ε
geometrically (:meth:`CityTraceParams.level_epsilons`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields

from mechanisms.objtrace.params import check_model_fields, histogram_edges
from trajpub.errors import ParameterError
from trajpub.grid import GridSpec
from trajpub.params import Scope

_P = Scope("citytrace")

#: The released statistics, in the order they are drawn; each gets ``epsilon * share`` (:meth:`budget`).
PARTS = ("records", "length", "end", "density", "moves", "weekday", "hour", "pace", "step")
HOURS = 24
DENSITY_MODELS = ("quadtree", "privtree")


@dataclass(frozen=True)
class CityTraceParams:
    """Public parameters of one CityTrace release; none of them may be derived from the data.

    epsilon: ε per object (the privacy unit is the object: all its trajectory records together).
    cell_size_m: side of the fine model cells (the walks' reference system, DPT's discretisation at this size).
    region_size_m: side of the start-time regions (the local hour-of-day histogram is per region).
    quadtree_levels: K: the density is released at levels 0..K (blocks of 2**k x 2**k fine cells). K = 4
        (16 km blocks at the top): per object the fine cells' counts are far below their noise (on the tuning half
        the hottest 1 km cell holds 1.3 of the 144 taxis' unit masses, the hottest 2 km block 4.1, the hottest
        4 km block 13.3, against Laplace scales of 4.4, 2.7 and 1.7 at levels 0, 1, 2 by default), so the 1.5 km
        detail comes from the 4 km level, and the 2 km one where a block's counts clear the noise; a fifth,
        32 km level (K = 5) took its share from them and measured worse on the tuning half (pattern F1 at 1.5 km
        0.25 against 0.30, 6 seeds, by point share; 0.358 against 0.383, seeds 0-23, with ``density_cells``).
    level_ratio: r in (0, 4]: level k (0 = fine cells) gets a share of the density's ε proportional to r**k, a
        geometric budget (Cormode et al., ICDE 2012, Sec. 4.2). Their optimum for range queries with
        least-squares post-processing gives the fine levels more (r = 2**(-1/3)); our estimate is top-down (a
        coarse block's error reaches all its cells, and its precision decides where finer counts are read),
        and on the tuning half r = 1.59 (coarse levels get more) beat r = 1 and r = 0.79 at 6 and 1.5 km.
    density_cells: k: each object adds 1/k to each of the k fine cells holding most of its points (all its cells,
        equally, if it has fewer; :func:`~.counting.top_cells_histogram`), L1 norm 1 as before, so every density
        level keeps sensitivity 1. Spread by point share, a taxi that waits hours in one cell put most of its unit
        there; with equal weights on its habitual cells the noisy density ranks the cells by how many taxis
        frequent them, which is what a walk's moves follow. Tuning half, seeds 0-23: pattern F1 at 1.5 km 0.324
        (by point share) -> 0.373, 0.365, 0.362 with k = 20, 30, 50 (transition 0.309 -> 0.303, 0.299, 0.294;
        density at 1.5 km 0.216 either way; at 6 km density 0.101 -> 0.111-0.114, pattern F1 0.608 -> 0.591,
        0.623, 0.625); seeds 24-39: 0.316 -> 0.361 (k = 30), 0.352 (k = 50). k = 50 costs the 6 km density least.
        The price: the circle query error (points where taxis wait weigh less) 0.419 -> 0.467 (k = 50, seeds 0-11).
    moves_level: L: the move directions are counted between blocks of 2**L x 2**L fine cells (first-order moves
        at the finest level where per-object counts clear the noise) and steer the fine walk inside each block.
    end_edges: edges (fine cells, increasing integers from 0) of the histogram of how far a record ends from
        where it starts, the Chebyshev distance between its first and last fine cells; the last bin holds every
        distance from the last edge on (a synthetic end there lies within as far again as the bin before it is
        wide). The synthetic end is a fine cell at the drawn distance, by the fine density (a gravity model,
        :func:`~.synthesis.end_cells`). ObjTrace's displacement vector histogram over [-D, D]² fine cells
        (3,721 bins at 30 km) is far below its noise per object: only the displacements near 0 cleared the
        threshold, and 62 % of the synthetic records ended in the 6 km cell they started in, against 37 % of the
        tuning half's. The bins are 1 cell wide up to 4 cells, then as wide as half their start (4-6, 6-8,
        8-12, ..., 32-48, the last from 48 on): both the short trips (0 and 1 cell: a taxi back where it started)
        and the long ones stay readable. Not tuned further: the edges 0, 1, 2, 4, ..., 64 gave the same trips
        at 6 km on the tuning half (0.394 against 0.389, seeds 0-11).
    length_edges: edges of the histogram of fine moves per record (increasing integers from 0); the last edge
        is the per-record truncation ``max_moves``.
    max_records_per_object: an object adds at most this many records to the noisy record count.
    pace_edges_s: edges (seconds per fine move, from 0) of the pace histogram; the last bin is open.
    step_edges: edges (from 0) of the histogram of each move's time relative to its record's pace; the last
        bin is open. Gives each synthetic move its own duration (stops, fast roads) at the record's pace.
    max_speed_kmh: a released segment takes at least its length at this speed (a public plausibility bound on
        the synthetic times, post-processing).
    max_duration_s: a record lasts at most this long (its pace is lowered to fit): records are cut at gaps and
        days by the preparation, so a pace and a length drawn independently must not make a week-long trip.
    direction_decay: γ in (0, 1]: a move turning by j·45° from the previous one is weighted γ**j (DPT).
    prior_weight: κ >= 0: each block's noisy direction counts get κ times their Laplace scale added to every
        direction before they are normalised (where they are noise, the walk follows the density).
    snr: the signal-to-noise rule of the quadtree and of the per-region hour histograms (as ObjTrace). 3 (2
        before) with the density on each taxi's most visited cells: on the tuning half pattern F1 at 1.5 km 0.359
        -> 0.386 (seeds 0-15) and 0.357 -> 0.378 (seeds 16-39), every other figure within a standard error
        (start-hour JSD 0.087 -> 0.088, circle query 0.467 -> 0.462, seeds 0-11); with the density by point
        share it made no difference (0.350 -> 0.348, seeds 0-7).
    shares: the fraction of ε of each part of :data:`PARTS` (positive, summing to 1). The density gets 0.71
        (0.6 before): it alone decides which 1.5 km cells the walks cross; the other parts are histograms over a
        few dozen bins whose mass (one unit per object) clears their noise at a few hundredths of ε (tuning half,
        6 seeds, with K = 4: pattern F1 at 1.5 km 0.30 -> 0.33, density 0.227 -> 0.220, trip-duration JSD
        0.012 -> 0.019; the start-hour JSD, 0.08-0.09, did not move with the hour's share).
    n_synthetic: number of synthetic records; None = the noisy record count.
    density_model: "quadtree" (the fixed-height quadtree over the model cells above) or "privtree": the density
        as a PrivTree decomposition of ``fine_cell_m`` cells whose depth follows the data (:mod:`.privtree`),
        each object adding 1/k to its k = ``density_cells`` most visited fine cells (L1 norm 1); the walks read
        its sums over the model cells and a point's position is drawn from it inside its model cell. Its own
        thresholds come from ε and the fanout only (:func:`.privtree.calibration`). Chosen on the San
        Francisco sample, all its cabs (so its San Francisco rows in ``bench/UTILITY_RESULTS.md`` are not held
        out; Beijing's are, and the defaults stay Beijing's): with 500 m model cells
        and k = 400 (125 m cells, seeds 0-2), against each object's points' shares (seeds 0-1): density JSD at
        500 m 0.14 either way, pattern F1 on the 128 grid 0.335 -> 0.347, the raw's 10 busiest 500 m cells
        kept within x1.5: 7.5 -> 7.7 (k = 200: 4.3, k = 1000: 2.3; this count is noisy).
    fine_cell_m: the finest cells of the PrivTree density; ``cell_size_m / fine_cell_m`` must be a power of two
        (the fine cells nest in the model cells).
    tree_share: the fraction (in (0, 0.95]) of the density's ε spent on PrivTree's split tests; the rest is
        shared evenly by the leaves' counts and the ``sub_levels`` partitions below them.
    sub_levels: J >= 0: below each leaf the counts of its descendants 1..J levels down (each depth a partition
        of the grid, sensitivity 1) refine the leaf's mass top-down (:func:`.privtree.refine`).
    point_spacing_m: None (a record's points are one per model cell it crosses) or a spacing: each released
        segment is written as points at most this far apart, linear in position and time
        (:func:`.points.densify`, post-processing). A walk's points are one per model cell, each drawn
        independently inside its cell, so consecutive points of a 500 m walk can skip cells of a 0.4 x 0.7 km
        grid. With the PrivTree variant, on the San Francisco tuning half (one-minute fixes), 250 m lifted pattern
        F1 on the 128 grid 0.343 -> 0.515 (seeds 2-7); on the T-Drive report half (about 3 minutes, 1.5 km
        cells that the walk never skips) it did not help: transition at 1.5 km 0.312 -> 0.328
        (``bench/UTILITY_RESULTS.md``).

    The timestamps lie in the release's window (a public input), each record's local day of week and start hour
    drawn from the noisy ``weekday`` and ``hour`` histograms as ObjTrace's (:func:`mechanisms.objtrace.synthesis.
    start_times`).
    """

    epsilon: float = 5.0
    cell_size_m: float = 1000.0
    region_size_m: float = 32000.0
    quadtree_levels: int = 4
    level_ratio: float = 1.59
    density_cells: int = 50
    moves_level: int = 2
    end_edges: tuple[int, ...] = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48)
    length_edges: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 160,
                                     200, 250, 300)
    max_records_per_object: int = 24
    pace_edges_s: tuple[float, ...] = (0, 15, 30, 45, 60, 90, 120, 180, 240, 300, 420, 600, 900, 1200, 1800)
    step_edges: tuple[float, ...] = (0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 2, 3, 5, 8)
    max_speed_kmh: float = 90.0
    max_duration_s: float = 86400.0
    direction_decay: float = 0.6
    prior_weight: float = 10.0
    snr: float = 3.0
    shares: tuple[float, ...] = (0.03, 0.03, 0.06, 0.71, 0.06, 0.02, 0.04, 0.025, 0.025)
    n_synthetic: int | None = None
    density_model: str = "quadtree"
    fine_cell_m: float = 125.0
    tree_share: float = 0.3
    sub_levels: int = 1
    point_spacing_m: float | None = None

    def __post_init__(self) -> None:
        check_model_fields(self, _P, PARTS)
        _P.require_real(self.level_ratio, "level_ratio", 0, 4)
        _P.require_int(self.density_cells, "density_cells", 1)
        _P.require_int(self.moves_level, "moves_level", 0)
        object.__setattr__(self, "end_edges", histogram_edges(self.end_edges, "end_edges", True, _P))
        object.__setattr__(self, "step_edges", histogram_edges(self.step_edges, "step_edges", False, _P))
        _P.require_real(self.max_speed_kmh, "max_speed_kmh", 0)
        _P.require_real(self.max_duration_s, "max_duration_s", 0)
        _P.require_choice(self.density_model, "density_model", DENSITY_MODELS)
        _P.require_real(self.fine_cell_m, "fine_cell_m", 0)
        ratio = self.cell_size_m / self.fine_cell_m
        if ratio < 1 or not math.isclose(2 ** round(math.log2(ratio)), ratio, rel_tol=1e-9):
            raise ParameterError(f"cell_size_m / fine_cell_m must be a power of two (>= 1), got {ratio:g}",
                                 _P.where("fine_cell_m"))
        _P.require_real(self.tree_share, "tree_share", 0, 0.95)
        _P.require_int(self.sub_levels, "sub_levels", 0)
        if self.point_spacing_m is not None:
            _P.require_real(self.point_spacing_m, "point_spacing_m", 0)
        if self.shares[-1] > 0.5:
            raise ParameterError(f"the last share ({PARTS[-1]}) must be at most 1/2, got {self.shares[-1]}",
                                 _P.where("shares"))

    @classmethod
    def from_dict(cls, d: dict) -> CityTraceParams:
        """Parameters from a release spec's mapping; an unknown key is an error, not ignored."""
        d = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        return _P.from_mapping(cls, d)

    def to_dict(self) -> dict:
        """The parameters as a JSON-serialisable mapping (round-trips through :meth:`from_dict`)."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}

    @property
    def max_moves(self) -> int:
        return self.length_edges[-1]

    def budget(self) -> dict[str, float]:
        """ε of each part of :data:`PARTS`; the last part gets ε minus the others (S >= ε/2 as its share is
        <= 1/2, so ε - S is exact, Sterbenz): the parts sum to ε."""
        parts = {name: self.epsilon * share for name, share in zip(PARTS[:-1], self.shares[:-1], strict=True)}
        parts[PARTS[-1]] = self.epsilon - sum(parts.values())
        return parts

    def level_epsilons(self) -> list[float]:
        """ε of each density level 0..K (0 = the fine cells): ∝ ``level_ratio**k``, the coarsest level gets the
        density's ε minus the others, so they sum to the density's ε (sequential composition over levels)."""
        eps = self.budget()["density"]
        weights = [self.level_ratio ** k for k in range(self.quadtree_levels + 1)]
        out = [eps * w / sum(weights) for w in weights[:-1]]
        return [*out, eps - math.fsum(out)]

    @property
    def fine_levels(self) -> int:
        """F: a model cell is 2**F x 2**F fine cells."""
        return round(math.log2(self.cell_size_m / self.fine_cell_m))

    def privtree_epsilons(self) -> tuple[float, float, list[float]]:
        """(ε of the split tests, ε of the leaves' counts, ε of each sub-level): the density's ε, the tests
        getting ``tree_share`` of it and the leaves and the J sub-levels the rest evenly (sequential
        composition: they sum to the density's ε)."""
        eps = self.budget()["density"]
        tree = eps * self.tree_share
        each = (eps - tree) / (self.sub_levels + 1)
        subs = [each] * self.sub_levels
        return tree, eps - tree - math.fsum(subs), subs

    def sensitivity(self, part: str) -> float:
        """L1 sensitivity of part ``part`` (of each density level) under adding or removing one object."""
        return float(self.max_records_per_object) if part == "records" else 1.0

    def scale(self, part: str) -> float:
        """Laplace scale of a non-spatial part: sensitivity / ε_part (the density's levels: :meth:`level_scales`)."""
        return self.sensitivity(part) / self.budget()[part]

    def level_scales(self) -> list[float]:
        """Laplace scale of each density level (sensitivity 1 each)."""
        return [1.0 / e for e in self.level_epsilons()]


def fine_grid(geometry, params: CityTraceParams) -> GridSpec:
    """The PrivTree density's fine cells over the release's bbox: same projection and origin as the model grid,
    so a model cell is exactly 2**F x 2**F of them (``geometry``: :class:`mechanisms.objtrace.geometry.Geometry`)."""
    return _grid(tuple(geometry.model.bbox), float(params.fine_cell_m))


@functools.lru_cache(maxsize=8)
def _grid(bbox: tuple[float, float, float, float], cell_m: float) -> GridSpec:
    """One GridSpec per bbox and cell size (its projection is built once: pyproj's transformers are slow to make)."""
    return GridSpec(bbox, cell_m)
