"""KLT: trajectory k-anonymity with l-diversity and t-closeness of the visited places' semantics. Tu, Z., Zhao,
K., Xu, F., Li, Y., Su, L. and Jin, D., "Protecting Trajectory From Semantic Attack Considering k-Anonymity,
l-Diversity, and t-Closeness", IEEE Transactions on Network and Service Management 16(1), 2019 (survey ref [22]);
as re-implemented by the survey (Jin et al., TKDE 2023, Sec. 3.1.2 and 5; its [S-code] ``uqwhua/TrjPrivacy``
``models/klt``). Builds on :mod:`mechanisms.glove`. Pure numpy/pandas/scipy.

Public surface: :class:`KltParams` (``glove()`` gives the k phase's parameters), :func:`guarantee` (params,
poi_source); POIs: :func:`synthetic_pois` (OSM POIs: :mod:`trajpub.osm`),
:class:`PoiGrid`; :func:`kl_divergence`, :func:`diversify` (region growth); :func:`region_refiner` (the grow-at-every-merge hook), :func:`diversify_release` (a
GLOVE release → KLT release), :func:`anonymize` (in-memory frame + POI frame).

Decisions where the paper/survey is silent, and deviations:

- k phase: exactly GLOVE (:mod:`mechanisms.glove`, with its locality pruning and leftover handling). As in the
  [S-code], merge costs are GLOVE's stretch costs (the POI-aware cost is commented out there).
- Regions: the [S-code]'s 0.001° grid cells carrying POI counts per category; "city-wide" distribution = all POIs
  inside the release's public grid bbox (the adapter) or the POIs' extent (``anonymize`` without ``bbox``).
- When the regions grow: ``grow_regions="every_merge"`` (default) follows the [S-code]: every merged sample is
  grown right after each merge (so later merge costs see the grown regions; the metric box used by the costs is
  widened by the same amounts with a spherical metres-per-degree approximation), and the published regions are
  checked and, if they fail, suppressed at the end. ``"final"`` leaves GLOVE's merging untouched and grows only
  the published regions (faster; smaller regions). Growing only ever enlarges a box, so GLOVE's coverage
  property (each region holds a fix of each of its group's k objects) is kept either way.
- Growth is by whole rings (one cell on every side), not the [S-code]'s one side at a time with the right side
  first while it can (which shifts regions eastwards); regions are snapped outwards to cells first.
- KL is the textbook KL(region ‖ city) in nats with 0·log 0 = 0; the [S-code] adds "infinity" for every category
  absent from the region, which makes t-closeness unreachable unless the region holds every category.
- A region that fails after ``max_expand_cells`` rings (or covering the whole grid) is suppressed from every record
  of its group (the records stay identical), counted by reason in the metadata; a record left without regions is
  dropped (counted). Published regions are never below l or above t.
- POI categories: OSM tags are mapped to a small set (:data:`trajpub.osm.CATEGORIES`; the mapping is in
  :data:`trajpub.osm.OSM_AMENITY` and :func:`trajpub.osm.categorise_osm`); unmapped features are dropped. The paper
  and the survey do not give their category list.
- Synthetic POIs (:func:`synthetic_pois`, uniform) exist only for experiments on T-Drive, for which no offline
  POI data exists; the guarantee and the metadata say "synthetic POIs".
"""

from mechanisms.klt.diversity import FAIL_L, FAIL_T, OK, Diversified, diversify, kl_divergence
from mechanisms.klt.guarantee import guarantee
from mechanisms.klt.mechanism import (
    RELEASE_COLUMNS,
    anonymize,
    diversify_release,
    poi_grid,
    region_refiner,
    summarise,
)
from mechanisms.klt.params import KltParams
from mechanisms.klt.pois import PoiGrid, synthetic_pois

__all__ = [
    "FAIL_L",
    "FAIL_T",
    "OK",
    "RELEASE_COLUMNS",
    "Diversified",
    "KltParams",
    "PoiGrid",
    "anonymize",
    "diversify",
    "diversify_release",
    "guarantee",
    "kl_divergence",
    "poi_grid",
    "region_refiner",
    "summarise",
    "synthetic_pois",
]
