"""The mechanism contract's case for mixzone (tests/unit/test_mechanism_contract.py, docs/extending.md)."""

from __future__ import annotations

import numpy as np

from mechanisms.mixzone import MixzoneParams
from trajpub.grid import GridSpec
from trajpub.mechanism import OnRoadNetwork, PublicInputs
from trajpub.road_synthetic import synthetic_grid

#: the parameter a spec must give: an empty parameter mapping is refused naming it
REQUIRED = "road_network"


def setup(grid: GridSpec) -> tuple[OnRoadNetwork, PublicInputs]:
    """Its parameters and public inputs on the contract's T-Drive sample: a release reads its road network from
    the database; the contract gives it a synthetic grid of roads over Beijing."""
    x0, y0 = grid.project(116.25, 39.80)
    net = synthetic_grid(25, 25, 800.0, rng=np.random.default_rng(1), origin=(float(x0), float(y0)), crs=grid.crs)
    return (OnRoadNetwork(MixzoneParams(radius_m=300.0, n_zones=60), "synthetic-beijing", "synthetic"),
            PublicInputs(grid, road_network=net, road_network_source="synthetic"))
