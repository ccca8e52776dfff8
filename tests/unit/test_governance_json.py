"""Release summaries go to a jsonb column: numbers JSON cannot hold become null instead of failing the release."""

import json
import math

import numpy as np

from tasks.governance import json_finite


def test_non_finite_numbers_become_null_at_any_depth():
    summary = {"mechanism": {"confident_trip_count": math.inf, "scale": np.float64("nan"), "k": 5,
                             "edges": [1.5, -math.inf, {"x": math.nan}], "name": "adatrace"}}
    clean = json_finite(summary)
    assert json.loads(json.dumps(clean, allow_nan=False)) == {
        "mechanism": {"confident_trip_count": None, "scale": None, "k": 5, "edges": [1.5, None, {"x": None}],
                      "name": "adatrace"}}
