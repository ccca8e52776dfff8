"""Parameters of a KLT release: Tu et al. (IEEE TNSM 2019) as re-implemented by the survey (Jin
et al., TKDE 2023, Sec. 3.1.2; [S-code] ``models/klt``): GLOVE's parameters for k plus l, t and the POI grid."""

from __future__ import annotations

from dataclasses import dataclass

from mechanisms.glove.params import GloveParams
from trajpub.errors import ParameterError
from trajpub.params import Params, Scope

GROW_REGIONS = ("every_merge", "final")

_P = Scope("klt", required=("pois",), resolved=("pois",))


@dataclass(frozen=True)
class KltParams(Params):
    """k, unit, space_scale_m, time_scale_s, space_weight, candidates, on_leftover: as :class:`GloveParams`.
    l: distinct POI categories every published region must hold (distinct l-diversity; survey 3).
    t: the largest KL divergence (natural log) of a region's POI-category distribution from the city-wide one
        (t-closeness; survey 0.1).
    poi_cell_deg: side of the POI grid cells in degrees (the [S-code]'s 0.001°).
    max_expand_cells: how many rings of cells a region may grow by on each side before it is suppressed
        (100 cells of 0.001°, about 8.5-11 km at Beijing's latitude).
    grow_regions: when regions are grown: "every_merge" (default, as the [S-code]: every merged sample is grown
        right after each merge, so later merge costs see the grown regions) or "final" (GLOVE's merging untouched,
        only the published regions are grown; faster, smaller regions). Published regions satisfy l and t either
        way.
    """

    scope = _P

    k: int = 5
    l: int = 3
    t: float = 0.1
    unit: str = "trajectory"
    space_scale_m: float = 20_000.0
    time_scale_s: float = 24 * 3600.0
    space_weight: float = 0.5
    candidates: int | None = 12
    on_leftover: str = "merge_nearest"
    poi_cell_deg: float = 0.001
    max_expand_cells: int = 100
    grow_regions: str = "every_merge"

    def __post_init__(self) -> None:
        try:
            self.glove()  # the k phase's parameters, checked by GLOVE's own rules
        except ParameterError as exc:
            raise ParameterError(exc.message, _P.where(exc.where.split(".", 1)[1])) from None
        _P.require_int(self.l, "l", 1)
        _P.require_real(self.t, "t", 0.0, open_low=False)
        _P.require_real(self.poi_cell_deg, "poi_cell_deg", 0.0, 1.0)
        _P.require_int(self.max_expand_cells, "max_expand_cells", 0)
        _P.require_choice(self.grow_regions, "grow_regions", GROW_REGIONS)

    def glove(self) -> GloveParams:
        """The GLOVE parameters of the k-anonymity phase."""
        return GloveParams(k=self.k, unit=self.unit, space_scale_m=self.space_scale_m,
                           time_scale_s=self.time_scale_s, space_weight=self.space_weight,
                           candidates=self.candidates, on_leftover=self.on_leftover)
