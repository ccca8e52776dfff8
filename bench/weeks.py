"""The T-Drive sample as a weekly feed of many weeks (docs/design.md, "Relative windows").

Week ``k`` is the sample's week (2-8 February 2008, Beijing time) shifted by ``k`` weeks with the same taxi ids:
the same people driving the same week again. Each week is loaded as a source of its own through the project's
ingest path (:func:`tasks.load.load_source`, as ``trajpub load tdrive`` does), one after another, as a weekly feed
appends. Used by ``bench/history_cost.py`` and ``bench/continual.py``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import sqlalchemy as sa

from tasks.load import load_source
from trajpub.config import SHARED_DATA_DIR

TAXIS = 40
WEEK = timedelta(days=7)
FIRST = datetime(2008, 2, 1, 16, tzinfo=UTC)  # Saturday 2 February 2008, 00:00 Beijing time


def sample(taxis: int = TAXIS) -> pd.DataFrame:
    """The first ``taxis`` taxis (sorted ids) of the shipped T-Drive sample, as its CSV columns."""
    df = pd.read_csv(SHARED_DATA_DIR / "tdrive_sample_odd_taxis.csv.gz")
    return df[df["taxi_id"].isin(sorted(df["taxi_id"].unique())[:taxis])]


def shifted(points: pd.DataFrame, k: int) -> pd.DataFrame:
    """The sample's points with their (local) times ``k`` weeks later."""
    return points.assign(datetime=(pd.to_datetime(points["datetime"]) + k * WEEK).dt.strftime("%Y-%m-%d %H:%M:%S"))


def week_file(points: pd.DataFrame, k: int, folder: Path) -> Path:
    """The sample shifted by ``k`` weeks, as a T-Drive CSV."""
    path = folder / f"week_{k:02d}.csv"
    shifted(points, k).to_csv(path, index=False)
    return path


def load_weeks(eng: sa.Engine, dataset: str, points: pd.DataFrame, weeks: range,
               say: Callable[[str], None] = print) -> list[tuple[int, int, float]]:
    """Load the weeks ``weeks`` of the feed into ``dataset``, one source per week, in order; returns
    ``(k, points loaded, seconds)`` per week."""
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in weeks:
            began = time.perf_counter()
            report = load_source(eng, "tdrive", week_file(points, k, Path(tmp)), dataset)
            loads.append((k, report.n_loaded, time.perf_counter() - began))
            say(f"{dataset} week {k}: {report.n_loaded} points in {loads[-1][2]:.1f} s")
    return loads
