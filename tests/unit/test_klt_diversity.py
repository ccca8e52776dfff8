"""KL divergence, the POI grid's counts and region growth, on hand-checked cases; the OSM category mapping."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mechanisms.klt import (
    FAIL_L,
    FAIL_T,
    OK,
    PoiGrid,
    diversify,
    kl_divergence,
    synthetic_pois,
)
from trajpub.errors import ParameterError
from trajpub.osm import categorise_osm

D = 0.01  # cell size of the toy grids, degrees


def test_kl_hand_checked():
    city = np.array([0.25, 0.25, 0.5])
    # P = (1/2, 1/2, 0): 1/2 ln 2 + 1/2 ln 2 + 0 (0 log 0 = 0)
    assert kl_divergence([[2, 2, 0]], city)[0] == pytest.approx(math.log(2))
    assert kl_divergence([[1, 1, 2]], city)[0] == pytest.approx(0.0)
    assert kl_divergence([[0, 0, 0]], city)[0] == math.inf
    # P = (0.1, 0.2, 0.7): sum p ln(p/q)
    expected = 0.1 * math.log(0.4) + 0.2 * math.log(0.8) + 0.7 * math.log(1.4)
    assert kl_divergence([[1, 2, 7]], city)[0] == pytest.approx(expected)


def toy_grid(cells: list[tuple[int, int, str]]) -> PoiGrid:
    """POIs at the centres of (col, row) cells of a 10 x 10 grid of 0.01 degrees at (0, 0)."""
    pois = pd.DataFrame({"lon": [(c + 0.5) * D for c, _, _ in cells], "lat": [(r + 0.5) * D for _, r, _ in cells],
                         "category": [k for _, _, k in cells]})
    return PoiGrid.build(pois, (0.0, 0.0, 10 * D, 10 * D), D)


def test_grid_counts_rectangles():
    g = toy_grid([(0, 0, "a"), (1, 0, "a"), (1, 1, "b"), (9, 9, "c")])
    assert g.categories == ("a", "b", "c")
    assert g.city == pytest.approx([0.5, 0.25, 0.25])
    assert g.counts(np.array([0]), np.array([0]), np.array([1]), np.array([1])).tolist() == [[2, 1, 0]]
    assert g.counts(np.array([1]), np.array([1]), np.array([9]), np.array([9])).tolist() == [[0, 1, 1]]
    assert g.counts(np.array([0]), np.array([0]), np.array([9]), np.array([9])).tolist() == [[2, 1, 1]]


def test_region_grows_by_rings_until_l_categories():
    g = toy_grid([(5, 5, "a"), (6, 5, "b"), (7, 5, "c"), (0, 0, "a"), (0, 9, "b"), (9, 0, "c")])
    box = [(5.2 * D,), (5.2 * D,), (5.4 * D,), (5.4 * D,)]  # inside cell (5, 5)
    out = diversify(g, *box, l=3, t=10.0, max_rings=5)
    assert out.status.tolist() == [OK] and out.rings.tolist() == [2] and out.distinct.tolist() == [3]
    assert [out.lon_min[0], out.lat_min[0], out.lon_max[0], out.lat_max[0]] == pytest.approx(
        [3 * D, 3 * D, 8 * D, 8 * D])
    # one ring short of the third category: suppressed for l-diversity
    assert diversify(g, *box, l=3, t=10.0, max_rings=1).status.tolist() == [FAIL_L]


def test_region_keeps_growing_for_t_closeness():
    # near (5, 5): a, b, c once each; the city is dominated by "a" far away, so KL of the near region is large
    cells = [(5, 5, "a"), (6, 5, "b"), (4, 5, "c")] + [(0, r, "a") for r in range(10)]
    g = toy_grid(cells)
    box = [(5.5 * D,), (5.5 * D,), (5.5 * D,), (5.5 * D,)]
    near = kl_divergence(np.array([[1, 1, 1]]), g.city)[0]
    assert near > 0.3
    out = diversify(g, *box, l=3, t=0.3, max_rings=3)
    assert out.status.tolist() == [FAIL_T]
    grown = diversify(g, *box, l=3, t=0.3, max_rings=10)
    assert grown.status.tolist() == [OK] and grown.rings[0] == 5 and grown.kl[0] <= 0.3  # reaches column 0


def test_grown_regions_hold_l_categories_and_kl_at_most_t_by_direct_count():
    rng = np.random.default_rng(11)
    pois = synthetic_pois((0.0, 0.0, 0.2, 0.2), 400, 6, rng)
    g = PoiGrid.build(pois, (0.0, 0.0, 0.2, 0.2), 0.005)
    lon0, lat0 = rng.uniform(0, 0.19, 300), rng.uniform(0, 0.19, 300)
    out = diversify(g, lon0, lat0, lon0 + rng.uniform(0, 0.01, 300), lat0 + rng.uniform(0, 0.01, 300),
                    l=4, t=0.15, max_rings=3)
    assert (out.status == OK).sum() > 50 and (out.status != OK).sum() > 50  # both cases are exercised
    assert (out.lon_min <= lon0).all() and (out.lat_min <= lat0).all()
    city = pois["category"].value_counts(normalize=True).sort_index().to_numpy()
    for i in np.flatnonzero(out.status == OK):
        inside = pois[pois["lon"].between(out.lon_min[i], out.lon_max[i])
                      & pois["lat"].between(out.lat_min[i], out.lat_max[i])]
        counts = inside["category"].value_counts().reindex(sorted(pois["category"].unique()), fill_value=0)
        assert (counts > 0).sum() >= 4
        assert kl_divergence(counts.to_numpy()[None, :], city)[0] <= 0.15 + 1e-12


def test_no_poi_in_the_area_is_a_clear_error():
    pois = synthetic_pois((10.0, 10.0, 11.0, 11.0), 50, 3, np.random.default_rng(0))
    with pytest.raises(ParameterError) as err:
        PoiGrid.build(pois, (0.0, 0.0, 1.0, 1.0), 0.001)
    assert err.value.where == "klt.pois" and "no POI" in err.value.message


def test_synthetic_pois_are_labelled():
    p = synthetic_pois((0.0, 0.0, 1.0, 1.0), 20, ("x", "y"), np.random.default_rng(0))
    assert p.attrs["poi_source"].startswith("synthetic") and set(p["category"]) <= {"x", "y"}
    assert p["lon"].between(0, 1).all()


def test_osm_tags_map_to_the_category_set():
    tags = pd.DataFrame({"amenity": ["restaurant", "bench", None, None, None, "bank", None],
                         "shop": [None, None, "bakery", None, None, None, None],
                         "tourism": [None, None, None, "hotel", "information", None, "museum"]})
    assert categorise_osm(tags).tolist() == ["food", None, "shopping", "lodging", None, "finance",
                                             "culture_leisure"]


def test_region_refiner_grows_degree_and_metric_boxes_together():
    from mechanisms.glove.stretch import LAT0, LAT1, LON0, LON1, X0, X1, Y0, Y1, point_samples
    from mechanisms.klt import KltParams, region_refiner

    g = toy_grid([(5, 5, "a"), (6, 5, "b"), (7, 5, "c"), (0, 0, "a"), (0, 9, "b"), (9, 0, "c")])
    s = point_samples(np.array([0.0]), np.array([0.0]), np.array([0.0]), np.array([5.5 * D]), np.array([5.5 * D]))
    out = region_refiner(g, KltParams(l=3, t=10.0, poi_cell_deg=D, max_expand_cells=5))(s)
    assert [out[0, LON0], out[0, LAT0], out[0, LON1], out[0, LAT1]] == pytest.approx([3 * D, 3 * D, 8 * D, 8 * D])
    m_lon = 111_320.0 * math.cos(math.radians(5.5 * D))
    assert out[0, X0] == pytest.approx(-2.5 * D * m_lon) and out[0, X1] == pytest.approx(2.5 * D * m_lon)
    assert out[0, Y0] == pytest.approx(-2.5 * D * 110_574.0) and out[0, Y1] == pytest.approx(2.5 * D * 110_574.0)
