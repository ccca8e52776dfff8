"""(k-Ψ)-anonymity with road-network dummies and Laplace perturbation: Chen, Li, Zhang, "A Differential
Privacy Based (k-Ψ)-Anonymity Method for Trajectory Data Publishing" (2020). Labels A1–A16 are our
choices in docs/design.md ((k-Ψ)-anonymity). Pure numpy/pandas /shapely; road networks come from :mod:`trajpub.roads`.

Public surface, in the order a pipeline uses it:

- :class:`KPsiParams` (``from_dict``/``to_dict``) and :func:`guarantee` (params, road_network_source).
- :func:`trajectory_keys` (points) → the canonical trajectory order; :func:`anonymize_batch` (points, network,
  params, rngs, set_ids) → :class:`KPsiRelease` (published, private, status, audit) for one partition;
  :func:`anonymize_trajectory` for one trajectory; :func:`anonymize` for a whole in-memory frame.
- :class:`InfeasibleError` when the network cannot host k−1 dummies and ``on_infeasible="raise"``.

Lower level (tests, benchmarks): :func:`generate_dummies` (Phase 1) → :class:`PhaseOne`; :func:`noise_scales`,
:func:`perturb`, :func:`laplace_from_uniform` (Phase 2); :func:`initial_thresholds`, :func:`feasible_discs`,
:func:`segment_thresholds` (Ψ); metrics :func:`within_discs`, :func:`is_k_psi_anonymous`,
:func:`discernibility`, :func:`closeness`, :func:`laplace_disc_probability`.
"""

from mechanisms.kpsi_anonymity.dummies import PhaseOne, generate_dummies, travel_budgets
from mechanisms.kpsi_anonymity.guarantee import ROAD_NETWORK_SOURCES, guarantee
from mechanisms.kpsi_anonymity.mechanism import (
    InfeasibleError,
    KPsiRelease,
    anonymize,
    anonymize_batch,
    anonymize_trajectory,
    trajectory_keys,
)
from mechanisms.kpsi_anonymity.metrics import (
    closeness,
    discernibility,
    is_k_psi_anonymous,
    laplace_disc_probability,
    within_discs,
)
from mechanisms.kpsi_anonymity.params import KPsiParams
from mechanisms.kpsi_anonymity.perturb import (
    laplace_from_uniform,
    noise_scales,
    open_centred_uniform,
    perturb,
)
from mechanisms.kpsi_anonymity.psi import (
    Discs,
    constant_delta,
    delta_cap,
    feasible_discs,
    initial_thresholds,
    segment_thresholds,
)

__all__ = [
    "ROAD_NETWORK_SOURCES",
    "Discs",
    "InfeasibleError",
    "KPsiParams",
    "KPsiRelease",
    "PhaseOne",
    "anonymize",
    "anonymize_batch",
    "anonymize_trajectory",
    "closeness",
    "constant_delta",
    "delta_cap",
    "discernibility",
    "feasible_discs",
    "generate_dummies",
    "guarantee",
    "initial_thresholds",
    "is_k_psi_anonymous",
    "laplace_disc_probability",
    "laplace_from_uniform",
    "noise_scales",
    "open_centred_uniform",
    "perturb",
    "segment_thresholds",
    "trajectory_keys",
    "travel_budgets",
    "within_discs",
]
