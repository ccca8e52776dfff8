"""ObjTrace: object-level differentially private trajectory synthesis with timestamps.

The privacy unit is the object (a taxi, a person) with all its records, not one record: every statistic bounds
an object's whole contribution (:mod:`.counting`), so ε is per object (:mod:`.guarantee` has the proof sketch).
What it combines, implemented from the papers (no code copied):

- DPT (He et al., PVLDB 8(11) 2015): a reference system of square cells in which a record is a sequence of
  neighbour moves (repeats collapsed, jumps interpolated; :func:`mechanisms.dpt.discretise` is reused), and
  direction-weighted sampling (:func:`mechanisms.dpt.direction_weights`).
- PrivTrace (Du et al., USENIX Security 2023): a first-order Markov model of moves, and start/end calibration:
  records start where the noisy density is and are bridged to an end drawn from a noisy distribution (here the
  displacement from the start, which keeps the start-end correlation of short and round trips). PrivTrace's
  second-order model and separate start histogram are not used: per object, their counts drown in noise here.
- AdaTrace (Gursoy et al., CCS 2018): density-adaptive resolution. The point density is a noisy quadtree whose
  top-down estimate keeps fine cells only where they clear the noise (:mod:`.quadtree`), and the density guides
  moves where the move counts are noise (:func:`.synthesis.move_weights`).
- Timestamps: a noisy hour-of-day histogram per start region and a noisy pace (seconds per move) histogram.

Pipeline: per-partition bounded counts (:mod:`.counting`, workers) → noise (:mod:`.model`, driver) → walks and
times (:mod:`.synthesis`) → points (:mod:`.points`). :func:`synthesize` runs it on one in-memory frame.
No true count leaves the workers; the run metadata holds parameters and noisy values only.
"""

from mechanisms.objtrace.counting import ObjTraceCounts, count_points, per_object_histogram
from mechanisms.objtrace.geometry import Geometry, geometry_of
from mechanisms.objtrace.guarantee import guarantee
from mechanisms.objtrace.mechanism import ObjTraceResult, synthesize
from mechanisms.objtrace.model import NoisyModel, fit
from mechanisms.objtrace.params import PARTS, ObjTraceParams
from mechanisms.objtrace.points import to_points
from mechanisms.objtrace.synthesis import Synthetic, synthesize_from_model

__all__ = [
    "PARTS",
    "Geometry",
    "NoisyModel",
    "ObjTraceCounts",
    "ObjTraceParams",
    "ObjTraceResult",
    "Synthetic",
    "count_points",
    "fit",
    "geometry_of",
    "guarantee",
    "per_object_histogram",
    "synthesize",
    "synthesize_from_model",
    "to_points",
]
