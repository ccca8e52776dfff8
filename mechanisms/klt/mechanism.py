"""KLT: GLOVE's k-anonymous merging, then every published region grown over the POI grid until it is l-diverse and
t-close in POI categories (Tu et al. 2019; survey §2.2)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import glove
from mechanisms.glove.stretch import LAT0, LAT1, LON0, LON1, X0, X1, Y0, Y1
from mechanisms.klt.diversity import FAIL_L, FAIL_T, OK, diversify
from mechanisms.klt.params import KltParams
from mechanisms.klt.pois import PoiGrid

#: Columns of a KLT release (GLOVE's without the metric centre, which the regions' growth in degrees moves).
RELEASE_COLUMNS = ["set_id", "traj_id", "seq", "object_id", "t", "t_end", "lon", "lat", "lon_min", "lat_min",
                   "lon_max", "lat_max"]


def diversify_release(released: pd.DataFrame, grid: PoiGrid, params: KltParams) -> tuple[pd.DataFrame, dict]:
    """Grow every region of a GLOVE release (``set_id, seq`` identify a region; the records of a set share them)
    with :func:`~mechanisms.klt.diversity.diversify`. A region that cannot be made l-diverse and t-close within
    ``max_expand_cells`` rings is suppressed from every record of its set (so the records stay identical and the
    set keeps its k objects); a record left without any region is dropped. ``seq`` is renumbered."""
    regions = released.drop_duplicates(["set_id", "seq"])[["set_id", "seq", "lon_min", "lat_min", "lon_max",
                                                          "lat_max"]].reset_index(drop=True)
    div = diversify(grid, regions["lon_min"], regions["lat_min"], regions["lon_max"], regions["lat_max"],
                    params.l, params.t, params.max_expand_cells)
    grown = pd.DataFrame({"set_id": regions["set_id"], "seq": regions["seq"], "lon_min": div.lon_min,
                          "lat_min": div.lat_min, "lon_max": div.lon_max, "lat_max": div.lat_max,
                          "status": div.status})
    out = released.drop(columns=["lon_min", "lat_min", "lon_max", "lat_max", "lon", "lat", "x", "y"],
                        errors="ignore").merge(grown, on=["set_id", "seq"], how="left", validate="many_to_one")
    records_in = out["traj_id"].nunique()
    out = out[out["status"] == OK].drop(columns="status")
    out = out.sort_values(["traj_id", "seq"], kind="stable").reset_index(drop=True)
    out["seq"] = out.groupby("traj_id").cumcount().astype(np.int64)
    out["lon"] = (out["lon_min"] + out["lon_max"]) / 2
    out["lat"] = (out["lat_min"] + out["lat_max"]) / 2
    ok = div.status == OK
    stats = {
        "regions": len(regions),
        "suppressed_regions_l_diversity": int((div.status == FAIL_L).sum()),
        "suppressed_regions_t_closeness": int((div.status == FAIL_T).sum()),
        "suppressed_records_no_region_left": int(records_in - out["traj_id"].nunique()),
        "median_rings_added": float(np.median(div.rings[ok])) if ok.any() else None,
        "max_kl_published": float(div.kl[ok].max()) if ok.any() else None,
        "min_categories_published": int(div.distinct[ok].min()) if ok.any() else None,
    }
    return out[RELEASE_COLUMNS], stats


def region_refiner(grid: PoiGrid, params: KltParams):
    """The ``refine`` hook of :func:`mechanisms.glove.greedy_merge` for ``grow_regions="every_merge"``: grows
    every merged sample's degree box with :func:`~mechanisms.klt.diversity.diversify` (a sample that cannot reach
    l and t keeps its snapped box; the final pass suppresses it) and widens its metric box by the same amounts
    (metres per degree at the box's latitude, spherical approximation: it only feeds later merge costs)."""

    def refine(samples: np.ndarray) -> np.ndarray:
        d = diversify(grid, samples[:, LON0], samples[:, LAT0], samples[:, LON1], samples[:, LAT1], params.l,
                      params.t, params.max_expand_cells)
        out = samples.copy()
        m_lon = 111_320.0 * np.cos(np.radians((samples[:, LAT0] + samples[:, LAT1]) / 2))
        m_lat = 110_574.0
        out[:, X0] -= (samples[:, LON0] - d.lon_min) * m_lon
        out[:, X1] += (d.lon_max - samples[:, LON1]) * m_lon
        out[:, Y0] -= (samples[:, LAT0] - d.lat_min) * m_lat
        out[:, Y1] += (d.lat_max - samples[:, LAT1]) * m_lat
        out[:, LON0], out[:, LON1], out[:, LAT0], out[:, LAT1] = d.lon_min, d.lon_max, d.lat_min, d.lat_max
        return out

    return refine


def anonymize(points: pd.DataFrame, pois: pd.DataFrame, params: KltParams, rng: np.random.Generator,
              bbox: tuple[float, float, float, float] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """KLT on an in-memory frame (``object_id, traj_id, t, lon, lat, x, y``) with a POI frame (``lon, lat,
    category``). ``bbox`` is the city whose POIs give the reference distribution (default: the POIs' extent).
    Returns ``(points, sources, summary)``."""
    gp = params.glove()
    grid = poi_grid(pois, params, bbox)
    fps = glove.build_fingerprints(points, gp)
    refine = region_refiner(grid, params) if params.grow_regions == "every_merge" else None
    result = glove.greedy_merge(fps, gp, refine=refine)
    released, sources = glove.release(fps, result, rng)
    out, stats = diversify_release(released, grid, params)
    return out, sources, summarise(fps, result, out, stats, grid, pois)


def poi_grid(pois: pd.DataFrame, params: KltParams, bbox=None) -> PoiGrid:
    if bbox is None:
        bbox = (float(pois["lon"].min()), float(pois["lat"].min()),
                float(pois["lon"].max()) + params.poi_cell_deg, float(pois["lat"].max()) + params.poi_cell_deg)
    return PoiGrid.build(pois, bbox, params.poi_cell_deg)


def summarise(fps, result, out: pd.DataFrame, stats: dict, grid: PoiGrid, pois: pd.DataFrame) -> dict:
    """GLOVE's summary of the k-anonymity phase, with the released counts of the final release and the l/t stats."""
    meta = glove.summary(fps, result, out.assign(x=np.nan, y=np.nan))
    meta.update(stats)
    meta["poi_source"] = str(pois.attrs.get("poi_source", "unspecified"))
    meta["synthetic_pois"] = meta["poi_source"].startswith("synthetic")
    meta["poi_categories"] = list(grid.categories)
    meta["pois_in_city"] = int(grid.prefix[:, -1, -1].sum())
    return meta
