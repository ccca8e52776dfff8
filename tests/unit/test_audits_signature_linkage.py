"""audits.signature_linkage: the survey's LA (A1) with the assignment variant (A4), on cases with known answers."""

import math
import time

import numpy as np
import pandas as pd
import pytest

from audits.gate import GatePolicy, evaluate_gate
from audits.signature_linkage import (
    SYNTHETIC_NAME,
    TRUTHFUL_NAME,
    SignatureLinkage,
    SignatureLinkageParams,
    build_signatures,
)
from trajpub import config
from trajpub.errors import InputError, ParameterError

TDRIVE = config.SHARED_DATA_DIR / "tdrive_sample_odd_taxis.csv.gz"


def cell_frame(histories: dict[str, list[int]], owners: dict[str, str] | None = None) -> pd.DataFrame:
    """One trajectory per key (traj_id = its position), points in the given cells; object_id = owners[key]."""
    owners = owners or {}
    parts = [pd.DataFrame({"object_id": owners.get(key, key), "traj_id": i, "seq": np.arange(len(cells)),
                           "cell": np.asarray(cells, dtype=np.int64)})
             for i, (key, cells) in enumerate(histories.items())]
    frame = pd.concat(parts, ignore_index=True)
    frame["t"] = pd.NaT
    frame["lon"] = 116.0 + (frame["cell"] % 1000) * 0.001
    frame["lat"] = 39.0 + (frame["cell"] // 1000) * 0.001
    return frame


def random_histories(n_objects: int, seed: int = 7) -> dict[str, list[int]]:
    """Each object: 60 visits among its own 15 favourite cells out of a shared universe of 400."""
    rng = np.random.default_rng(seed)
    return {f"o{i:03d}": rng.choice(rng.choice(400, 15, replace=False), 60).tolist() for i in range(n_objects)}


def truthful(**kwargs) -> SignatureLinkage:
    return SignatureLinkage(SignatureLinkageParams(**kwargs))


def synthetic(**kwargs) -> SignatureLinkage:
    return SignatureLinkage(SignatureLinkageParams(mode="synthetic", **kwargs))


# --- signatures: exact small case ------------------------------------------------------------------------------

RAW_AB = {"A": [1, 2], "B": [2, 3]}
# N = 2: idf(1) = idf(3) = ln 3, idf(2) = ln 1.5.  A = (ln3, ln1.5, 0), B = (0, ln1.5, ln3), both normalised.
# Record a (owner A) visits 2 and 3: its signature is B's.  Record b (owner B) visits 3 only.
RELEASE_AB = cell_frame({"a": [2, 3], "b": [3]}, owners={"a": "A", "b": "B"})


def test_tfidf_cosine_matches_hand_computation():
    ln3, ln15 = math.log(3), math.log(1.5)
    norm = math.hypot(ln3, ln15)
    expected = np.array([[ln15**2 / norm**2, 1.0],
                         [0.0, ln3 / norm]])
    sim = build_signatures(cell_frame(RAW_AB), RELEASE_AB, SignatureLinkageParams()).similarity().toarray()
    np.testing.assert_allclose(sim, expected, atol=1e-12)


def test_top_m_keeps_the_heaviest_locations():
    # With m = 1, A keeps cell 1 (ln 3 > ln 1.5), B keeps cell 3, and both records keep cell 3.
    sim = build_signatures(cell_frame(RAW_AB), RELEASE_AB, SignatureLinkageParams(top_m=1)).similarity().toarray()
    np.testing.assert_allclose(sim, [[0.0, 1.0], [0.0, 1.0]], atol=1e-12)


def test_top_m_keeps_weights_tied_with_the_mth():
    # A visits 1, 2, 3 once each: three equal weights, all kept with m = 1, so A's signature does not depend on
    # an ordering of the cells.  Record a visits cell 3 only: cosine 1/sqrt(3) with A.
    raw = cell_frame({"A": [1, 2, 3], "B": [9]})
    release = cell_frame({"a": [3]}, owners={"a": "A"})
    sim = build_signatures(raw, release, SignatureLinkageParams(top_m=1)).similarity().toarray()
    np.testing.assert_allclose(sim, [[1 / math.sqrt(3), 0.0]], atol=1e-12)


def test_assignment_corrects_a_wrong_argmax_and_the_larger_risk_is_reported():
    # Arg-max: a -> B (wrong), b -> B (right): LA = 1/2, risk 0.  One-to-one: a -> A, b -> B
    # (0.12 + 0.94 > 1.00 + 0), LA = 1, risk 1.
    result = truthful().evaluate(cell_frame(RAW_AB), RELEASE_AB)
    assert result.evidence["argmax"]["success_rate"] == 0.5
    assert result.evidence["assignment"]["success_rate"] == 1.0
    assert result.evidence["reported_variant"] == "assignment"
    assert (result.attack, result.success_rate, result.baseline, result.risk) == (TRUTHFUL_NAME, 1.0, 0.5, 1.0)


def test_ties_count_by_expectation():
    # A and B have the same history; a record of A ties between them: expected success 1/2, Acc@2 = 1.
    raw = cell_frame({"A": [1, 2, 2], "B": [1, 2, 2], "C": [5, 6]})
    release = cell_frame({"a": [1, 2, 2]}, owners={"a": "A"})
    result = truthful(top_k=(1, 2), max_assignment_records=0).evaluate(raw, release)
    assert result.n_successes == 0.5
    assert result.evidence["acc_at_k"] == {"1": 0.5, "2": 1.0}
    assert result.evidence["assignment"]["applicable"] is False


# --- truthful mode --------------------------------------------------------------------------------------------


def test_identical_release_links_everyone():
    raw = cell_frame(random_histories(40))
    result = truthful().evaluate(raw, raw)
    assert (result.n_targets, result.n_successes, result.success_rate, result.risk) == (40, 40, 1.0, 1.0)
    assert result.evidence["acc_at_k"] == {"1": 1.0, "5": 1.0}
    assert result.baseline == 1 / 40
    assert len(result.evidence["examples"]) == 5
    assert all(e["owner"] == f"o{e['release_traj_id']:03d}" and e["similarity"] == 1.0
               for e in result.evidence["examples"])


@pytest.mark.parametrize("n_fixed", [0, 1, 7])
def test_permuted_owners_link_to_the_data_not_the_label(n_fixed):
    # The release keeps every trajectory but declares owner pi(u) for u's data. Arg-max finds u by its data,
    # so a link succeeds exactly when pi(u) = u: LA = (fixed points of pi) / N; a derangement gives 0.
    histories = random_histories(30)
    keys = list(histories)
    moved = keys[n_fixed:]
    pi = dict(zip(keys, keys[:n_fixed] + moved[1:] + moved[:1], strict=True))  # a cycle on the moved keys
    release = cell_frame(histories, owners=pi)
    result = truthful().evaluate(cell_frame(histories), release)
    assert result.n_targets == 30
    assert result.success_rate == n_fixed / 30
    assert result.evidence["argmax"]["success_rate"] == n_fixed / 30
    assert result.evidence["assignment"]["success_rate"] == n_fixed / 30


def test_disjoint_noise_release_is_no_better_than_guessing():
    histories = random_histories(50)
    rng = np.random.default_rng(1)
    noise = {key: (10_000 + rng.integers(0, 5_000, 60)).tolist() for key in histories}  # cells no one visits
    result = truthful().evaluate(cell_frame(histories), cell_frame(noise))
    # Every raw object ties at similarity 0: a random guess, 1/N in expectation, exactly the baseline.
    assert result.success_rate == pytest.approx(1 / 50)
    assert result.baseline == 1 / 50
    assert result.risk == 0.0
    assert result.ci_low <= result.baseline <= result.ci_high
    assert result.evidence["acc_at_k"]["5"] == pytest.approx(5 / 50)
    assert result.evidence["assignment"]["n_successes"] == 0  # zero-similarity pairs are not links
    assert result.evidence["examples"] == []


def test_records_without_owner_are_not_targets():
    histories = random_histories(20)
    dummies = {f"d{i}": [900 + i] * 10 for i in range(30)}
    release = cell_frame({**histories, **dummies}, owners={k: "dummy" for k in dummies})
    result = truthful().evaluate(cell_frame(histories), release)
    assert result.n_targets == 20 and result.success_rate == 1.0
    assert result.evidence["n_records_without_owner"] == 30


def test_row_order_does_not_matter():
    raw = cell_frame(random_histories(30))
    noisy = raw.copy()
    moved = np.random.default_rng(2).random(len(noisy)) < 0.9  # most points moved to a random cell
    noisy.loc[moved, "cell"] = np.random.default_rng(3).integers(0, 400, moved.sum())
    shuffled = noisy.sample(frac=1.0, random_state=3)
    a = truthful().evaluate(raw, noisy)
    b = truthful().evaluate(raw.sample(frac=1.0, random_state=4), shuffled)
    assert a.to_dict() == b.to_dict() and 0 < a.success_rate < 1


def test_a_record_with_two_owners_is_refused():
    raw = cell_frame({"A": [1], "B": [2]})
    release = cell_frame({"a": [1], "b": [2]})
    release["traj_id"] = 0
    with pytest.raises(InputError, match="traj_id"):
        truthful().evaluate(raw, release)


def test_truthful_release_without_any_owner_is_refused():
    raw = cell_frame({"A": [1], "B": [2]})
    with pytest.raises(InputError, match="synthetic"):
        truthful().evaluate(raw, cell_frame({"x": [1]}))


# --- synthetic mode -------------------------------------------------------------------------------------------


def with_members(raw: pd.DataFrame, members) -> pd.DataFrame:
    return raw.assign(member=raw["object_id"].isin(set(members)))


def population(n_objects: int, n_types: int = 6, seed: int = 11) -> dict[str, list[int]]:
    """A fleet of few kinds of route: each object makes 60 visits among the 15 cells of one of ``n_types`` route
    types (out of 400 cells), so a record of a type resembles every object of that type."""
    fixed = np.random.default_rng(5)  # the fleet's route types, the same for every draw of objects
    types = [fixed.choice(400, 15, replace=False) for _ in range(n_types)]
    rng = np.random.default_rng(seed)
    return {f"o{i:03d}": rng.choice(types[rng.integers(n_types)], 60).tolist() for i in range(n_objects)}


def test_synthetic_copies_of_members_link_members_not_controls():
    histories = random_histories(40)
    raw = with_members(cell_frame(histories).drop(columns="cell"), [f"o{i:03d}" for i in range(0, 40, 2)])
    release = raw[raw["member"]].drop(columns=["object_id", "member"])  # exercise the lon/lat grid
    result = synthetic().evaluate(raw, release)
    assert (result.attack, result.n_targets, result.success_rate) == (SYNTHETIC_NAME, 20, 1.0)
    assert result.evidence["location"] == "lon/lat grid of 0.001 degrees"
    # Random signatures over 400 cells are far apart: no control is more than 0.5 similar to a member's copy.
    assert (result.baseline, result.risk, result.controls.n_controls) == (0.0, 1.0, 20)
    z2 = 1.959963984540054 ** 2  # Newcombe: 20/20 against 0/20, each Wilson end z^2 / (20 + z^2) from its rate
    assert result.risk_ci_low == pytest.approx(1 - math.sqrt(2) * z2 / (20 + z2), abs=1e-12)
    assert {e["member"] for e in result.evidence["examples"]} <= set(raw.loc[raw["member"], "object_id"])


def test_synthetic_release_of_the_population_scores_members_like_controls():
    """A release that learns the fleet (new objects of the same route types, none of the raw ones) links members
    and controls alike: the survey's share of linked records (here every record) is no disclosure. The old
    criterion (records more than 0.5 similar to some raw object, against a random object) scored it 1.0."""
    raw = with_members(cell_frame(population(120)), [f"o{i:03d}" for i in range(0, 120, 3)])
    release = cell_frame(population(200, seed=12)).drop(columns="object_id")
    result = synthetic().evaluate(raw, release)
    assert result.success_rate > 0.9 and result.baseline > 0.9  # everyone resembles the release
    low, high = result.controls.difference_ci
    assert low <= 0 <= high
    assert result.risk_ci_low == 0.0


def test_synthetic_release_in_a_disjoint_region_links_nobody():
    raw = with_members(cell_frame(random_histories(40)).drop(columns="cell"), ["o000", "o001"])
    release = raw.drop(columns=["object_id", "member"]).assign(lon=raw["lon"] + 1.0)
    result = synthetic().evaluate(raw, release)
    assert (result.n_successes, result.success_rate, result.baseline, result.risk) == (0, 0.0, 0.0, 0.0)
    assert result.evidence["examples"] == []


def test_synthetic_threshold_is_strict():
    # Record b visits cell 3 only: its similarity with B is ln3 / |B| = 0.938, with A 0.
    release = cell_frame({"b": [3]})
    raw = with_members(cell_frame(RAW_AB), ["B"])
    assert synthetic(threshold=0.93).evaluate(raw, release).n_successes == 1
    assert synthetic(threshold=0.95).evaluate(raw, release).n_successes == 0


def test_synthetic_blocks_of_records_give_the_whole_matrix_result(monkeypatch):
    """Records cut into blocks of 3 (the last one shorter) score exactly as in one block: each object's best
    similarity and its record do not depend on the block boundaries."""
    import audits.signature_linkage as sl

    raw = with_members(cell_frame(random_histories(40)), [f"o{i:03d}" for i in range(20)])
    rng = np.random.default_rng(3)
    release = raw.drop(columns=["object_id", "member"]).assign(  # 4 in 5 points of each record moved at random
        cell=np.where(rng.random(len(raw)) < 0.2, raw["cell"], rng.integers(0, 400, len(raw))))
    whole = synthetic().evaluate(raw, release)
    monkeypatch.setattr(sl, "SIMILARITY_BLOCK_ENTRIES", 3 * 40)
    blocked = synthetic().evaluate(raw, release)
    assert 0 < whole.n_successes < 20 and whole.baseline > 0
    assert blocked.to_dict() == whole.to_dict()


# --- signature kinds: time of day and order, which the spatial signature cannot see -----------------------------


def at_hours(frame: pd.DataFrame, hours: dict[str, int], key: str = "object_id") -> pd.DataFrame:
    """``frame`` with every point of ``frame[key] == k`` at ``hours[k]`` o'clock (UTC) on 2008-02-04, a minute
    apart."""
    start = pd.Timestamp("2008-02-04", tz="UTC") + pd.to_timedelta(frame[key].map(hours), unit="h")
    return frame.assign(t=start + pd.to_timedelta(frame["seq"], unit="min"))


def same_places_other_hours(n: int = 20) -> tuple[pd.DataFrame, pd.DataFrame]:
    """n objects visiting the same cells in the same order, each at its own hour; one record of each, at that hour.
    Records are listed in the reverse order of their owners, so that an assignment that breaks ties by position
    gets none of them right."""
    names = [f"o{i:02d}" for i in range(n)]
    hours = {name: i for i, name in enumerate(names)}
    raw = at_hours(cell_frame({name: [1, 2, 3, 4] for name in names}), hours)
    release = at_hours(cell_frame({f"r{i:02d}": [1, 2, 3, 4] for i in range(n)},
                                  owners={f"r{i:02d}": name for i, name in enumerate(reversed(names))}), hours)
    return raw, release


def test_spatiotemporal_signature_links_what_the_spatial_one_cannot():
    raw, release = same_places_other_hours()
    spatial = truthful().evaluate(raw, release)
    assert spatial.risk == pytest.approx(0.0, abs=1e-12)  # every object ties: a random guess
    both = truthful(signatures=("spatial", "spatiotemporal")).evaluate(raw, release)
    assert both.risk == pytest.approx(1.0)
    assert both.evidence["signature"] == "spatiotemporal"
    assert both.evidence["by_signature"]["spatial"]["risk"] == pytest.approx(0.0, abs=1e-12)


def test_spatiotemporal_signature_ignores_points_without_time():
    raw, release = same_places_other_hours()
    result = truthful(signatures=("spatiotemporal",)).evaluate(raw, release.assign(t=pd.NaT))
    assert result.n_successes == pytest.approx(len(release["traj_id"].unique()) / 20)  # nobody: a 1-in-20 guess
    assert result.risk == pytest.approx(0.0, abs=1e-12)


def test_sequential_signature_links_the_order_of_visits():
    """Object i visits the same four cells as everyone, in its own order; the spatial signature sees no
    difference, the transitions tell all 24 orders apart."""
    import itertools
    orders = {f"o{i:02d}": list(p) for i, p in enumerate(itertools.permutations([1, 2, 3, 4]))}
    raw = cell_frame(orders)
    reverse = list(reversed(orders))  # records in the reverse order of their owners (as above)
    release = cell_frame({f"r{i:02d}": orders[k] for i, k in enumerate(reverse)},
                         owners={f"r{i:02d}": k for i, k in enumerate(reverse)})
    assert truthful().evaluate(raw, release).risk == pytest.approx(0.0, abs=1e-12)
    result = truthful(signatures=("spatial", "sequential")).evaluate(raw, release)
    assert result.evidence["signature"] == "sequential"
    assert result.risk == pytest.approx(1.0)


@pytest.mark.parametrize("kind", ["spatiotemporal", "sequential"])
def test_every_signature_kind_links_the_raw_data_published_as_it_is(kind):
    """The raw data published as it is but for one object, the last, whose places nobody else visits: each record is
    its object's only trajectory, so every kind links all. The two frames' dimensions must share one vocabulary
    although the release lacks some of the raw data's locations."""
    histories = {**random_histories(40), "zzz": [900, 901, 902, 903]}
    hours = {k: i % 24 for i, k in enumerate(histories)}
    raw = at_hours(cell_frame(histories), hours)
    release = raw[raw["object_id"] != "zzz"]
    result = truthful(signatures=(kind,)).evaluate(raw, release)
    assert result.success_rate == pytest.approx(1.0)


def test_sequential_signature_skips_repeats_and_never_joins_two_trajectories():
    """Repeated cells add no transition, and the last cell of one trajectory does not lead to the first of the
    next: A's two trajectories 1-1-2 and 3-4 give (1,2) and (3,4); B's single one 1-2-3-4 gives (1,2), (2,3),
    (3,4). A record 1-2-2 has the one transition (1,2). Were A's trajectories joined, A would have B's three
    transitions and the record would be as similar to both."""
    raw = pd.concat([cell_frame({"A": [1, 1, 2]}), cell_frame({"A": [3, 4]}).assign(traj_id=1),
                     cell_frame({"B": [1, 2, 3, 4]}).assign(traj_id=2)], ignore_index=True)
    release = cell_frame({"a": [1, 2, 2]}, owners={"a": "A"})
    sig = build_signatures(raw, release, SignatureLinkageParams(), "sequential")
    sim = dict(zip(sig.objects, sig.similarity().toarray()[0], strict=True))
    idf_shared, idf_b = math.log(3 / 2), math.log(3)  # (1,2) and (3,4): both objects; (2,3): B only
    assert sim["A"] == pytest.approx(1 / math.sqrt(2))
    assert sim["B"] == pytest.approx(idf_shared / math.sqrt(2 * idf_shared**2 + idf_b**2))


def test_a_list_of_top_m_tries_the_full_signature_too():
    """A and B share a heavy place 1 and differ by one light place each: cut to its heaviest location, every
    signature is place 1 (a tie, no better than guessing); the full signatures (TrjLink's reduction 0) tell them
    apart. Records in the reverse order of their owners, as above."""
    raw = cell_frame({"A": [1, 1, 1, 2], "B": [1, 1, 1, 3]})
    release = cell_frame({"r0": [1, 1, 1, 3], "r1": [1, 1, 1, 2]}, owners={"r0": "B", "r1": "A"})
    assert truthful(top_m=1).evaluate(raw, release).risk == pytest.approx(0.0, abs=1e-12)
    result = truthful(top_m=(1, None)).evaluate(raw, release)
    assert result.risk == pytest.approx(1.0)
    assert result.evidence["top_m"] is None
    assert set(result.evidence["by_signature"]) == {"spatial/1", "spatial/all"}


def test_policy_lists_become_the_attack_parameters():
    from audits.registry import build_attack
    attack = build_attack(TRUTHFUL_NAME, {"signatures": ["spatial", "sequential"], "top_m": [10, None]})
    assert attack.params.signatures == ("spatial", "sequential")
    assert attack.params.reductions == (10, None)
    assert "seq" in attack.raw_columns and "traj_id" in attack.raw_columns


def test_signature_kinds_need_their_columns():
    raw, release = same_places_other_hours()
    with pytest.raises(InputError, match=r"missing column\(s\) t "):
        truthful(signatures=("spatiotemporal",)).evaluate(raw.drop(columns="t"), release)
    with pytest.raises(InputError, match="seq"):
        truthful(signatures=("sequential",)).evaluate(raw, release.drop(columns="seq"))


# --- parameters -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    {"mode": "fuzzy"}, {"grid_deg": 0.0}, {"top_m": 0}, {"top_k": ()}, {"top_k": (0,)}, {"threshold": 1.0},
    {"max_assignment_records": -1}, {"confidence": 1.0}, {"signatures": ()}, {"signatures": ("temporal",)},
    {"signatures": ("spatial", "spatial")}, {"signatures": "spatial"}, {"top_m": ()}, {"top_m": (10, 10)},
    {"top_m": (10, 0)}, {"top_m": True},
])
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ParameterError):
        SignatureLinkageParams(**kwargs)


