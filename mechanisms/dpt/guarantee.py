"""The guarantee of a DPT release, in words a data steward reads verbatim."""

from __future__ import annotations

from mechanisms.dpt.params import DptParams
from trajpub import noise
from trajpub.guarantee import Guarantee, object_level_caveat


def guarantee(params: DptParams) -> Guarantee:
    """ε-DP per trajectory record under add/remove, by sequential composition of four Laplace releases."""
    eps = params.epsilon
    b = params.budget()
    m = params.max_transitions
    statement = (
        f"epsilon-differential privacy with epsilon = {eps:g} for each trajectory record: for any two input "
        "databases that differ by adding or removing one trajectory record, the probability of every possible "
        f"released set of synthetic trajectories changes by at most a factor exp({eps:g}). DPT (He et al., "
        f"PVLDB 2015) releases, with Laplace noise: the numbers of distinct tree nodes for model selection "
        f"(epsilon {b['select']:g}), the length histograms (epsilon {b['length']:g}), the start-cell histograms "
        f"(epsilon {b['start']:g}) and the prefix-tree node counts of each kept reference system (epsilon "
        f"{b['tree']:g}; each record lies in one system, so the systems compose in parallel). The noise scales "
        f"use the L1 sensitivity of a record truncated to {m} moves. Model selection, the synthesis and the "
        "number of synthetic trajectories read only these noisy values."
    )
    object_level = object_level_caveat(eps, params.max_records_per_object)
    caveats = (
        object_level,
        (
            "The grid, its bounding box, the reference systems (cell sizes s, 2s, 4s, ...) and every parameter "
            "are public and fixed before the data is read. Each record is discretised on its own (which system, "
            f"interpolation of jumps) and truncated to its first {m} moves: movement after that is not "
            "represented, and the guarantee is for the truncated records."
        ),
        noise.CAVEAT,
        (
            "Differential privacy bounds what the release reveals about one record, not population-level "
            "facts: frequent routes, hot spots and the fleet's operating area are meant to survive, and may "
            "still be sensitive for a group (survey Sec. 6.1: DP alone is not the ultimately safest choice)."
        ),
        (
            "The released trajectories are synthetic (no record is a person's own) and carry no timestamps. "
            "With little data the noise dominates: the survey measured poor utility for DPT (T-Drive, 1,000 "
            "objects: INF 0.995, DE 0.559, FFP 0.591) and no frequent patterns for small datasets."
        ),
    )
    return Guarantee.per_record(eps, statement, caveats, params.max_records_per_object)
