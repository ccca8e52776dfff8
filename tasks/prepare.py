"""Prepare on Dask: trajectories (time gaps, days), the local metric CRS and the grid, per partition."""

from __future__ import annotations

import pandas as pd
from distributed import Client, Future

from trajpub.grid import GridSpec
from trajpub.segment import keep_trajectories, segment, to_grid
from trajpub.spec import PrepareSpec


def prepare_partition(points: pd.DataFrame, partition: int, prep: PrepareSpec, grid: GridSpec,
                      max_per_object: int | None) -> pd.DataFrame:
    df = segment(points, prep.time_gap_minutes * 60, prep.split_by_day, partition)
    df = keep_trajectories(df, prep.min_points, max_per_object)
    return to_grid(df, grid)


def prepare(client: Client, clean: list[Future], prep: PrepareSpec, grid: GridSpec,
            max_per_object: int | None) -> tuple[list[Future], dict]:
    """Prepared partitions (futures) and counts for the review report."""
    futures = client.map(prepare_partition, clean, range(len(clean)), prep=prep, grid=grid,
                         max_per_object=max_per_object, pure=False)
    stats = client.gather(client.map(
        lambda df: (len(df), df["traj_id"].nunique(), df["object_id"].nunique()), futures))
    n_in = sum(client.gather(client.map(len, clean)))
    return futures, {"points_in": int(n_in), "points": int(sum(s[0] for s in stats)),
                     "trajectories": int(sum(s[1] for s in stats)), "objects": int(sum(s[2] for s in stats)),
                     "grid": grid.to_dict(), "time_gap_minutes": prep.time_gap_minutes,
                     "split_by_day": prep.split_by_day, "min_points": prep.min_points,
                     "max_records_per_object": max_per_object}
