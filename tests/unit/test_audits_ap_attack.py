"""audits.ap_attack: location-distribution linkage (A3) with the assignment variant (A4), known answers."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon

from audits.ap_attack import NAME, APAttack, APAttackParams, location_distributions
from trajpub.errors import InputError, ParameterError


def cell_frame(histories: dict[str, list[int]], owners: dict[str, str] | None = None) -> pd.DataFrame:
    """One trajectory per key (traj_id = its position) visiting the given cells; object_id = owners[key]."""
    owners = owners or {}
    parts = [pd.DataFrame({"object_id": owners.get(key, key), "traj_id": i, "seq": np.arange(len(cells)),
                           "cell": np.asarray(cells, dtype=np.int64)})
             for i, (key, cells) in enumerate(histories.items())]
    return pd.concat(parts, ignore_index=True)


def favourite_places(n_objects: int = 40, n_points: int = 200, sample_seed: int = 0) -> pd.DataFrame:
    """Each object spends 55/25/12/8% of its points around 4 places of its own in a 20 km square (spread 250 m).

    The places are fixed; ``sample_seed`` draws the points (another seed: another period of the same habits).
    """
    all_spots = np.random.default_rng(0).uniform(0, 20_000, (n_objects, 4, 2))
    rng = np.random.default_rng(100 + sample_seed)
    parts = []
    for i, spots in enumerate(all_spots):
        xy = spots[rng.choice(4, n_points, p=[0.55, 0.25, 0.12, 0.08])] + rng.normal(0, 250, (n_points, 2))
        parts.append(pd.DataFrame({"object_id": f"o{i:02d}", "traj_id": i, "seq": np.arange(n_points),
                                   "x": xy[:, 0], "y": xy[:, 1]}))
    return pd.concat(parts, ignore_index=True)


def gridded(frame: pd.DataFrame, size: float = 500.0) -> pd.DataFrame:
    """``cell`` from x, y on a square grid of ``size`` metres."""
    col, row = np.floor(frame["x"] / size).astype(np.int64), np.floor(frame["y"] / size).astype(np.int64)
    return frame.assign(cell=col * 100_000 + row)


def attack(**kwargs) -> APAttack:
    return APAttack(APAttackParams(**kwargs))


def test_divergence_matrix_equals_pairwise_jsd():
    rng = np.random.default_rng(2)
    raw = cell_frame({f"o{i}": rng.integers(0, 12, 30).tolist() for i in range(6)})
    release = cell_frame({f"r{i}": rng.integers(5, 20, 25).tolist() for i in range(4)})
    dist = location_distributions(raw, release)
    got = dist.divergence()
    for r in range(4):
        for o in range(6):
            p, q = dist.release[r].toarray().ravel(), dist.raw[o].toarray().ravel()
            assert got[r, o] == pytest.approx(jensenshannon(p, q) ** 2, abs=1e-12)  # scipy: sqrt, natural log


def test_identical_release_links_everyone():
    raw = gridded(favourite_places())
    result = attack().evaluate(raw, raw)
    assert (result.attack, result.n_targets, result.success_rate, result.baseline) == (NAME, 40, 1.0, 1 / 40)
    assert result.evidence["owner_jsd_quantiles"]["0.9"] == pytest.approx(0.0, abs=1e-12)
    assert len(result.evidence["examples"]) == 5


def test_a_sample_of_targets_is_attacked_when_there_are_more_than_max_targets():
    raw = gridded(favourite_places())
    release = raw.assign(object_id=np.where(raw["traj_id"] >= 35, "dummy", raw["object_id"]))  # 35 owned records
    result = attack(max_targets=10, seed=3).evaluate(raw, release)
    assert (result.n_targets, result.success_rate) == (10, 1.0)
    assert result.evidence["n_target_records_total"] == 35 and result.evidence["targets_sampled"]
    assert result.evidence["assignment"] == {"applicable": False, "reason": "a sample of 10 of 35 target records"}
    again = attack(max_targets=10, seed=3).evaluate(raw, release)
    assert [e["record"] for e in again.evidence["examples"]] == [e["record"] for e in result.evidence["examples"]]
    everyone = attack(max_targets=35).evaluate(raw, release)
    assert everyone.n_targets == 35 and not everyone.evidence["targets_sampled"]


def test_metre_jitter_keeps_linking_and_strong_noise_breaks_it():
    # Jitter of 5 m moves a point across a 500 m cell border with probability about 4 * 5 / 500 * 0.4 ~ 1.6%:
    # the heatmaps barely change and every record still links. Noise of 10 km (half the city) spreads each
    # record over the whole area, and the owner's places no longer stand out.
    raw = favourite_places()
    rng = np.random.default_rng(1)
    jitter = raw.assign(x=raw["x"] + rng.normal(0, 5, len(raw)), y=raw["y"] + rng.normal(0, 5, len(raw)))
    noisy = raw.assign(x=raw["x"] + rng.normal(0, 10_000, len(raw)), y=raw["y"] + rng.normal(0, 10_000, len(raw)))
    weak = attack().evaluate(gridded(raw), gridded(jitter))
    strong = attack().evaluate(gridded(raw), gridded(noisy))
    assert weak.success_rate == 1.0
    assert strong.success_rate < 0.3 and strong.risk < weak.risk


def test_another_period_of_the_same_people_links():
    # The AP-attack's setting: the adversary's history and the release are two samples of the same habits.
    history, release = favourite_places(sample_seed=0), favourite_places(sample_seed=1)
    result = attack().evaluate(gridded(history), gridded(release))
    assert result.success_rate >= 0.95


def test_disjoint_release_is_a_random_guess():
    raw = cell_frame({f"o{i}": [i, i + 1, i + 2] for i in range(20)})
    release = cell_frame({f"o{i}": [1000 + i] for i in range(20)})
    result = attack().evaluate(raw, release)
    # Every object is at ln 2 from every record: a tie among all 20, expected success 1/20 per record.
    assert result.success_rate == pytest.approx(1 / 20) and result.risk == pytest.approx(0.0, abs=1e-12)
    assert result.evidence["assignment"]["n_successes"] == 0  # ln 2 pairs are not links
    assert result.evidence["owner_jsd_quantiles"]["0.5"] == pytest.approx(math.log(2))


def test_assignment_corrects_a_wrong_argmin():
    # A = {1: 1/2, 2: 1/2}, B = {2: 1/2, 3: 1/2}. Record a (owner A) = {2, 3} is B's distribution exactly;
    # record b (owner B) = {3}. Arg-min: a -> B (wrong), b -> B (right). One-to-one: a -> A, b -> B is the
    # assignment of least total JSD (JSD(a,A) + JSD(b,B) < JSD(a,B) + JSD(b,A) = 0 + ln 2).
    raw = cell_frame({"A": [1, 2], "B": [2, 3]})
    release = cell_frame({"a": [2, 3], "b": [3]}, owners={"a": "A", "b": "B"})
    result = attack().evaluate(raw, release)
    assert result.evidence["argmin"]["success_rate"] == 0.5
    assert result.evidence["assignment"]["success_rate"] == 1.0
    assert result.evidence["reported_variant"] == "assignment" and result.risk == 1.0


@pytest.mark.parametrize("n_fixed", [0, 3, 10])
def test_permuted_owners_link_to_the_data_not_the_label(n_fixed):
    raw = gridded(favourite_places(n_objects=10))
    keys = [f"o{i:02d}" for i in range(10)]
    moved = keys[n_fixed:]
    pi = dict(zip(keys, keys[:n_fixed] + moved[1:] + moved[:1], strict=True))
    result = attack().evaluate(raw, raw.assign(object_id=raw["object_id"].map(pi)))
    assert result.success_rate == n_fixed / 10


def test_object_records_pool_every_trajectory_of_an_owner():
    # A's two trajectories together have A's distribution; each alone has half of it.
    raw = cell_frame({"A": [1, 2, 3, 4], "B": [1, 2, 5, 6]})
    release = cell_frame({"a1": [1, 2], "a2": [3, 4], "b": [5, 6, 1, 2]}, owners={"a1": "A", "a2": "A", "b": "B"})
    per_object = attack(record_key="object_id").evaluate(raw, release)
    assert per_object.n_targets == 2 and per_object.success_rate == 1.0
    per_trajectory = attack(record_key="traj_id", max_assignment_records=0).evaluate(raw, release)
    # a1 = {1, 2} is as close to A as to B (a tie: 1/2); a2 and b link.
    assert per_trajectory.n_targets == 3 and per_trajectory.n_successes == pytest.approx(2.5)


def test_points_off_the_grid_are_ignored_and_dummies_are_not_targets():
    raw = cell_frame({"A": [1, 1, 2], "B": [5, 6, 6]})
    release = cell_frame({"A": [1, 1, 2, -1, -1, -1], "B": [5, 6, 6], "d": [1, 5]}, owners={"d": "dummy"})
    result = attack().evaluate(raw, release)
    assert result.n_targets == 2 and result.success_rate == 1.0
    assert result.evidence["examples"][0]["jsd"] == pytest.approx(0.0, abs=1e-12)
    assert result.evidence["n_records_without_owner"] == 1


def test_inputs_are_checked():
    raw = cell_frame({"A": [1], "B": [2]})
    with pytest.raises(InputError, match="truthful"):
        attack().evaluate(raw, raw.assign(object_id="x"))
    with pytest.raises(InputError, match="cell"):
        attack().evaluate(raw, raw.drop(columns="cell"))
    with pytest.raises(InputError, match="integers"):
        attack().evaluate(raw, raw.assign(cell=raw["cell"].astype(float)))
    with pytest.raises(InputError, match="max_matrix_entries"):
        attack(max_matrix_entries=3).evaluate(raw, cell_frame({"A": [1], "B": [2], "C": [3]}))


@pytest.mark.parametrize("kwargs", [
    {"record_key": "uid"}, {"top_k": ()}, {"top_k": (0,)}, {"top_k": [1]}, {"max_assignment_records": -1},
    {"max_matrix_entries": 0}, {"confidence": 0.0},
])
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ParameterError):
        APAttackParams(**kwargs)


def test_params_round_trip():
    params = APAttackParams(record_key="object_id", top_k=(1, 3))
    assert APAttackParams.from_dict(params.to_dict()) == params
    with pytest.raises(ParameterError, match="grid"):
        APAttackParams.from_dict({"grid": 1})


def test_chunked_divergence_equals_one_pass(monkeypatch):
    # Large matrices add each chunk's pair sums in place; force that path with tiny chunks.
    rng = np.random.default_rng(5)
    raw = cell_frame({f"o{i}": rng.integers(0, 40, 30).tolist() for i in range(30)})
    release = cell_frame({f"r{i}": rng.integers(10, 60, 30).tolist() for i in range(40)})
    dist = location_distributions(raw, release)
    one_pass = dist.divergence()
    monkeypatch.setattr("audits.ap_attack._PAIRS_PER_CHUNK", 50)
    np.testing.assert_allclose(dist.divergence(), one_pass, atol=1e-14)
