"""l-diversity and t-closeness of generalised regions by growing them over the POI grid (Tu et al. 2019; the
survey's [S-code] ``KLTMerge.mergePoint``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.klt.pois import PoiGrid

#: Region statuses: satisfied, or suppressed because l-diversity / t-closeness was not reached in time.
OK, FAIL_L, FAIL_T = 0, 1, 2


def kl_divergence(counts: np.ndarray, city: np.ndarray) -> np.ndarray:
    """KL(P ‖ Q) in nats of each row's distribution P = counts / sum from the city-wide Q, with 0·log 0 = 0 (a
    category absent from the region contributes nothing). Rows without any POI get +inf. The [S-code] instead adds
    "infinity" for every absent category, which makes t-closeness unreachable unless a region holds every
    category; we use the textbook definition."""
    counts = np.atleast_2d(np.asarray(counts, dtype=float))
    total = counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = counts / total
        terms = np.where(p > 0, p * np.log(p / city[None, :]), 0.0)
    kl = terms.sum(axis=1)
    return np.where(total[:, 0] > 0, kl, np.inf)


@dataclass(frozen=True)
class Diversified:
    """Grown regions: degree boxes, the rings added, distinct categories, KL divergence and the status."""

    lon_min: np.ndarray
    lat_min: np.ndarray
    lon_max: np.ndarray
    lat_max: np.ndarray
    rings: np.ndarray
    distinct: np.ndarray
    kl: np.ndarray
    status: np.ndarray


def diversify(grid: PoiGrid, lon_min, lat_min, lon_max, lat_max, l: int, t: float,
              max_rings: int) -> Diversified:
    """Grow every box until its POIs hold >= ``l`` distinct categories and their KL divergence from the city-wide
    distribution is <= ``t``.

    A box is first snapped outwards to the POI cells it touches, then grown by whole rings of cells (one cell on
    every side at a time, clipped at the grid's edge) until both conditions hold; that is the [S-code]'s two loops
    (l-diversity first, then t-closeness) since the number of distinct categories only grows, except that the
    [S-code] grows one side at a time, always the right side first while it can (which drifts every region
    eastwards). After ``max_rings`` rings, or once the box covers the whole grid, a region still failing is
    marked :data:`FAIL_L` or :data:`FAIL_T` (the caller suppresses it). The published box is the union of the
    original box and the grown cells, so it still contains everything the original box contained.
    """
    lon_min, lat_min = np.asarray(lon_min, dtype=float), np.asarray(lat_min, dtype=float)
    lon_max, lat_max = np.asarray(lon_max, dtype=float), np.asarray(lat_max, dtype=float)
    n = len(lon_min)
    c0, r0, c1, r1 = grid.cells_of(lon_min, lat_min, lon_max, lat_max)
    rings = np.full(n, -1, dtype=np.int64)
    distinct = np.zeros(n, dtype=np.int64)
    kl = np.full(n, np.inf)
    pending = np.arange(n)
    for s in range(max_rings + 1):
        a0, b0 = np.maximum(c0[pending] - s, 0), np.maximum(r0[pending] - s, 0)
        a1, b1 = np.minimum(c1[pending] + s, grid.n_cols - 1), np.minimum(r1[pending] + s, grid.n_rows - 1)
        counts = grid.counts(a0, b0, a1, b1)
        d = (counts > 0).sum(axis=1)
        k = kl_divergence(counts, grid.city)
        distinct[pending], kl[pending] = d, k
        done = (d >= l) & (k <= t)
        rings[pending[done]] = s
        full = (a0 == 0) & (b0 == 0) & (a1 == grid.n_cols - 1) & (b1 == grid.n_rows - 1)
        pending = pending[~done & ~full]
        if not len(pending):
            break
    ok = rings >= 0
    grow = np.where(ok, rings, 0)
    a0, b0 = np.maximum(c0 - grow, 0), np.maximum(r0 - grow, 0)
    a1, b1 = np.minimum(c1 + grow, grid.n_cols - 1), np.minimum(r1 + grow, grid.n_rows - 1)
    g_lon0, g_lat0, g_lon1, g_lat1 = grid.box_of(a0, b0, a1, b1)
    status = np.where(ok, OK, np.where(distinct < l, FAIL_L, FAIL_T))
    return Diversified(np.minimum(lon_min, g_lon0), np.minimum(lat_min, g_lat0), np.maximum(lon_max, g_lon1),
                       np.maximum(lat_max, g_lat1), rings, distinct, kl, status)
