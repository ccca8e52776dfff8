"""Parameters of a W4M release: Abul, Bonchi, Nanni (2010); survey settings k = 5, δ = 500 m.

Every field is public and fixed before the data is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from trajpub.errors import ParameterError
from trajpub.params import Params, Scope

CENTRES = ("pivot", "mean")

_P = Scope("w4m")


@dataclass(frozen=True)
class W4MParams(Params):
    """Public parameters of W4M (package docstring for the decisions behind each).

    k: anonymity degree: trajectories per published set (≥ 2; survey 5).
    delta_m: δ, the co-localisation diameter in metres: every member of a set lies within δ/2 of the set's
        centre at every published timestamp, so any two within δ (survey 500 m).
    match_m: EDR's spatial matching threshold ε, per axis, in metres (default 250 m = δ/2 of the survey).
    time_tolerance_s: EDR's temporal matching threshold in seconds (default 300 s, the median sampling
        interval of T-Drive); must be finite (W4M's distance is time-tolerant, not time-free).
    trash_max: the largest fraction of trajectories suppressed as outliers, in [0, 1) (default 0.1).
    outlier_edr: a trajectory whose (k−1)-th nearest trajectory of another object is at normalised EDR
        ≥ this is an outlier, a candidate for the trash (0, 1]; default 1.0: it shares no matched point with
        k−1 other objects.
    centre: the cylinder's axis: "pivot" (default; the cluster's pivot trajectory, published unmoved, the
        others edited towards it as the survey describes) or "mean" (NWA's central trajectory: the mean of the
        aligned members at each pivot timestamp).
    distinct_objects: a set must hold k distinct objects, not only k trajectories (default true: an object
        with several trajectories cannot fill a set alone).
    """

    scope = _P

    k: int = 5
    delta_m: float = 500.0
    match_m: float = 250.0
    time_tolerance_s: float = 300.0
    trash_max: float = 0.1
    outlier_edr: float = 1.0
    centre: str = "pivot"
    distinct_objects: bool = True

    def __post_init__(self) -> None:
        _P.require_int(self.k, "k", 2)
        _P.require_real(self.delta_m, "delta_m", 0.0)
        _P.require_real(self.match_m, "match_m", 0.0)
        _P.require_real(self.time_tolerance_s, "time_tolerance_s", 0.0)
        _P.require_real(self.trash_max, "trash_max", 0.0, open_low=False)
        if self.trash_max >= 1.0:
            raise ParameterError(f"trash_max must be < 1, got {self.trash_max!r}", _P.where("trash_max"))
        _P.require_real(self.outlier_edr, "outlier_edr", 0.0, 1.0)
        _P.require_choice(self.centre, "centre", CENTRES)
        _P.require_bool(self.distinct_objects, "distinct_objects")

    @property
    def radius_m(self) -> float:
        """The cylinder's radius δ/2."""
        return self.delta_m / 2.0
