"""Shared fixtures of the unit tests (pure: no database, no Prefect)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

# Table II of Chen, Fung, Desai (arXiv:1112.2020, Example 4.1), with L1..L4 mapped to 0..3.
PREFIX_TREE_TOY = [
    [0, 1, 2],
    [0, 1],
    [2, 1, 0],
    [0, 1, 3],
    [0, 1, 2],
    [2, 1],
    [0, 1, 3, 0],
    [2, 0],
]


def _csr(trajectories: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = [len(t) for t in trajectories]
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    locs = np.concatenate([np.asarray(t, dtype=np.int64) for t in trajectories]) if trajectories else []
    return offsets, np.asarray(locs, dtype=np.int64)


@pytest.fixture
def prefix_tree_toy() -> tuple[np.ndarray, np.ndarray]:
    """Table II of the prefix-tree paper as CSR ``(offsets, locs)`` over 4 locations."""
    return _csr(PREFIX_TREE_TOY)


@pytest.fixture(scope="session")
def random_walk_csr() -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """Factory of synthetic trajectories: random walks on a ring of ``n_locations`` cells, steps in
    {−2..2}, start cells from a skewed distribution, geometric lengths with the given mean."""

    def make(n_trajectories: int, n_locations: int, mean_length: float, seed: int):
        rng = np.random.default_rng(seed)
        lengths = rng.geometric(1.0 / mean_length, n_trajectories)
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        start_weights = rng.dirichlet(np.full(n_locations, 0.3))
        start = rng.choice(n_locations, n_trajectories, p=start_weights)
        steps = rng.integers(-2, 3, offsets[-1])
        steps[offsets[:-1]] = 0
        owner = np.repeat(np.arange(n_trajectories), lengths)
        walk = np.cumsum(steps)
        walk -= np.repeat(walk[offsets[:-1]], lengths)
        return offsets, (start[owner] + walk) % n_locations

    return make


# --- the new mechanisms' adapters on real Dask workers, fed the real T-Drive sample -----------------------------

TDRIVE_BBOX = (115.4, 39.4, 117.6, 41.1)


@pytest.fixture(scope="session")
def tdrive_points():
    """The T-Drive sample (``object_id, t, lon, lat``, UTC), without exact repeats and with increasing times."""
    import pandas as pd

    from trajpub.config import SHARED_DATA_DIR

    d = pd.read_csv(SHARED_DATA_DIR / "tdrive_sample_odd_taxis.csv.gz")
    t = pd.to_datetime(d["datetime"]).dt.tz_localize("Asia/Shanghai").dt.tz_convert("UTC")
    df = pd.DataFrame({"object_id": d["taxi_id"].astype(str), "t": t, "lon": d["longitude"], "lat": d["latitude"]})
    df = df.drop_duplicates(["object_id", "t"]).sort_values(["object_id", "t"], kind="stable")
    inside = df["lon"].between(TDRIVE_BBOX[0], TDRIVE_BBOX[2]) & df["lat"].between(TDRIVE_BBOX[1], TDRIVE_BBOX[3])
    return df[inside].reset_index(drop=True)


@pytest.fixture(scope="session")
def tdrive_prepared(dask_client, tdrive_points):
    """``make(n_taxis, cell_size_m=2000, max_points=None)`` → ``(futures, grid, prepared)``: the first
    ``n_taxis`` taxis (optionally the first ``max_points`` fixes of each) prepared as the flow's prepare task does
    (30 min gaps, split by day, at least 2 points), in two partitions scattered to the workers, plus the same
    rows as one frame for checking."""
    import pandas as pd

    from trajpub.grid import GridSpec
    from trajpub.segment import keep_trajectories, segment, to_grid

    def make(n_taxis: int, cell_size_m: float = 2000.0, max_points: int | None = None):
        grid = GridSpec(TDRIVE_BBOX, cell_size_m)
        taxis = tdrive_points["object_id"].drop_duplicates().iloc[:n_taxis]
        pts = tdrive_points[tdrive_points["object_id"].isin(taxis)]
        if max_points is not None:
            pts = pts.groupby("object_id").head(max_points)
        codes = pd.factorize(pts["object_id"])[0] % 2
        parts = []
        for p in (0, 1):
            df = keep_trajectories(segment(pts[codes == p].reset_index(drop=True), 30 * 60, True, p), 2, None)
            df = to_grid(df, grid)
            parts.append(df[df["cell"] >= 0].reset_index(drop=True))
        futures = dask_client.scatter(parts)
        return futures, grid, pd.concat(parts, ignore_index=True)

    return make


@pytest.fixture(scope="session")
def sample_frames(tdrive_prepared):
    """``get((n_taxis, max_points))``: ``tdrive_prepared``'s sample, scattered once and held for the session
    (a re-scatter of the same rows reuses their keys, and releasing the older futures would drop the data under
    the newer ones: every module that wants a sample takes it from here)."""
    frames: dict[tuple, tuple] = {}

    def get(sample: tuple) -> tuple:
        if sample not in frames:
            frames[sample] = tdrive_prepared(sample[0], max_points=sample[1])
        return frames[sample]

    return get
