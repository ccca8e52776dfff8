"""Dummy trajectories against exposed-location attacks: Liu et al., "Dummy-based trajectory privacy protection
against exposed location attacks", WISA 2019 (DTPP), as re-implemented by the survey of trajectory privacy
models (Jin et al., TKDE 2023, Sec. 3.2.2, ref. [31]; k = 5, l = 3; [S-code] the survey's Java code
``uqwhua/TrjPrivacy`` ``Dummy.java``: exposure ratio 0.2, 0.001° grid, score = similarity × difference).
numpy/pandas/shapely; the timestamp walk of :func:`dummy_trajectory` is compiled with numba (a sequential
loop over timestamps and dummies, each pick depending on the previous ones: numpy cannot vectorise it).

Public surface:

- :class:`DummyParams` (``from_dict``/``to_dict``), :func:`guarantee` (params, road_network_source).
- Candidates: :func:`road_candidates` (network, unproject, cell_deg, spacing), :func:`subcell_candidates`
  (cell keys, cell_deg, subcells, project) → :class:`Candidates`; :func:`cell_keys`.
- :func:`generate_batch` (points, candidates, params, rngs, set_ids) → :class:`DummyRelease`
  (published, owners, status); :func:`trajectory_keys`; :func:`dummy_trajectory` for one trajectory →
  :class:`DummySet`; :func:`exposed_mask`, :func:`max_speed`.

Decisions (where the paper/survey is silent, or where this code deviates):

1. Candidates are public points only: with a road network, its vertices and points every
   ``candidate_spacing_m`` (20 m) along its edges; without one, the centres of a fixed 4 × 4 subdivision of the
   cell. Never other people's raw points (the [S-code] uses POIs of Beijing, which we do not have). They must lie
   in the real location's 0.001° lon/lat cell (the survey's "same grid cell"; the code also looks at
   neighbouring cells within 0.5 km: not done here).
2. Exposed locations: "random" (default, as the [S-code]: round(n·0.2) locations drawn uniformly by the
   mechanism's generator; the adversary model is "the attacker knows these locations") or "spaced" (a public
   rule). Either way they are visible in the output, where all members coincide.
3. Generation: the [S-code] builds a graph of candidate steps whose length is within ±50 % of the real step,
   enumerates paths by DFS (exponential) and keeps the best by similarity × difference; its max-speed check is
   commented out. Here dummies are grown forward one timestamp at a time (linear in n): a candidate is
   feasible if it respects the speed limit (the real trajectory's largest speed) from the dummy's previous
   published location and can still reach the next exposed location in time, and, with a network, lies on the
   same connected road component as the dummy's previous road location. The choice is random, weighted by
   similarity (step length close to the real step) × difference (distance to the locations already taken at
   that timestamp): a deterministic choice would let an attacker re-run the algorithm from each member.
4. Location anonymity: a timestamp is kept only if the k locations hold >= l−1 distinct alternatives to the
   real one (the [S-code] counts >= p distinct locations). A location without enough feasible candidates is
   SUPPRESSED from all members (the [S-code] turns it into an exposed location instead, which would publish
   the real location in every member). No sensitivity labels exist in our data, so the "too-sensitive
   location" rule of the paper is not implemented.
5. (p,k) check / trajectory suppression: a trajectory is suppressed when n·ratio < 1 (as the code), when no
   unexposed location survives (as the code), or when fewer than 2 points survive.
6. Times: each trajectory's own timestamps, shared by its k members; points with a repeated timestamp are
   dropped by the adapter (speeds need increasing times).
"""

from mechanisms.dummy.candidates import Candidates, cell_keys, road_candidates, subcell_candidates
from mechanisms.dummy.generate import (
    DummyRelease,
    DummySet,
    dummy_trajectory,
    exposed_mask,
    generate_batch,
    max_speed,
    trajectory_keys,
)
from mechanisms.dummy.guarantee import CANDIDATE_SOURCES, guarantee
from mechanisms.dummy.params import EXPOSURE_RULES, DummyParams

__all__ = [
    "CANDIDATE_SOURCES",
    "EXPOSURE_RULES",
    "Candidates",
    "DummyParams",
    "DummyRelease",
    "DummySet",
    "cell_keys",
    "dummy_trajectory",
    "exposed_mask",
    "generate_batch",
    "guarantee",
    "max_speed",
    "road_candidates",
    "subcell_candidates",
    "trajectory_keys",
]
