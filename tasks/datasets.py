"""What a loaded dataset holds (``trajpub dataset list|show``) and dropping one (``trajpub dataset drop NAME``: the
database function ``governance.drop_dataset``, sql/020, does it for a steward's login, refusing while a release of
the dataset is published or under way).

The summary is for the operator and the steward (the pipeline role reads it from ``raw`` and ``governance``): it
holds exact counts and the exact time range of the raw data, so it is printed, never published."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

import sqlalchemy as sa

from tasks.governance import accounts, datasets, refusals, unit_of
from trajpub.spec import validate_dataset_name


@dataclass(frozen=True)
class DatasetDrop:
    """What one drop removed (recorded, append-only, in ``governance.dataset_drops`` with the steward)."""

    dataset: str
    steward: str
    n_sources: int
    n_points: int


def drop_dataset(steward_engine: sa.Engine, dataset: str) -> DatasetDrop:
    """Delete ``dataset``'s raw points, sources, quarantine and staging in one transaction, as the steward whose
    login ``steward_engine`` uses; its releases, ledger, approvals and lineage stay. Raises
    :class:`~trajpub.errors.PolicyError` (one sentence, from the database) when the drop is refused."""
    validate_dataset_name(dataset, "dataset drop NAME")
    with steward_engine.begin() as conn, refusals():
        row = conn.execute(sa.text("SELECT * FROM governance.drop_dataset(:d)"), {"d": dataset}).mappings().one()
    return DatasetDrop(dataset=row["dataset"], steward=row["steward"], n_sources=int(row["n_sources"]),
                       n_points=int(row["n_points"]))


@dataclass(frozen=True)
class Source:
    """One loaded file (``raw.sources``)."""

    format: str
    path: str
    n_loaded: int
    n_quarantined: int
    loaded_at: datetime


@dataclass(frozen=True)
class DatasetSummary:
    """What a dataset holds: its time range, objects, points and sources; its unit of protection and budget."""

    dataset: str
    timezone: str | None
    first: datetime | None
    last: datetime | None
    n_objects: int
    n_points: int
    sources: tuple[Source, ...]
    unit: str
    budget: tuple[str, ...]
    week_start: str = "monday"

    def local(self, t: datetime | None) -> str:
        """``t`` in UTC and in the dataset's zone ("2008-02-01 16:00 UTC = 2008-02-02 00:00 Asia/Shanghai")."""
        if t is None:
            return "-"
        utc = f"{t.astimezone(ZoneInfo('UTC')):%Y-%m-%d %H:%M} UTC"
        if not self.timezone:
            return utc
        return f"{utc} = {t.astimezone(ZoneInfo(self.timezone)):%Y-%m-%d %H:%M} {self.timezone}"

    def lines(self) -> list[str]:
        """The summary as ``trajpub dataset show`` prints it."""
        out = [f"{self.dataset}",
               f"  time range: {self.local(self.first)} .. {self.local(self.last)}",
               f"  objects: {self.n_objects:,}; points: {self.n_points:,}",
               f"  unit of protection: {self.unit}",
               f"  weeks start on {self.week_start.capitalize()} (trajpub budget unit --week-starts)",
               "  budget:", *(f"    {line}" for line in self.budget),
               f"  sources ({len(self.sources)}):"]
        out += [f"    {s.format} {s.path}: {s.n_loaded:,} points loaded, {s.n_quarantined:,} quarantined "
                f"({s.loaded_at:%Y-%m-%d %H:%M} UTC)" for s in self.sources]
        return out


def summaries(conn: sa.Connection, dataset: str | None = None) -> list[DatasetSummary]:
    """Every loaded dataset's summary (``dataset`` alone when given; refused when it has not been loaded)."""
    out = []
    for name in datasets(conn, dataset):
        span = conn.execute(sa.text("SELECT min(t) AS first, max(t) AS last, count(DISTINCT object_id) AS objects,"
                                    " count(*) AS points FROM raw.points WHERE dataset = :d"), {"d": name}).one()
        sources = tuple(Source(r.format, r.path, int(r.n_loaded), int(r.n_quarantined), r.loaded_at)
                        for r in conn.execute(sa.text(
                            "SELECT format, path, n_loaded, n_quarantined, loaded_at FROM raw.sources"
                            " WHERE dataset = :d ORDER BY source_id"), {"d": name}))
        unit = unit_of(conn, name)
        out.append(DatasetSummary(name, unit.tz, span.first, span.last, int(span.objects), int(span.points), sources,
                                  unit.describe(), tuple(a.describe() for a in accounts(conn, name).values()),
                                  unit.week_start))
    return out
