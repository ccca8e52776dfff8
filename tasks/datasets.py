"""Dropping a loaded dataset (``trajpub dataset drop NAME``): the database function ``governance.drop_dataset``
(sql/020) does it for a steward's login, refusing while a release of the dataset is published or under way."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from tasks.governance import refusals
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
