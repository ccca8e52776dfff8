"""docs/extending.md, done: two toy mechanisms of two shapes (synthetic walks, anonymity sets), each one package
copied from tests/toy/ into a fresh folder and added by one registry line, and a toy attack added by one
registration line. Nothing else is written: the contract, the example-spec, the required-parameter, the shape-map
and the DP-audit tests find each toy through the registry, and the attack gates a release."""

from __future__ import annotations

import shutil
import site
import sys
from pathlib import Path

import numpy as np
import pytest

from audits import dp_scenarios
from audits import registry as attacks
from audits.gate import GatePolicy, evaluate_gate
from audits.registry import RegisteredAttack, build_attack
from mechanisms import registry
from tasks import protect
from tests.toy.attack import StartCell, StartCellParams
from tests.unit import test_candidate, test_example_specs, test_protect_adapters
from tests.unit.test_mechanism_contract import (
    assert_contract,
    setup_of,
    test_every_registered_mechanism_has_a_contract_case,
)
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import ParameterError
from trajpub.mechanism import PublicInputs, run_local

SEED = 5
TOYS = Path(__file__).parents[1] / "toy"
#: the toys: name -> (the one registry line's value, shape)
LINES = {"toy_walks": ("toy_walks.adapter:ToyWalks", Shape.SYNTHETIC),
         "toy_sets": ("toy_sets.adapter:ToySets", Shape.ANONYMITY_SETS)}


@pytest.fixture(params=sorted(LINES))
def toy(request, tmp_path, monkeypatch) -> str:
    """One toy added as docs/extending.md says: its package (here copied into an empty folder on the path) and
    one registry line; both undone after the test."""
    name = request.param
    before = dict(registry.REGISTRY)
    shutil.copytree(TOYS / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.REGISTRY, name, LINES[name][0])
    # everything written: one package folder, one registry entry
    assert {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*")} == {name}
    assert {k: v for k, v in registry.REGISTRY.items() if before.get(k) != v} == {name: LINES[name][0]}
    yield name
    registry.mechanism.cache_clear()
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]


@pytest.fixture
def workers(toy, tmp_path, dask_client):
    """The Dask client, its workers (other processes) also importing from the toy's folder (left on their path:
    a later test's copy of the same toy is the same code)."""
    dask_client.run(site.addsitedir, str(tmp_path))
    return dask_client


@pytest.fixture
def toy_attack(monkeypatch):
    """The one registration line of the toy attack, undone after the test."""
    monkeypatch.setitem(attacks.ATTACKS, "toy_start_cell",
                        RegisteredAttack(StartCell, StartCellParams, frozenset({"synthetic", "truthful"})))


def test_the_registered_toy_is_parsed_from_its_example_spec_and_refuses_bad_parameters(toy):
    mech = registry.mechanism(toy)
    assert (mech.name, mech.shape) == (toy, LINES[toy][1])
    test_example_specs.test_every_mechanism_has_an_example_spec_that_names_it(toy)
    test_example_specs.test_example_spec_parses(registry.example_spec_file(toy))
    test_protect_adapters.test_an_empty_parameter_mapping_runs_on_defaults_or_names_what_is_missing(toy)
    with pytest.raises(ParameterError, match="unknown parameter.*'colour'"):
        mech.parse_params({"colour": 1})


def test_the_toy_meets_the_mechanism_contract(toy, workers, sample_frames):
    test_every_registered_mechanism_has_a_contract_case(toy)
    frames = sample_frames((10, 150))
    setup, inputs = setup_of(toy, frames[1])
    assert_contract(registry.mechanism(toy), setup, inputs, workers, frames, sample_frames)


def test_the_shape_map_holds_with_the_toy_registered(toy):
    """The tests of sql/023's map pass unchanged: a mechanism of any shape added since needs no entry there."""
    test_candidate.test_the_applied_migration_that_backfills_shapes_is_unchanged()
    test_candidate.test_the_migration_gives_each_mechanism_it_backfilled_the_shape_the_registry_declares()


def test_the_toy_runs_locally_and_on_dask_alike(toy, workers, sample_frames):
    futures, grid, prepared = sample_frames((10, 150))
    mech = registry.mechanism(toy)
    params = mech.parse_params(registry.package_module(toy, "contract").PARAMS)
    local = run_local(mech, prepared, PublicInputs(grid), params, np.random.default_rng(SEED))
    # the Dask runner joins the partitions on a worker; the same seed draws the same release
    on_dask = protect.run(mech, workers, futures, PublicInputs(grid), params, np.random.default_rng(SEED))
    assert on_dask.metadata == local.metadata
    assert on_dask.points.equals(local.points)


def test_the_toy_walks_dp_audit_pair_is_found_and_meets_its_claim(toy):
    """The toy's DP-audit pair (its package's dp_audit.py) is audited like a built-in's: at ε it stays within ε
    (a 95% lower bound), and run at 2ε (half the noise) it is caught; a toy without a pair has none."""
    if toy == "toy_sets":
        assert dp_scenarios.scenarios_of(toy) == []
        return
    assert [s.mechanism for s in dp_scenarios.all_scenarios()].count(toy) == 1
    [honest] = dp_scenarios.audit_mechanism(toy, 1.0, selection_runs=2000, runs=10_000, seed=1)
    [liar] = dp_scenarios.audit_mechanism(toy, 1.0, run_epsilon=2.0, selection_runs=2000, runs=10_000, seed=2)
    assert honest.outcome.lower_bound <= 1.0 < liar.outcome.lower_bound


@pytest.mark.parametrize("toy", ["toy_walks"], indirect=True)
def test_the_registered_toy_attack_gates_a_release(toy, toy_attack, dask_client, sample_frames):
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
    mech = registry.mechanism(toy)
    walks = run_local(mech, prepared, PublicInputs(grid), mech.parse_params({}), np.random.default_rng(SEED))
    assert isinstance(walks, CandidateRelease)
    # about one walk per input record: Laplace(1) noise is within 15 of 0 with probability 1 - e^-15
    assert abs(walks.metadata["released_records"] - prepared["traj_id"].nunique()) <= 15
    result = attack.evaluate(raw, walks.points)
    assert result.risk < 0.5 and evaluate_gate(policy, [result], "synthetic", {}).privacy == "passed"
