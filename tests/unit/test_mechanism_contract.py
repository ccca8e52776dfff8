"""One contract for every registered mechanism, on the real T-Drive sample and real Dask
workers: the product's shape, the output suite, the guarantee's fields, no seed in what reaches lineage, and a
positive control: the raw data released unchanged is blocked by the same gate policy the mechanism faces."""

from __future__ import annotations

import itertools
import json
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from audits.gate import GatePolicy, evaluate_gate, worst_per_attack
from bench.utility_data import TDRIVE_WINDOW
from mechanisms.registry import REGISTRY, mechanism, package_module
from tasks import audit, check_output, lineage, protect
from tests.raw_scan import assert_none_readable
from trajpub.candidate import CandidateRelease, Shape
from trajpub.guarantee import ACCOUNTS
from trajpub.mechanism import Mechanism, PublicInputs

SEED = 20261126
N_TAXIS, MAX_POINTS = 10, 150


def case(name: str) -> ModuleType:
    """The contract case of the mechanism ``name``: ``contract.py`` of its package (docs/extending.md), with its
    ``PARAMS`` (or ``setup(grid)`` for a mechanism whose public inputs the contract builds) and optionally the
    ``SAMPLE`` (taxis, fixes per taxi) it needs beyond the first fixes of 10 taxis."""
    found = package_module(name, "contract")
    assert found is not None, f"mechanism {name} has no contract.py in its package"
    return found


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_registered_mechanism_has_a_contract_case(name):
    found = case(name)
    assert hasattr(found, "PARAMS") != hasattr(found, "setup"), f"{name}: contract.py gives PARAMS or setup(grid)"


def setup_of(name: str, grid) -> tuple:
    """(parameters, public inputs) of the contract's release of ``name``."""
    found = case(name)
    if hasattr(found, "setup"):
        return found.setup(grid)
    return mechanism(name).parse_params(found.PARAMS), PublicInputs(grid, window=TDRIVE_WINDOW)


def raw_statistics(prepared: pd.DataFrame) -> dict[str, float]:
    """The input's exact counts and bbox, as the flow's prepare step knows them. The number of objects is left
    out: the contract's 10 taxis would collide with parameters (FASTPub's epsilon 10)."""
    return {"points": len(prepared), "trajectories": prepared["traj_id"].nunique(),
            "lon_min": prepared["lon"].min(), "lat_min": prepared["lat"].min(),
            "lon_max": prepared["lon"].max(), "lat_max": prepared["lat"].max()}


CONTROLS: dict[str, tuple[bool, dict]] = {}  # one positive control per release kind


def control_decision(kind: str, client, frames) -> tuple[bool, dict]:
    """The default gate policy on the raw data released unchanged, as a release of ``kind``: the truthful and
    synthetic forms publish every raw point; the aggregate form the exact counts of every 2-cell fragment of a
    random half of the trajectories (the members), the rest held out."""
    raw = frames[2]
    if kind == "aggregate":
        rng = np.random.default_rng(SEED)
        trajs = raw["traj_id"].unique()
        members = set(rng.choice(trajs, len(trajs) // 2, replace=False).tolist())
        counts: dict[tuple, int] = {}
        for traj, cells in raw[raw["traj_id"].isin(members)].groupby("traj_id")["cell"]:
            c = cells.to_numpy()
            for frag in {(int(a), int(b)) for a, b in itertools.pairwise(c) if a != b}:
                counts[frag] = counts.get(frag, 0) + 1
        fragments = pd.DataFrame({"cells": [list(f) for f in counts], "estimated_count": list(counts.values())})
        owners = pd.DataFrame({"traj_id": sorted(members), "object_id": "", "source_traj_id": sorted(members)})
        candidate = CandidateRelease(Shape.FRAGMENTS, pd.DataFrame(), {}, fragments=fragments, owners=owners)
    else:
        columns = ["traj_id", "seq", "cell", "t", "lon", "lat", "x", "y"] + (["object_id"] if kind == "truthful"
                                                                            else [])
        candidate = CandidateRelease(Shape.TRUTHFUL if kind == "truthful" else Shape.SYNTHETIC, raw[columns].copy(), {})
    policy = GatePolicy.default()
    raw_frame, release = audit.attack_frames(raw, candidate)
    by_resolution, failures, not_applicable = audit.run_at_resolutions(client, policy, raw_frame, release, kind,
                                                                       frames[1].bbox)
    results = worst_per_attack(policy, by_resolution)
    # no utility figures: the privacy verdict counts
    decision = evaluate_gate(policy, results, kind, {}, failures, not_applicable)
    return decision.privacy == "blocked", {r.attack: r.risk for r in results} | failures


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_mechanism_contract(name, dask_client, sample_frames):
    frames = sample_frames(getattr(case(name), "SAMPLE", (N_TAXIS, MAX_POINTS)))
    setup, inputs = setup_of(name, frames[1])
    assert_contract(mechanism(name), setup, inputs, dask_client, frames, sample_frames)


def assert_contract(adapter: Mechanism, setup, inputs: PublicInputs, dask_client, frames: tuple,
                    sample_frames) -> None:
    """The contract of a registered mechanism with its parameters ``setup`` on the sample ``frames``: its
    guarantee, its Dask run's candidate, what lineage reads of it, and the positive control of its kind."""
    name, (futures, _, _) = adapter.name, frames
    g = adapter.guarantee(setup)  # the guarantee's fields, and its charge in the default unit (the object)
    assert g.model and g.privacy_unit and g.statement and g.privacy_map.account in ACCOUNTS
    charge = g.charge("object")
    assert charge.bounded, f"{name}: the per-object epsilon of the contract's parameters must be bounded"
    if g.privacy_map.account == "heuristic":
        assert charge.epsilon is None and not g.proven
    else:
        assert g.epsilon > 0 and charge.epsilon >= g.epsilon
    json.dumps(g.to_dict(), allow_nan=False)

    out = protect.run(adapter, dask_client, futures, inputs, setup, np.random.default_rng(SEED))
    assert out.shape is adapter.shape and out.check() is out  # the shape's columns, and nothing else
    if out.shape is not Shape.FRAGMENTS:
        pts = out.points
        assert len(pts)
        assert pts.groupby("traj_id")["seq"].apply(lambda s: (np.sort(s.to_numpy()) == np.arange(len(s))).all()).all()
        assert ("object_id" in pts or out.owners is not None) == (out.shape.audit_kind == "truthful")
        assert check_output.check(check_output.coarsen_times(out, 60), 60)  # the output suite, as the flow runs it

    # no seed in the run metadata or in what lineage carries of it, nor the seed's value
    lineage.check_no_seed(out.metadata)
    assert str(SEED) not in json.dumps(out.metadata, default=str)
    assert set(lineage.public_metadata(out.metadata)) <= set(lineage.PUBLIC_METADATA)
    # no exact statistic of the input among the numbers lineage and the consumer's card carry of this mechanism
    assert_none_readable(raw_statistics(frames[2]), {"lineage metadata": lineage.public_metadata(out.metadata),
                                                     "guarantee": json.loads(json.dumps(g.to_dict()))})

    # positive control: the same policy blocks the raw data released unchanged as this mechanism's kind
    kind = out.shape.audit_kind  # on the contract's main sample, once per kind
    if kind not in CONTROLS:
        CONTROLS[kind] = control_decision(kind, dask_client, sample_frames((N_TAXIS, MAX_POINTS)))
    blocked, risks = CONTROLS[kind]
    assert blocked, f"the default gate policy let the raw data through as a {kind} release: {risks}"
