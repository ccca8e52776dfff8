"""Parameters of ObjTrace and the privacy constants derived from them (budget split, noise scales).

Every statistic ObjTrace releases is a histogram to which one object (taxi, person) contributes a vector of L1
norm at most 1 (its own records' histogram divided by its number of items, :mod:`.counting`), except the record
count, where an object contributes at most ``max_records_per_object``. So the Laplace scale of part k is
``1 / ε_k`` (record count: ``max_records_per_object / ε_records``), and the parts sum to ε.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from trajpub.errors import ParameterError
from trajpub.params import Params, Scope

_P = Scope("objtrace")

#: The released statistics, in the order they are drawn; each gets ``epsilon * share`` (:meth:`budget`).
PARTS = ("records", "length", "end", "density", "moves", "weekday", "hour", "pace")
SPATIAL_PARTS = ("density",)
"""The per-cell parts, released as quadtrees (:mod:`.quadtree`)."""
HOURS = 24
WEEKDAYS = 7


def check_model_fields(params, scope: Scope, parts: tuple[str, ...]) -> None:
    """The checks of the fields ObjTrace's and CityTrace's parameters share, errors named in ``scope``: sizes, the
    length and pace bins (stored normalised), the walk's prior, and ``shares`` (stored as floats): one positive
    fraction per budget part of ``parts``, summing to 1."""
    scope.require_real(params.epsilon, "epsilon", 0)
    scope.require_real(params.cell_size_m, "cell_size_m", 0)
    scope.require_real(params.region_size_m, "region_size_m", 0)
    scope.require_int(params.quadtree_levels, "quadtree_levels", 0)
    object.__setattr__(params, "length_edges", histogram_edges(params.length_edges, "length_edges", True, scope))
    scope.require_int(params.max_records_per_object, "max_records_per_object", 1)
    object.__setattr__(params, "pace_edges_s", histogram_edges(params.pace_edges_s, "pace_edges_s", False, scope))
    scope.require_real(params.direction_decay, "direction_decay", 0, 1)
    scope.require_real(params.prior_weight, "prior_weight", 0, open_low=False)
    scope.require_real(params.snr, "snr", 0, open_low=False)
    shares = tuple(float(s) for s in params.shares)
    if len(shares) != len(parts) or min(shares) <= 0 or abs(sum(shares) - 1) > 1e-9:
        raise ParameterError(f"shares must be {len(parts)} positive fractions ({', '.join(parts)}) summing "
                             f"to 1, got {params.shares}", scope.where("shares"))
    object.__setattr__(params, "shares", shares)
    scope.require_optional_int(params.n_synthetic, "n_synthetic", 0)


def histogram_edges(values: object, field: str, integers: bool, scope: Scope = _P) -> tuple:
    """Histogram edges: at least two, increasing, the first 0 (integers, or finite numbers); an error names
    ``field`` in ``scope``."""
    kind = (int,) if integers else (int, float)
    edges = tuple(values) if isinstance(values, list | tuple) else ()
    ok = len(edges) >= 2 and all(isinstance(e, kind) and not isinstance(e, bool) and math.isfinite(e) for e in edges)
    if not (ok and edges[0] == 0 and all(b > a for a, b in itertools.pairwise(edges))):
        raise ParameterError(f"{field} must be at least two increasing {'integers' if integers else 'numbers'} "
                             f"starting at 0, got {values!r}", scope.where(field))
    return edges if integers else tuple(float(e) for e in edges)


@dataclass(frozen=True)
class ObjTraceParams(Params):
    """Public parameters of one ObjTrace release; none of them may be derived from the data.

    epsilon: ε per object (the privacy unit is the object: all its trajectory records together).
    cell_size_m: side of the model's square cells over the release grid's public bbox (same projection). Moves
        are between neighbouring model cells (DPT's reference system at this cell size).
    region_size_m: side of the cells of the start-time regions (the local hour-of-day histogram is per region).
    quadtree_levels: K: the point density is released at levels 0..K, blocks of 2**k x 2**k
        model cells, each level with ε_part / (K + 1) (:mod:`.quadtree`).
    max_displacement: D: the end of a record relative to its start, in model cells, is histogrammed over
        [-D, D]² (farther ends are clipped to the border), the start/end calibration of the walk.
    length_edges: edges (moves per record, increasing integers from 0) of the length histogram; a record keeps
        its first ``max_moves`` = the last edge moves, and the last bin holds exactly that many.
    max_records_per_object: an object adds at most this many records to the noisy record count (the number of
        synthetic records); its other statistics are normalised (L1 norm 1), so this is the only count cap.
    pace_edges_s: edges (seconds per move, increasing, from 0) of the pace histogram; the last bin is open.
    direction_decay: γ in (0, 1]: a move turning by j·45° from the previous one is weighted γ**j (DPT).
    prior_weight: κ >= 0: each cell's noisy move counts are shrunk towards a density-guided prior of total mass
        ``8 κ b_moves`` (b_moves = the moves' Laplace scale), spread over the neighbours ∝ their noisy density.
    snr: a signal-to-noise rule: a region's start-hour histogram is used when its noisy total is >= ``snr``
        times its noise's standard deviation (else the all-region histogram); a quadtree block's children are
        read when its mass is >= ``snr`` times the noise on their total (else the block is split evenly).
    shares: the fraction of ε of each part of :data:`PARTS` (positive, summing to 1).
    n_synthetic: number of synthetic records; None = the noisy record count.

    The released timestamps lie in the release's window (a public input, :class:`trajpub.window.ReleaseWindow`),
    their local day of week and hour of day drawn from the noisy ``weekday`` and ``hour`` histograms, in the
    dataset's time zone (:mod:`.synthesis`).
    """

    scope = _P

    epsilon: float = 5.0
    cell_size_m: float = 4000.0
    region_size_m: float = 32000.0
    quadtree_levels: int = 3
    max_displacement: int = 8
    length_edges: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120)
    max_records_per_object: int = 24
    pace_edges_s: tuple[float, ...] = (0, 30, 60, 90, 120, 180, 240, 300, 420, 600, 900, 1200, 1800)
    direction_decay: float = 0.8
    prior_weight: float = 1.0
    snr: float = 2.0
    shares: tuple[float, ...] = (0.1, 0.1, 0.2, 0.3, 0.15, 0.05, 0.05, 0.05)
    n_synthetic: int | None = None

    def __post_init__(self) -> None:
        check_model_fields(self, _P, PARTS)
        _P.require_int(self.max_displacement, "max_displacement", 0)

    @property
    def max_moves(self) -> int:
        """The per-record truncation: the last length edge."""
        return self.length_edges[-1]

    def budget(self) -> dict[str, float]:
        """ε of each part of :data:`PARTS`; the last part gets ε minus the others (S), so the parts sum to ε: with
        the last share <= 1/2, S >= ε/2 and ε - S is exact (Sterbenz), so even the floating-point sum is ε."""
        parts = {name: self.epsilon * share for name, share in zip(PARTS[:-1], self.shares[:-1], strict=True)}
        parts[PARTS[-1]] = self.epsilon - sum(parts.values())
        return parts

    def sensitivity(self, part: str) -> float:
        """L1 sensitivity of part ``part`` under adding or removing one object (see the module docstring)."""
        return float(self.max_records_per_object) if part == "records" else 1.0

    def scale(self, part: str) -> float:
        """Laplace scale of part ``part``: sensitivity / ε_part, times the number of quadtree levels for a spatial
        part (each level has sensitivity 1 and ε_part / (K + 1))."""
        levels = self.quadtree_levels + 1 if part in SPATIAL_PARTS else 1
        return levels * self.sensitivity(part) / self.budget()[part]
