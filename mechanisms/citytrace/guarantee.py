"""The guarantee of a CityTrace release, in words a data steward reads verbatim, and its proof sketch."""

from __future__ import annotations

from mechanisms.citytrace.params import PARTS, CityTraceParams
from trajpub import noise
from trajpub.guarantee import Guarantee


def guarantee(params: CityTraceParams) -> Guarantee:
    """ε-DP per object (taxi, person) under adding or removing one object with all its records.

    Proof sketch (ObjTrace's, :func:`mechanisms.objtrace.guarantee`, with more parts). Let D and D' differ by
    one object o and all its records. CityTrace releases one noisy vector per part of :data:`~.params.PARTS`,
    the density as K + 1 vectors (its quadtree levels), and nothing else of the data:

    - ``records``: ``Σ_o min(n_o, m)``, sensitivity m = ``max_records_per_object``; Laplace(m / ε_records).
    - every other part (and every density level): ``Σ_o v_o`` with v_o >= 0 of L1 norm 1: o's own histogram
      divided by its number of items, and for the density 1/k on each of o's k = ``density_cells`` most visited
      fine cells (:func:`~.counting.top_cells_histogram`, a function of o's points only); a level's block sums
      of o's density vector have L1 norm 1 too, so the L1 sensitivity is 1; Laplace(1 / ε) on every bin of a
      public, data-independent key space.
    - ``density_model: privtree``: o's vector is 1/k on each of its k most visited fine cells (L1 norm <= 1);
      the decomposition is ε_tests-DP by :func:`~.privtree.calibration` (PrivTree's Theorem 3.1, SIGMOD 2016,
      extended there to fractional contributions and to the tests' snapped noise: a path costs at most
      (2β-1)/((β-1)λ) per unit of mass, o's unit of mass is split over paths, and the snapping adds at most
      2**-10/λ per level); the leaves, and each of the J sub-level depths below them, are
      partitions of the grid given the released tree, so their counts have sensitivity 1 and get Laplace(1/ε)
      with ε_leaves and ε_j (:meth:`CityTraceParams.privtree_epsilons`, summing to ε_density with ε_tests).
    - Sequential composition: Σ_k ε_k over the density levels is ε_density
      (:meth:`CityTraceParams.level_epsilons`) and Σ ε_part = ε (:meth:`CityTraceParams.budget`). The grids,
      bins, the release's window, the dataset's time zone, the speed bound and every parameter are public; the walks, positions and timestamps are
      post-processing of the noisy vectors and the rng.
    """
    eps = params.epsilon
    b = params.budget()
    parts = ", ".join(f"{name} (epsilon {b[name]:.4g})" for name in PARTS)
    if params.density_model == "privtree":
        tests, leaves, subs = params.privtree_epsilons()
        density = (f"the density as a PrivTree decomposition of {params.fine_cell_m:g} m cells whose depth follows "
                   f"the data (Zhang, Xiao and Xie, SIGMOD 2016: split tests with epsilon {tests:.4g}, the leaves' "
                   f"counts with epsilon {leaves:.4g}"
                   + (f", and {len(subs)} finer partition(s) below them with epsilon {subs[0]:.4g} each"
                      if subs else "") + ")")
    else:
        density = f"the density as a quadtree of {params.quadtree_levels + 1} levels sharing its epsilon"
    share = f"1/{params.density_cells} on each of its {params.density_cells} most visited cells"
    how = (
        f"CityTrace releases, with Laplace noise, {len(PARTS)} statistics by "
        f"sequential composition: {parts}; {density}. Each object adds to each histogram its own histogram "
        f"divided by its number of items (to the density, {share}): at most 1 in total, and to the record count "
        f"at most {params.max_records_per_object} records, so the noise is calibrated to one whole object. The "
        "synthetic trajectories, their positions and their timestamps are drawn from these noisy values only."
    )
    caveats = (
        (f"The bounding box, the model cells of {params.cell_size_m:g} m, the blocks of the move directions, the "
         "start-time regions, the histogram bins and every parameter are public and fixed before the data is "
         f"read. The moves of a record after its first {params.max_moves} are not modelled."
         + (" PrivTree's split thresholds depend on epsilon and the fanout only; the split tests' noise is "
            "snapped to an exact grid, which its noise scale and bias cover." if params.density_model == "privtree" else "")),
        ("Timestamps are synthetic and lie in the release's window: a local day of the window from a noisy "
         "day-of-week histogram, a local hour of day per start region (the dataset's time zone), a pace per "
         "record and a time per move drawn from noisy histograms; a released segment is never faster than "
         f"{params.max_speed_kmh:g} km/h (a public bound), except in a record longer than the window, which is "
         "compressed into it."
         + (f" Each segment between two drawn points is written as points at most {params.point_spacing_m:g} m "
            "apart on the straight line between them, in position and in time (post-processing)."
            if params.point_spacing_m is not None else "")),
        noise.CAVEAT,
    )
    return Guarantee.per_object(eps, how, caveats)
