"""The gate's positive and negative controls on the shipped T-Drive sample (docs/design.md, "Audits and the gate"):
leaky synthesizers (tests/controls) must be blocked by the default policy on their copying, not on chance, and
ObjTrace at the demo's ε 5 per taxi must pass. Each release is made and audited as the flow's stages make it
(:func:`bench.gate_validity.one_draw`, the draw of ``bench/GATE_VALIDITY_RESULTS.md``), with fixed seeds; the bench
runs 20 draws of each."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audits.gate import evaluate_gate
from bench.gate_validity import Setup, candidate, default_policy, one_draw, release
from bench.tdrive import load_clean
from mechanisms import registry
from mechanisms.registry import example_spec_file
from tasks import audit, protect
from tests.controls.mechanism import CopyControl
from trajpub.errors import ParameterError
from trajpub.mechanism import run_local
from trajpub.spec import read_spec_file

MEMBERSHIP = ("membership_dcr", "membership_shadow")


@pytest.fixture(scope="module")
def clean() -> pd.DataFrame:
    return load_clean()[0]


@pytest.fixture(scope="module")
def policy():
    return default_policy()


def _paths(frame: pd.DataFrame) -> pd.Series:
    """Each trajectory (index ``traj_id``) as the tuple of its positions in order (metres, to the millimetre)."""
    f = frame.sort_values(["traj_id", "seq"], kind="stable")
    xy = pd.Series(list(zip(f["x"].round(3), f["y"].round(3), strict=True)), index=f["traj_id"].to_numpy())
    return xy.groupby(level=0, sort=False).agg(tuple)


@pytest.mark.parametrize("name", ["copy_control", "replay_control"])
def test_the_controls_cannot_be_named_by_a_release_spec(name):
    spec = {**read_spec_file(example_spec_file("objtrace")), "mechanism": name}
    with pytest.raises(ParameterError, match=f"unknown mechanism '{name}'"):
        protect.parse_spec(spec)


def test_the_copy_control_publishes_x_percent_of_its_input_verbatim_among_objtrace_records(clean):
    """5% of 4,325 input records: 216 real trajectories, position for position, in the release's window;
    the release has ObjTrace's size with the same seed (the copies replace synthetic records)."""
    setup = Setup.of(candidate("copy_5"), clean)
    frame = pd.concat(setup.parts, ignore_index=True)
    n_input = frame["traj_id"].nunique()
    copy = run_local(CopyControl(), frame, setup.inputs, setup.params, np.random.default_rng(7))
    plain = run_local(registry.mechanism("objtrace"), frame, setup.inputs, setup.params.synthesizer,
                      np.random.default_rng(7))
    assert copy.metadata["copied_records"] == round(0.05 * n_input)
    assert copy.metadata["released_records"] == plain.metadata["released_records"]
    real = set(_paths(frame))
    released = _paths(copy.points)
    copies = released.index[released.isin(real)]
    assert len(copies) == copy.metadata["copied_records"]
    copied_times = copy.points.loc[copy.points["traj_id"].isin(copies), "t"]
    assert set(copied_times) <= set(frame["t"])  # real timestamps, which lie in the window as the synthetic ones
    window = setup.inputs.window
    assert copy.points["t"].between(window.start, window.end, inclusive="left").all()


@pytest.mark.parametrize(("key", "seed"), [("copy_5", 0), ("copy_5", 1), ("copy_10", 2), ("copy_20", 3),
                                           ("replay", 4)])
def test_the_default_gate_blocks_a_release_that_copies_members(dask_client, clean, policy, key, seed):
    """Blocked by the default policy's membership attacks on their intervals, not on a lucky draw: the lower end
    of each risk is above its ceiling. 5% of the input copied reproduces about half of the ~200 members
    (0.75 copies per member: 1 - e^-0.75 = 0.53), and the controls are never copied. Under ``block_if_any`` one
    blocking attack blocks the release whatever the others say, so only these two run here (the bench runs all)."""
    released = release(dask_client, Setup.of(candidate(key), clean), policy, seed)
    [points] = audit.on_cluster(dask_client, released.candidate.points)
    results, failures, unmeasured = audit.run_attacks(dask_client, policy, released.raw, points, "synthetic",
                                                      list(MEMBERSHIP))
    decision = evaluate_gate(policy, results, "synthetic", {}, failures, unmeasured)
    assert decision.privacy == "blocked" and not failures and not unmeasured
    for r in results:
        assert decision.per_attack[r.attack]["verdict"] == "blocked", r.to_dict()
        assert r.risk_ci_low > policy.max_risk[r.attack]
        assert r.controls.member_value >= 0.4 and r.controls.control_value <= 0.1
    assert sorted(r.attack for r in results) == sorted(MEMBERSHIP)


def test_the_default_gate_passes_objtrace_at_the_demo_epsilon(dask_client, clean, policy):
    """The negative control: ObjTrace ε 5 per taxi (mechanisms/objtrace/example.yaml) learns the fleet, not its
    members; every attack and utility figure of the default policy, as the flow audits it (the bench's 20 draws
    ask for at least 19 passes)."""
    draw = one_draw(dask_client, Setup.of(candidate("objtrace_e5"), clean), policy, 0)
    assert not draw["blocked"], draw["reasons"]
