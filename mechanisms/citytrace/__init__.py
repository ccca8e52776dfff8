"""CityTrace: ObjTrace's successor for city-scale detail (~1 km model cells), ε-DP per object.

The privacy unit, the bounding of each object's contribution and the noise are ObjTrace's
(:mod:`mechanisms.objtrace`; proof sketch in :mod:`.guarantee`). What changes, and where it comes from (papers
and the authors' code read, none copied):

- Fine cells where the data is dense (AdaTrace, Gursoy et al., CCS 2018, Sec. 4.1 density-aware grid;
  PrivTrace, Du et al., USENIX Security 2023, ``discretization/divide.py``: a level-1 grid subdivided where the
  noisy density is high). Here the density is one noisy quadtree over 1 km cells, read top-down where
  the noisy counts clear the noise (:func:`mechanisms.objtrace.quadtree.estimate`), with its ε split
  geometrically over the levels (Cormode et al., "Differentially Private Spatial Decompositions", ICDE 2012,
  Sec. 4.2). Their leaf-heavy ratio 2**(-1/3) suits least-squares post-processing; with the top-down estimate the
  coarse levels decide where any detail is read, and giving them more (ratio 1.59) measured better on the
  tuning half, at 6 km and at 1.5 km. Per object a 1 km cell's count is far below its noise, so the 1.5 km
  detail is read at the 4 km level (2 km where a block's counts clear the noise): the tree stops at 16 km
  blocks and the density has most of ε (:class:`~.params.CityTraceParams`, ``quadtree_levels``, ``snr`` and
  ``shares``, with the measurements). Each object's unit of density is spread equally over its most visited
  fine cells (bounded user contribution, Wilson et al., "Differentially Private SQL with Bounded User
  Contribution", PoPETs 2020, who sample a user's keys; we keep the most visited), so a cell counts the taxis
  that frequent it rather than the hours a few wait there (``density_cells``).
- A density whose resolution follows the data (``density_model: privtree``, not the default yet): PrivTree
  (Zhang, Xiao, Xie, SIGMOD 2016; :mod:`.privtree`) splits a node of 125 m fine cells while its biased noisy
  count clears a threshold set by ε alone, so a city core is read at 125-500 m and the countryside in a few large
  leaves; one finer partition below the leaves refines them, and a point is drawn from the fine density inside
  its model cell (no lattice of model cells). On the San Francisco sample, where it was chosen, and on the
  T-Drive report half, where it is reported, it beats the quadtree on the spatial figures at every grid
  (``bench/UTILITY_RESULTS.md``).
- Points along each segment (``point_spacing_m``, off by default): a walk writes one point per model cell, each
  drawn independently inside it, so consecutive points can skip a cell of a finer grid; each segment is then
  written as points at most that far apart, linear in position and time (post-processing,
  :func:`.points.densify`). With the PrivTree variant on the San Francisco tuning half it is what lifted the
  frequent patterns at 0.4 x 0.7 km (``bench/UTILITY_RESULTS.md``).
- First-order moves at the finest level the noise supports (PrivTrace's adaptive order idea, one level here:
  per object, its second-order counts drown in noise, as do first-order counts at 1 km; measured in
  ``bench/UTILITY_RESULTS.md``, "At city resolution"): the 8 move directions
  are counted between blocks of 2**L fine cells (4 km by default), where a block's flow is readable, and steer
  the fine walk inside the block, whose next cell is otherwise chosen by the fine density (DPT, He et al.,
  PVLDB 2015: neighbour moves in a reference system, direction-weighted turns).
- Where a record ends: PrivTrace calibrates its walks' starts and ends on its coarse level-1 grid; per object
  even a displacement vector between fine cells is noise, so CityTrace releases only how far (Chebyshev, in
  bins widening with the distance) a record ends from its start and draws the end cell at that distance by the
  fine density, a gravity model of trip distribution (Erlander & Stewart 1990): on the tuning half the trips'
  start/end error at 6 km went from 0.46 to 0.39 (seeds 12-35), every 1.5 km figure within a standard error but
  the 1.5 km trips (0.648 -> 0.662).
- Noise-aware reading (RetraSyn, Hu et al., "Real-Time Trajectory Synthesis with Local Differential Privacy",
  ICDE 2024, ``code/RetraSyn_b.py``: a fresh noisy transition estimate replaces the previous release only where
  it differs by more than its noise variance, the "significant patterns"): a finer quadtree level or a block's
  directions count only where they clear their noise; elsewhere the coarser estimate (or the density) stands.
  RetraSyn's adaptive allocation over timestamps is not used: a per-object bound lets us release one model for
  the whole window instead of a stream.
- Plausible times: a local day of the release's window from a noisy day-of-week histogram, a local hour per start
  region (as ObjTrace's), a pace per record and a time per
  move, each from a noisy histogram; a record lasts its pace times its moves (so durations follow the data's)
  while its moves differ as the data's do (stops, fast roads); a public speed bound stretches a segment that
  would be faster than a vehicle (the step histogram's low bins otherwise give a few km-long moves in seconds).
- Hyper-parameters (:mod:`.params` defaults) were chosen on the even half of the T-Drive sample's taxis
  (:func:`bench.utility_data.taxi_halves`); ``bench/UTILITY_RESULTS.md`` reports them on the odd half.

Pipeline: per-partition bounded counts (:mod:`.counting`, workers) → noise (:mod:`.model`, driver) → walks and
times (:mod:`.synthesis`) → points (:mod:`.points`). :func:`synthesize` runs it on one in-memory frame.
"""

from mechanisms.citytrace.counting import CityTraceCounts, count_points
from mechanisms.citytrace.guarantee import guarantee
from mechanisms.citytrace.mechanism import CityTraceResult, geometry_of, release_from_counts, synthesize
from mechanisms.citytrace.model import NoisyModel, fit
from mechanisms.citytrace.params import PARTS, CityTraceParams

__all__ = [
    "PARTS",
    "CityTraceCounts",
    "CityTraceParams",
    "CityTraceResult",
    "NoisyModel",
    "count_points",
    "fit",
    "geometry_of",
    "guarantee",
    "release_from_counts",
    "synthesize",
]