def test_missing_columns_and_empty_frames_are_refused():
    raw = cell_frame({"A": [1], "B": [2]})
    with pytest.raises(InputError, match="object_id"):
        truthful().evaluate(raw, raw.drop(columns="object_id"))
    with pytest.raises(InputError, match="member"):
        synthetic().evaluate(raw, raw)
    with pytest.raises(InputError, match="empty"):
        synthetic().evaluate(with_members(raw, ["A"]), raw.iloc[:0])


# --- real data: T-Drive, odd days vs even days of the same taxis (TrjLink's own evaluation split) -------------


@pytest.fixture(scope="module")
def tdrive() -> pd.DataFrame:
    df = pd.read_csv(TDRIVE).rename(columns={"taxi_id": "object_id", "longitude": "lon", "latitude": "lat"})
    df["t"] = pd.to_datetime(df.pop("datetime"), utc=True)
    df["object_id"] = df["object_id"].astype(str)
    df["traj_id"] = df["object_id"].astype(int)
    df["seq"] = df.groupby("object_id").cumcount()
    return df


def test_tdrive_even_days_link_to_odd_days(tdrive, record_property):
    odd = tdrive["t"].dt.day % 2 == 1
    raw, release = tdrive[odd], tdrive[~odd]
    start = time.perf_counter()
    result = truthful().evaluate(raw, release)
    seconds = time.perf_counter() - start
    record_property("tdrive_linkage_seconds", seconds)
    print(f"\nT-Drive odd->even linkage on {len(tdrive)} points: {seconds:.3f} s; LA {result.success_rate:.3f} "
          f"[{result.ci_low:.3f}, {result.ci_high:.3f}], Acc@5 {result.evidence['acc_at_k']['5']:.3f}, "
          f"baseline {result.baseline:.4f}, risk {result.risk:.3f} ({result.evidence['reported_variant']})")
    # Significantly better than guessing: the 95% lower bound is above the random-guess rate 1/N.
    assert result.ci_low > result.baseline
    # The raw data of the same taxis on other days is not a protected release: the default gate must block it.
    assert evaluate_gate(GatePolicy.default(), [result], "truthful").privacy == "blocked"
