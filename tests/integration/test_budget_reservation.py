"""The privacy budget is reserved at plan, before any data is read: releases racing over the
cap are refused before they read, validate or prepare anything."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.integration.conftest import base_spec, cli, start_release

pytestmark = pytest.mark.integration


def test_releases_racing_over_the_cap_are_refused_before_reading(engine, loaded_tdrive, tmp_path):
    dataset = loaded_tdrive("race")
    # room for one release at ε = 10 per record x 7 records = 70 per object, not two
    assert cli("budget", "cap", dataset, "100", "--steward", "ada").returncode == 0
    runs = [start_release(base_spec(dataset, approval_timeout_s=1), tmp_path) for _ in range(2)]
    codes = sorted(run.proc.wait(timeout=300) for run in runs)
    for run in runs:
        run.reader.join(timeout=10)
    assert codes == [0, 1], [run.output() for run in runs]
    refused = next(run for run in runs if run.proc.returncode == 1)
    assert "needs epsilon-DP epsilon 70 per object" in refused.output()
    assert "has only 30 of its cap 100 left" in refused.output()
    assert "snapshot:" not in refused.output() and "Traceback" not in refused.output()
    with engine.connect() as conn:
        releases = conn.execute(sa.text("SELECT release_id FROM governance.releases WHERE dataset = :d"),
                                {"d": dataset}).scalars().all()
        ledger = conn.execute(sa.text("SELECT release_id, entry_kind, epsilon FROM governance.budget_ledger WHERE"
                                      " dataset = :d"), {"d": dataset}).all()
        validated = conn.execute(sa.text("SELECT count(*) FROM governance.validation_results v JOIN "
                                         "governance.releases r USING (release_id) WHERE r.dataset = :d"),
                                 {"d": dataset}).scalar()
    assert len(releases) == 1 and validated == 1  # the refused release was never recorded, nothing was read
    assert [tuple(e) for e in ledger] == [(releases[0], "charge", 10.0)]
