"""Parameters of a dummy-trajectory release: Liu et al., WISA 2019 (DTPP), as re-implemented by the survey
(Jin et al., TKDE 2023, Sec. 3.2.2; k = 5, l = 3; [S-code] exposure ratio 0.2, 0.001° grid).

Every field is public and fixed before the data is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from trajpub.errors import ParameterError
from trajpub.params import Params, Scope

EXPOSURE_RULES = ("random", "spaced")

_P = Scope("dummy", resolved=("road_network",))


@dataclass(frozen=True)
class DummyParams(Params):
    """k: members per published set (the real trajectory and k−1 dummies); survey 5.
    l: location diversity: at every unexposed timestamp the k locations hold the real one and at least l−1
        distinct alternatives in its grid cell (the survey's "each unexposed location needs >= l−1
        alternatives"; the [S-code] "location anonymity" counts distinct locations); survey 3; l <= k.
    exposure_ratio: share of each trajectory's locations assumed known to the adversary ("exposed"); all k
        members pass through them exactly ([S-code] 0.2). A trajectory with n·ratio < 1 is suppressed.
    exposure: how the exposed locations are chosen: "random" (default, the [S-code]: a uniformly random
        subset of round(n·ratio) locations, drawn from the mechanism's generator) or "spaced" (a public rule:
        round(n·ratio) locations evenly spaced from the first to the last).
    cell_deg: side of the lon/lat grid whose cells bound the alternatives ([S-code] 0.001°).
    subcells: without a road network, the candidate alternatives of a cell are the centres of its
        subcells × subcells sub-cells (default 4: 16 candidates per cell).
    candidate_spacing_m: with a road network, the candidates are the network's vertices and points every
        this many metres along its edges (default 20 m).
    min_separation_m: a candidate closer than this to the real location is not an alternative (1 m).
    """

    scope = _P

    k: int = 5
    l: int = 3
    exposure_ratio: float = 0.2
    exposure: str = "random"
    cell_deg: float = 0.001
    subcells: int = 4
    candidate_spacing_m: float = 20.0
    min_separation_m: float = 1.0

    def __post_init__(self) -> None:
        _P.require_int(self.k, "k", 2)
        _P.require_int(self.l, "l", 2)
        if self.l > self.k:
            raise ParameterError(f"l ({self.l}) cannot exceed k ({self.k}): k locations hold at most k distinct "
                                 "ones", _P.where("l"))
        _P.require_real(self.exposure_ratio, "exposure_ratio", 0.0, 1.0)
        if self.exposure_ratio >= 1.0:
            raise ParameterError("exposure_ratio must be < 1: some locations must be left to hide",
                                 _P.where("exposure_ratio"))
        _P.require_choice(self.exposure, "exposure", EXPOSURE_RULES)
        _P.require_real(self.cell_deg, "cell_deg", 0.0, 1.0)
        _P.require_int(self.subcells, "subcells", 2)
        _P.require_real(self.candidate_spacing_m, "candidate_spacing_m", 0.0)
        _P.require_real(self.min_separation_m, "min_separation_m", 0.0)
