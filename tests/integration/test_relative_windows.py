"""A relative window against the data it holds (tasks/windows.py): a run started by hand releases the last complete
window that holds data, in the dataset's weeks, or is refused in one sentence; a scheduled run's empty window is
skipped. On the T-Drive subset (2 to 8 February 2008, Beijing)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from tasks import windows
from trajpub.errors import ParameterError
from trajpub.spec import ReleaseSpec
from trajpub.window import window_words

pytestmark = pytest.mark.integration

NOW = datetime(2026, 12, 8, 3, tzinfo=UTC)


def weekly(dataset: str, **window) -> ReleaseSpec:
    return ReleaseSpec.from_dict({"dataset": dataset, "bbox": [115.4, 39.4, 117.6, 41.1],
                                  "window": {"last": "7d", "align": "local_week", **window}})


def test_a_run_by_hand_releases_the_last_complete_week_with_data(engine, owner, loaded_tdrive):
    dataset = loaded_tdrive("win")
    with engine.connect() as conn:
        latest = conn.execute(sa.text("SELECT max(t) FROM raw.points WHERE dataset = :d"), {"d": dataset}).scalar()
    spec = windows.resolve(engine, weekly(dataset), NOW, latest_with_data=True)
    # the week of the last point (Friday 8 February), Monday to Monday in Beijing, ends before now: complete
    assert (spec.window_start, spec.window_end) == (datetime(2008, 2, 3, 16, tzinfo=UTC),
                                                   datetime(2008, 2, 10, 16, tzinfo=UTC))
    assert spec.window_start <= latest < spec.window_end and spec.window["latest_with_data"] is True
    assert "the last complete window with data before the run" in window_words(spec.window_start, spec.window_end,
                                                                               spec.window)
    assert ReleaseSpec.from_dict(spec.to_record()) == spec  # recorded and read back as it ran
    # the same window resolved at its own time needs no moving back
    assert windows.resolve(engine, weekly(dataset), spec.window_end, latest_with_data=True).window_end == \
        spec.window_end
    # a scheduled run's window is its own: now's week holds nothing, so the run is skipped, charged nothing
    scheduled = windows.resolve(engine, weekly(dataset), NOW)
    assert scheduled.window_end > NOW.replace(day=1)
    assert windows.skipped(engine, scheduled).startswith("skipped: no data in the window ")
    assert windows.skipped(engine, spec) is None


def test_the_datasets_sunday_weeks_and_the_refusals(engine, owner, loaded_tdrive):
    dataset = loaded_tdrive("winsun")
    with owner.begin() as conn:  # what `trajpub budget unit D object --week-starts sunday` records
        conn.execute(sa.text("UPDATE governance.datasets SET week_start = 'sunday' WHERE dataset = :d"),
                     {"d": dataset})
    spec = windows.resolve(engine, weekly(dataset), NOW, latest_with_data=True)
    assert (spec.window_start, spec.window_end) == (datetime(2008, 2, 2, 16, tzinfo=UTC),  # Sunday 3 February
                                                   datetime(2008, 2, 9, 16, tzinfo=UTC))
    assert spec.window["week_starts"] == "sunday"
    with pytest.raises(ParameterError, match=r"has no points before 2008-01-26T16:00:00\+00:00: there is no "
                                             "complete window to release"):
        windows.resolve(engine, weekly(dataset), datetime(2008, 1, 29, tzinfo=UTC), latest_with_data=True)  # Sun 27
    unaligned = ReleaseSpec.from_dict({"dataset": dataset, "bbox": [115.4, 39.4, 117.6, 41.1],
                                       "window": {"last": "7d"}})
    with pytest.raises(ParameterError, match="holds no points of dataset .* align the window to local_day or "
                                             "local_week"):
        windows.resolve(engine, unaligned, NOW, latest_with_data=True)
