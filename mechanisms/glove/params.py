"""Parameters of a GLOVE release: Gramaglia and Fiore (CoNEXT 2015), as re-implemented by the survey
(Jin et al., TKDE 2023, Sec. 3.1.1; [S-code] ``models/glove/Formula.java``).

Every field is public and fixed before the data is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from trajpub.errors import ParameterError
from trajpub.params import Params, Scope

UNITS = ("trajectory", "object")
ON_LEFTOVER = ("merge_nearest", "suppress")

_P = Scope("glove")


@dataclass(frozen=True)
class GloveParams(Params):
    """k: anonymity level: every published group holds the fingerprints of at least k distinct objects (survey 5).
    unit: what one fingerprint is: "trajectory" (default; the survey's trajectory-wise GLOVE, one fingerprint per
        prepared trajectory, two trajectories of one object are never put in the same group) or "object" (the
        paper's user fingerprint: all of an object's trajectories together).
    space_scale_m: spatial normaliser of the stretch cost (the S-code's MAX_SPACE, 20 km).
    time_scale_s: temporal normaliser (the S-code's MAX_MINUTE, 24 h).
    space_weight: weight of the spatial term (the S-code's Omega, 0.5); the temporal term gets 1 − space_weight.
    candidates: locality pruning: merge costs are computed only to the ``candidates`` nearest fingerprints by the
        locality key (mean x, y, t scaled like the cost); ``None`` computes every pair (exact greedy GLOVE,
        O(|D|²n²): small data only).
    on_leftover: groups still below k when no candidate pair is left: "merge_nearest" (default; each joins the
        finished group of least merge cost that shares no object with it) or "suppress" (left out).
    """

    scope = _P

    k: int = 5
    unit: str = "trajectory"
    space_scale_m: float = 20_000.0
    time_scale_s: float = 24 * 3600.0
    space_weight: float = 0.5
    candidates: int | None = 12
    on_leftover: str = "merge_nearest"

    def __post_init__(self) -> None:
        _P.require_int(self.k, "k", 2)
        _P.require_choice(self.unit, "unit", UNITS)
        _P.require_real(self.space_scale_m, "space_scale_m", 0.0)
        _P.require_real(self.time_scale_s, "time_scale_s", 0.0)
        _P.require_real(self.space_weight, "space_weight", 0.0, 1.0, open_low=False)
        _P.require_optional_int(self.candidates, "candidates", 1)
        _P.require_choice(self.on_leftover, "on_leftover", ON_LEFTOVER)
        if self.candidates is not None and self.candidates < self.k - 1:
            raise ParameterError(f"candidates ({self.candidates}) must be >= k - 1 ({self.k - 1}) or null",
                                 _P.where("candidates"))
