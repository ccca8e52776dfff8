"""The review's plots read every raw trajectory up to a cap, then every k-th whole trajectory (tasks.audit)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.audit import _every_kth_trajectory


def frame(lengths: list[int]) -> pd.DataFrame:
    traj = np.repeat(np.arange(100, 100 + len(lengths)), lengths)
    return pd.DataFrame({"traj_id": traj, "seq": np.concatenate([np.arange(n) for n in lengths])})


def test_under_the_cap_the_plots_read_every_trajectory():
    raw = frame([3, 4, 5])
    kept, every = _every_kth_trajectory(raw, cap=12)
    assert every == 1 and kept is raw


def test_over_the_cap_every_kth_trajectory_is_kept_whole():
    raw = frame([4] * 10)  # 40 points, cap 15: k = 3, trajectories 0, 3, 6, 9 of the order of appearance
    kept, every = _every_kth_trajectory(raw, cap=15)
    assert every == 3
    assert sorted(kept["traj_id"].unique()) == [100, 103, 106, 109]
    assert kept.groupby("traj_id").size().eq(4).all()  # no trajectory cut
