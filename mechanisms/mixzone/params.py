"""Parameters of a mix-zone release: Liu, Kang, Wang, Zhang (INFOCOM 2012, UTMP) as re-implemented by the
survey (Jin et al., TKDE 2023, Sec. 3.2.1; settings, Sec. 5.1: r = 500 m, 1,000 zones; [S-code] ``min_length`` 10).

Every field is public and fixed before the data is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from trajpub.params import Params, Scope

_P = Scope("mixzone", required=("road_network",), resolved=("road_network",))


@dataclass(frozen=True)
class MixzoneParams(Params):
    """radius_m: a point is covered by a mix zone when it lies within this distance (metres, inclusive) of
    the zone's road vertex (survey r = 500 m).
    n_zones: K, the most mix zones the UTMP placement keeps (survey 1,000).
    min_length: a trajectory is cut only when its current fragment already has at least this many points
    ([S-code] ``min_trj_len`` = 10).
    suppress_in_zone: remove every point covered by a zone (default True). False is the survey's behaviour
    ("survey_no_suppression": no point removed, fragments stay spatially contiguous and are trivially
    re-linked, attack A13).
    min_fragment_points: fragments left with fewer points after suppression are dropped (default 2: a
    one-point fragment has no movement; it is counted in the metadata).
    """

    scope = _P

    radius_m: float = 500.0
    n_zones: int = 1000
    min_length: int = 10
    suppress_in_zone: bool = True
    min_fragment_points: int = 2

    def __post_init__(self) -> None:
        _P.require_real(self.radius_m, "radius_m", 0.0)
        _P.require_int(self.n_zones, "n_zones", 1)
        _P.require_int(self.min_length, "min_length", 1)
        _P.require_bool(self.suppress_in_zone, "suppress_in_zone")
        _P.require_int(self.min_fragment_points, "min_fragment_points", 1)
