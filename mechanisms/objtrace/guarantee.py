"""The guarantee of an ObjTrace release, in words a data steward reads verbatim, and its proof sketch."""

from __future__ import annotations

from mechanisms.objtrace.params import PARTS, ObjTraceParams
from trajpub import noise
from trajpub.guarantee import Guarantee


def guarantee(params: ObjTraceParams) -> Guarantee:
    """ε-DP per object (taxi, person) under adding or removing one object with all its records.

    Proof sketch. Let D and D' differ by one object o and all its records. ObjTrace releases, in this order, one
    noisy vector per part of :data:`~.params.PARTS` and nothing else of the data:

    - ``records``: ``Σ_o min(n_o, m)`` (n_o = o's records, m = ``max_records_per_object``): changes by at most
      m between D and D'; Laplace(m / ε_records) makes it ε_records-DP (Dwork et al. 2006, Thm 1).
    - every other part k (length, end, density, moves, weekday, hour, pace): ``h_k = Σ_o v_{o,k}`` where v_{o,k}
      is o's own histogram divided by its number of items (:func:`~.counting.per_object_histogram`), so
      ``||v_{o,k}||_1 <= 1`` and v_{o,k} depends on o's records only (a whole object is in one partition).
      ``||h_k(D) - h_k(D')||_1 = ||v_{o,k}||_1 <= 1``: Laplace(1 / ε_k) on each bin (the bins are a public,
      data-independent key space, every bin noised) makes it ε_k-DP.
    - Sequential composition: ε = Σ_k ε_k with ε_k = s_k ε (s_k the part's share; :meth:`ObjTraceParams.budget`
      gives the last part ε minus the others, so the sum is exact). The timestamps' day and hour structure is
      two of these parts, drawn under the same ε: ``weekday`` (the local day of week of each record's start,
      ε_weekday = s_weekday ε) and ``hour`` (its local hour per start region, ε_hour = s_hour ε). The grid, the
      regions, the bins, the thresholds (noise scales and bin counts), the release's window and the dataset's
      time zone and every other parameter are public; model smoothing, the walks, the positions and the
      timestamps (placed in the window) are post-processing of the noisy vectors and the rng.
    """
    eps = params.epsilon
    b = params.budget()
    parts = ", ".join(f"{name} (epsilon {b[name]:.4g})" for name in PARTS)
    how = (
        f"ObjTrace releases, with Laplace noise, {len(PARTS)} statistics by "
        f"sequential composition: {parts}. Each object adds to each histogram its own histogram divided by its "
        "number of items (at most 1 in total), and to the record count at most "
        f"{params.max_records_per_object} records, so the noise is calibrated to one whole object. The synthetic "
        "trajectories, their positions and their timestamps are drawn from these noisy values only."
    )
    caveats = (
        ("The bounding box, the model grid (cells of "
         f"{params.cell_size_m:g} m), the start-time regions, the histogram bins and every parameter are public "
         "and fixed before the data is read. The moves of a record after its first "
         f"{params.max_moves} are not modelled."),
        ("Timestamps are synthetic and lie in the release's window: a local day of the window drawn from a noisy "
         "day-of-week histogram, a local start hour drawn per start region (the dataset's time zone) and a "
         "constant pace per record; they carry no date or time of any real record."),
        noise.CAVEAT,
    )
    return Guarantee.per_object(eps, how, caveats)
