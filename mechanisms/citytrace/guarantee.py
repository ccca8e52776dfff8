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
    - Sequential composition: Σ_k ε_k over the density levels is ε_density
      (:meth:`CityTraceParams.level_epsilons`) and Σ ε_part = ε (:meth:`CityTraceParams.budget`). The grids,
      bins, the release's window, the dataset's time zone, the speed bound and every parameter are public; the walks, positions and timestamps are
      post-processing of the noisy vectors and the rng.
    """
    eps = params.epsilon
    b = params.budget()
    parts = ", ".join(f"{name} (epsilon {b[name]:.4g})" for name in PARTS)
    how = (
        f"CityTrace releases, with Laplace noise, {len(PARTS)} statistics by "
        f"sequential composition: {parts}; the density as a quadtree of {params.quadtree_levels + 1} "
        "levels sharing its epsilon. Each object adds to each histogram its own histogram divided by its number "
        f"of items (to the density, 1/{params.density_cells} on each of its {params.density_cells} most visited "
        f"cells): at most 1 in total, and to the record count at most {params.max_records_per_object} records, "
        "so the noise is calibrated to one whole object. The synthetic trajectories, their positions "
        "and their timestamps are drawn from these noisy values only."
    )
    caveats = (
        (f"The bounding box, the model cells of {params.cell_size_m:g} m, the blocks of the move directions, the "
         "start-time regions, the histogram bins and every parameter are public and fixed before the data is "
         f"read. The moves of a record after its first {params.max_moves} are not modelled."),
        ("Timestamps are synthetic and lie in the release's window: a local day of the window from a noisy "
         "day-of-week histogram, a local hour of day per start region (the dataset's time zone), a pace per "
         "record and a time per move drawn from noisy histograms; a released segment is never faster than "
         f"{params.max_speed_kmh:g} km/h (a public bound), except in a record longer than the window, which is "
         "compressed into it."),
        noise.CAVEAT,
    )
    return Guarantee.per_object(eps, how, caveats)
