"""Released slot series back to the point frame of docs/design.md (one row per released point).

Times are the slot centres of each local day (:func:`mechanisms.fgs_pufferfish.prepare.slot_times`). Under
the paper's model this is fine for the slot *grid*: it is public and the same for every object and day (τ and N
are parameters). What is data-dependent is **which days** an object has: the dates of its released days (the
days that passed the coverage rules) are published in clear, as is the grouping of days by object (the paper
releases per-user daily trajectories, and its adversary computes each user's ensemble correlation from them).
Neither is covered by the Pufferfish guarantee, which protects only the temporal correlation (§V-A).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms.fgs_pufferfish.mechanism import ReleasedDays
from mechanisms.fgs_pufferfish.prepare import slot_times
from trajpub.grid import GridSpec

POINT_COLUMNS = ("object_id", "traj_id", "day", "seq", "t", "x", "y", "lon", "lat", "dx", "dy", "mean_x", "mean_y")


def released_points(
    object_id: object,
    dates: np.ndarray,
    released: ReleasedDays,
    grid: GridSpec,
    timezone: str,
    traj_ids: np.ndarray | None = None,
) -> pd.DataFrame:
    """One row per (day, slot) of one object's release, columns ``POINT_COLUMNS``.

    dates: the local dates (D,) of the released days; traj_ids: one id per day (default 0..D−1).
    seq is the slot n, t its UTC centre; (dx, dy) are x'_n, y'_n and (mean_x, mean_y) the published
    X̄_n, Ȳ_n (Alg. 1 line 15); x = mean_x + dx, y = mean_y + dy in the grid's metric CRS and lon/lat their
    WGS84 position. With the mean trajectory withheld, x, y, lon, lat, mean_x, mean_y are NaN: the release
    holds deviations only.
    """
    n_days, n_slots, _ = released.deviation.shape
    ids = np.arange(n_days) if traj_ids is None else np.asarray(traj_ids)
    if len(ids) != n_days or len(dates) != n_days:
        raise ValueError("one date and one traj_id per released day")
    dev = released.deviation.reshape(-1, 2)
    if released.mean is None:
        mean = np.full_like(dev, np.nan)
    else:
        mean = np.broadcast_to(released.mean, released.deviation.shape).reshape(-1, 2)
    pos = mean + dev
    if released.mean is None:
        lon = lat = np.full(len(pos), np.nan)
    else:
        lon, lat = grid.unproject(pos[:, 0], pos[:, 1])
    times = slot_times(dates, n_slots, timezone).reshape(-1)
    return pd.DataFrame({
        "object_id": np.full(len(pos), object_id, dtype=object),
        "traj_id": np.repeat(ids, n_slots),
        "day": np.repeat(np.asarray(dates, dtype="datetime64[D]"), n_slots),
        "seq": np.tile(np.arange(n_slots), n_days),
        "t": pd.to_datetime(times, utc=True),
        "x": pos[:, 0],
        "y": pos[:, 1],
        "lon": np.asarray(lon, dtype=float),
        "lat": np.asarray(lat, dtype=float),
        "dx": dev[:, 0],
        "dy": dev[:, 1],
        "mean_x": mean[:, 0],
        "mean_y": mean[:, 1],
    })
