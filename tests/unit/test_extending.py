"""docs/extending.md, done: a toy mechanism and a toy attack, each one module of tests/toy/, each added by one
registration line, run through the local runner, the Dask runner and the mechanism contract, and the attack
through the gate."""

from __future__ import annotations

import numpy as np
import pytest

from audits import registry
from audits.gate import GatePolicy, evaluate_gate
from audits.registry import RegisteredAttack, build_attack
from tasks import protect
from tests.toy.attack import StartCell, StartCellParams
from tests.unit.test_mechanism_contract import assert_contract
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import ParameterError
from trajpub.mechanism import PublicInputs, run_local

SEED = 5


@pytest.fixture
def toy(monkeypatch):
    """The two registration lines of docs/extending.md, undone after the test."""
    monkeypatch.setitem(protect.REGISTRY, "toy_walks", "tests.toy.mechanism:ToyWalks")
    monkeypatch.setitem(registry.ATTACKS, "toy_start_cell",
                        RegisteredAttack(StartCell, StartCellParams, frozenset({"synthetic", "truthful"})))
    yield
    protect.mechanism.cache_clear()


def test_the_registered_toy_is_parsed_from_a_spec_and_refuses_bad_parameters(toy):
    mech = protect.mechanism("toy_walks")
    assert (mech.name, mech.shape, mech.max_records_per_object(mech.parse_params({}))) == \
        ("toy_walks", Shape.SYNTHETIC, 5)
    with pytest.raises(ParameterError, match="unknown parameter.*'colour'"):
        mech.parse_params({"colour": 1})
    with pytest.raises(ParameterError, match="epsilon must be a finite number > 0"):
        mech.parse_params({"epsilon": 0})


def test_the_toy_runs_locally_and_on_dask_alike(toy, dask_client, sample_frames):
    futures, grid, prepared = sample_frames((10, 150))
    mech = protect.mechanism("toy_walks")
    params = mech.parse_params({"epsilon": 2.0, "length": 4})
    local = run_local(mech, prepared, PublicInputs(grid), params, np.random.default_rng(SEED))
    assert local.shape is Shape.SYNTHETIC and set(local.points["seq"]) == {0, 1, 2, 3}
    # about one walk per input record: Laplace(1/2) noise is within 10 of 0 with probability 1 - e^-20
    assert abs(local.metadata["released_records"] - prepared["traj_id"].nunique()) <= 10
    # the Dask runner joins the partitions on a worker; the same seed draws the same walks
    on_dask = protect.run(mech, dask_client, futures, PublicInputs(grid), params, np.random.default_rng(SEED))
    assert on_dask.metadata == local.metadata


def test_the_toy_meets_the_mechanism_contract(toy, dask_client, sample_frames):
    frames = sample_frames((10, 150))
    mech = protect.mechanism("toy_walks")
    assert_contract(mech, mech.parse_params({"epsilon": 1.0}), PublicInputs(frames[1]), dask_client, frames,
                    sample_frames)


def test_the_registered_toy_attack_gates_a_release(toy, dask_client, sample_frames):
    """The raw data released unchanged starts every trajectory where a raw one starts (risk 1, blocked); the toy
    walks start anywhere (the data decides only their number), so their success is about the baseline."""
    _, grid, prepared = sample_frames((10, 150))
    policy = GatePolicy.from_dict({"attacks": {"toy_start_cell": {"max_risk": 0.5}}})
    assert policy.attacks_for("synthetic") == ["toy_start_cell"]
    attack = build_attack("toy_start_cell")
    raw = prepared[["traj_id", "seq", "cell"]]
    unchanged = attack.evaluate(raw, raw)
    assert unchanged.success_rate == 1.0 and unchanged.risk == 1.0
    assert evaluate_gate(policy, [unchanged], "synthetic", {}).privacy == "blocked"
    mech = protect.mechanism("toy_walks")
    walks = run_local(mech, prepared, PublicInputs(grid), mech.parse_params({}), np.random.default_rng(SEED))
    result = attack.evaluate(raw, walks.points)
    assert result.risk < 0.5 and evaluate_gate(policy, [result], "synthetic", {}).privacy == "passed"
    assert isinstance(walks, CandidateRelease)
