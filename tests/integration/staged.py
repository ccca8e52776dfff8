"""Releases taken through the status machine with a tiny candidate staged directly (no flow run): for tests of
what happens after approval (publication, the latest views, withdrawal, recovery)."""

from __future__ import annotations

import uuid

import pandas as pd
import sqlalchemy as sa

from tasks import governance
from tasks.db import steward_engine
from tests.integration.conftest import new_release, to_awaiting_approval
from trajpub.candidate import CandidateRelease, Shape
from trajpub.guarantee import Guarantee, PrivacyMap

T0 = pd.Timestamp("2024-01-01T08:00:00Z")


def points(**extra) -> pd.DataFrame:
    base = pd.DataFrame({"traj_id": [1, 1, 2], "seq": [0, 1, 0], "cell": [3, 4, 5],
                         "t": [T0, T0 + pd.Timedelta(minutes=1), T0], "lon": [116.30, 116.31, 116.32],
                         "lat": [39.90, 39.91, 39.92]})
    return base.assign(**extra)


SHAPES = {
    "trajectories": lambda: CandidateRelease(Shape.SYNTHETIC, points(), {}),
    "anonymity_sets": lambda: CandidateRelease(Shape.ANONYMITY_SETS, points(set_id=[1, 1, 2], object_id="a"), {}),
    "generalised": lambda: CandidateRelease(Shape.GENERALISED, points(
        set_id=[1, 1, 2], object_id="a", lon_min=[116.29] * 3, lat_min=[39.89] * 3, lon_max=[116.33] * 3,
        lat_max=[39.93] * 3, t_end=[T0 + pd.Timedelta(minutes=5)] * 3), {}),
    "fragments": lambda: CandidateRelease(Shape.FRAGMENTS, pd.DataFrame(), {}, fragments=pd.DataFrame(
        {"fragment_id": [1, 2], "cells": [[3, 4], [5]], "estimated_count": [12.5, 3.0], "round": [1, 1],
         "lon": [[116.30, 116.31], [116.32]], "lat": [[39.90, 39.91], [39.92]]})),
}


def new_dataset(engine) -> str:
    name = f"shape_{uuid.uuid4().hex[:10]}"
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO raw.datasets (dataset) VALUES (:d)"), {"d": name})
        conn.execute(sa.text("INSERT INTO governance.datasets (dataset) VALUES (:d)"), {"d": name})
    return name


def approved_release(engine, dataset: str, shape: str, charge: float | None = None) -> int:
    """A release taken through the status machine with a tiny candidate of ``shape`` staged, approved; with
    ``charge``, the ledger charged that epsilon-DP per object when it was planned, as the flow does."""
    rid = new_release(engine, dataset)
    if charge is not None:
        with engine.begin() as conn:
            governance.charge_budget(conn, rid, dataset, "test", Guarantee(
                model="epsilon-DP", privacy_unit="one object", statement="test", proven=True, epsilon=charge,
                privacy_map=PrivacyMap("epsilon-DP", "per_object")))
    to_awaiting_approval(engine, rid, SHAPES[shape]().check())
    with steward_engine("ada").begin() as conn:  # a steward login (the session fixture `stewards` adds it)
        governance.decide(conn, rid, "approved", None)
    return rid
