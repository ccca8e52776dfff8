"""The learned membership attacker (a cross-fitted classifier on place, shape and time features) on random walks:
its AUC's interval holds 0.5 when the release only learns the population, and excludes it when members' records
are published turned, moved and re-timed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audits.learned_membership import FEATURES, features, learned_membership, logistic
from tests.controls.blurring import blurred
from tests.unit.test_audits_blurring import as_released, split, walks


@pytest.fixture(scope="module")
def raw():
    return split(walks(200, 1))


def test_a_release_of_the_population_gives_no_advantage(raw):
    result = learned_membership(raw, as_released(walks(300, 2, prefix="s")), seed=0)
    assert result.auc_low <= 0.5 <= result.auc_high
    assert set(result.coefficients) == set(FEATURES)


def test_blurred_members_are_separated_from_controls(raw):
    """Every member's first walk turned, maybe mirrored, moved 1-5 km and re-timed 1-6 h (the ``combined``
    control), among the population's walks: the shape feature separates them."""
    rng = np.random.default_rng(7)
    firsts = raw[raw["member"]].groupby("object_id")["traj_id"].first()
    parts = [walks(300, 2, prefix="s")]
    for i, traj in enumerate(firsts):
        out = blurred(raw[raw["traj_id"] == traj], "combined", rng)
        parts.append(out.assign(traj_id=f"b{i}", seq=np.arange(len(out))))
    release = as_released(pd.concat(parts, ignore_index=True))
    result = learned_membership(raw, release, seed=0)
    assert result.auc_low > 0.5
    assert features(raw, release).loc[:, "shape"].max() > 0


def test_logistic_regression_recovers_a_separating_direction():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2))
    y = (x[:, 0] + 0.1 * rng.normal(size=400) > 0).astype(float)
    w = logistic(x, y)
    assert w[0] > 5 * abs(w[1])
