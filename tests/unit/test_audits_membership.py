"""audits.membership: membership inference on fragment-count releases (A8), members vs held-out non-members."""

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from audits.membership import NAME, MembershipInference, MembershipParams, membership_scores
from trajpub.errors import InputError, ParameterError


def raw_frame(trajectories: dict[str, list[list[int]]], members: set[str]) -> pd.DataFrame:
    """Objects' trajectories as cell lists; ``member`` = object in ``members``."""
    rows, traj_id = [], 0
    for obj, trajs in trajectories.items():
        for cells in trajs:
            rows += [{"object_id": obj, "traj_id": traj_id, "seq": i, "cell": c, "member": obj in members}
                     for i, c in enumerate(cells)]
            traj_id += 1
    return pd.DataFrame(rows)


def fragment_counts(trajectories: list[list[int]], lengths=(2, 3)) -> pd.DataFrame:
    """The exact count of every fragment (contiguous sub-sequence, consecutive repeats collapsed) of the given
    lengths: the number of trajectories that contain it. A non-private aggregate release."""
    counts: Counter = Counter()
    for cells in trajectories:
        seq = [c for i, c in enumerate(cells) if i == 0 or c != cells[i - 1]]
        counts.update({tuple(seq[i:i + n]) for n in lengths for i in range(len(seq) - n + 1)})
    return pd.DataFrame({"fragment": list(counts), "count": [float(v) for v in counts.values()]})


def random_walks(n_objects: int, prefix: str, seed: int, side: int = 30) -> dict[str, list[list[int]]]:
    """Each object: 2 random walks of 20-40 steps on a side x side grid of cells (4-neighbour moves)."""
    rng = np.random.default_rng(seed)
    steps = np.array([[0, 1], [0, -1], [1, 0], [-1, 0]])
    out = {}
    for i in range(n_objects):
        trajs = []
        for _ in range(2):
            pos = rng.integers(0, side, 2)
            cells = []
            for _ in range(rng.integers(20, 41)):
                cells.append(int(pos[0] * side + pos[1]))
                pos = np.clip(pos + steps[rng.integers(4)], 0, side - 1)
            trajs.append(cells)
        out[f"{prefix}{i:03d}"] = trajs
    return out


def attack(**kwargs) -> MembershipInference:
    return MembershipInference(MembershipParams(**kwargs))


def test_hand_case_scores_and_a_perfect_attack():
    # Members M1 [1,2,3] and M2 [10,11]; non-members N1 [1,2,22] and N2 [30,31]. Release: the exact counts of
    # the members' 2-fragments: (1,2), (2,3), (10,11), each 1. Scores (mean over own fragments of 1/count, 0 if
    # absent): M1 = (1 + 1)/2 = 1, M2 = 1, N1 = (1 + 0)/2 = 1/2 (it shares (1,2) with M1), N2 = 0.
    trajs = {"M1": [[1, 2, 3]], "M2": [[10, 11]], "N1": [[1, 2, 22]], "N2": [[30, 31]]}
    raw = raw_frame(trajs, members={"M1", "M2"})
    release = fragment_counts([[1, 2, 3], [10, 11]], lengths=(2,))
    scores = membership_scores(raw, release, MembershipParams())
    assert scores.to_dict() == {"M1": 1.0, "M2": 1.0, "N1": 0.5, "N2": 0.0}
    result = attack().evaluate(raw, release)
    assert (result.attack, result.n_targets, result.n_successes, result.baseline) == (NAME, 2, 2.0, 0.5)
    assert result.risk == 1.0 and result.evidence["auc"] == 1.0


def test_counts_weigh_the_evidence():
    # M's fragment (5,6) is released with count 4 (three other people share it): inverse-count score 1/4;
    # coverage ignores the count (score 1). N's (7,8) is released with count 1 although N is not a member.
    raw = raw_frame({"M": [[5, 6]], "N": [[7, 8]]}, members={"M"})
    release = pd.DataFrame({"fragment": [(5, 6), (7, 8)], "count": [4.0, 1.0]})
    assert membership_scores(raw, release, MembershipParams()).to_dict() == {"M": 0.25, "N": 1.0}
    assert membership_scores(raw, release, MembershipParams(score="coverage")).to_dict() == {"M": 1.0, "N": 1.0}
    assert attack().evaluate(raw, release).n_successes == 0.0  # the non-member outscores the member
    assert attack(score="coverage").evaluate(raw, release).n_successes == 0.5  # a tie: a coin flip


def test_exact_counts_of_the_members_reveal_membership():
    # Every fragment of a member is released (coverage exactly 1), while on a 30 x 30 grid many 3-fragments of
    # a non-member's walk occur in no member's walk (coverage below 1); the inverse-count score separates too.
    members, others = random_walks(100, "m", seed=1), random_walks(100, "n", seed=2)
    raw = raw_frame({**members, **others}, members=set(members))
    release = fragment_counts([t for trajs in members.values() for t in trajs])
    result = attack().evaluate(raw, release)
    assert result.n_targets == 100 and result.evidence["auc"] > 0.99 and result.ci_low > result.baseline
    coverage = membership_scores(raw, release, MembershipParams(score="coverage"))
    assert (coverage[list(members)] == 1.0).all() and (coverage[list(others)] < 1.0).all()
    assert attack(score="coverage").evaluate(raw, release).risk == 1.0


def test_a_release_independent_of_the_targets_is_a_coin_flip():
    # Counts of a third population drawn from the same walks: members and non-members are exchangeable, so the
    # AUC is 1/2 up to sampling error. Under that null the Mann-Whitney AUC has variance (m + n + 1) / (12 m n)
    # (at most: ties only shrink it); 4 standard deviations bound a false alarm at 6e-5.
    members, others = random_walks(100, "m", seed=3), random_walks(100, "n", seed=4)
    strangers = random_walks(200, "s", seed=5)
    raw = raw_frame({**members, **others}, members=set(members))
    release = fragment_counts([t for trajs in strangers.values() for t in trajs])
    result = attack().evaluate(raw, release)
    sd = math.sqrt((100 + 100 + 1) / (12 * 100 * 100))
    assert abs(result.evidence["auc"] - 0.5) < 4 * sd
    assert result.ci_low <= 0.5 <= result.ci_high


def test_a_density_table_is_a_release_of_single_cells():
    raw = raw_frame({"M": [[1, 2]], "N": [[3, 4]]}, members={"M"})
    density = pd.DataFrame({"cell": [1, 2, 9], "count": [1.0, 1.0, 7.0]})
    assert membership_scores(raw, density, MembershipParams()).to_dict() == {"M": 1.0, "N": 0.0}
    assert attack().evaluate(raw, density).evidence["lengths"] == [1]


def test_lengths_the_release_does_not_have_carry_no_signal():
    raw = raw_frame({"M": [[1, 2, 3]], "N": [[4, 5, 6]]}, members={"M"})
    release = fragment_counts([[1, 2, 3]], lengths=(2,))
    result = attack(lengths=(3,)).evaluate(raw, release)
    assert result.evidence["auc"] == 0.5 and result.risk == 0.0


def test_consecutive_repeats_are_collapsed_like_released_fragments():
    raw = raw_frame({"M": [[1, 1, 1, 2, 2, 3]], "N": [[7, 8]]}, members={"M"})
    release = pd.DataFrame({"fragment": [[1, 2, 3]], "count": [1.0]})
    assert membership_scores(raw, release, MembershipParams()).to_dict() == {"M": 1.0, "N": 0.0}


def test_subsampling_is_seeded():
    members, others = random_walks(30, "m", seed=6), random_walks(40, "n", seed=7)
    raw = raw_frame({**members, **others}, members=set(members))
    release = fragment_counts([t for trajs in members.values() for t in trajs])
    a = attack(max_targets=10, seed=3).evaluate(raw, release)
    assert a.n_targets == 10 and a.to_dict() == attack(max_targets=10, seed=3).evaluate(raw, release).to_dict()


def test_inputs_are_checked():
    raw = raw_frame({"M": [[1, 2]], "N": [[3, 4]]}, members={"M"})
    release = pd.DataFrame({"fragment": [(1, 2)], "count": [1.0]})
    with pytest.raises(InputError, match="member"):
        attack().evaluate(raw.drop(columns="member"), release)
    with pytest.raises(InputError, match="non-members"):
        attack().evaluate(raw.assign(member=True), release)
    mixed = raw.copy()
    mixed.loc[0, "member"] = False
    mixed.loc[1, "member"] = True
    with pytest.raises(InputError, match="constant"):
        attack().evaluate(mixed, release)
    with pytest.raises(InputError, match="fragment"):
        attack().evaluate(raw, release.drop(columns="fragment"))
    with pytest.raises(InputError, match="non-finite"):
        attack().evaluate(raw, release.assign(count=np.nan))


@pytest.mark.parametrize("kwargs", [
    {"lengths": ()}, {"lengths": (0,)}, {"lengths": [2]}, {"score": "likelihood"}, {"max_targets": 0},
    {"seed": -1}, {"confidence": 1.0},
])
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ParameterError):
        MembershipParams(**kwargs)


def test_params_round_trip():
    params = MembershipParams(lengths=(2, 3), score="coverage", max_targets=5, seed=1)
    assert MembershipParams.from_dict(params.to_dict()) == params
    with pytest.raises(ParameterError, match="threshold"):
        MembershipParams.from_dict({"threshold": 0.5})


def test_the_staging_table_column_names_are_accepted():
    raw = raw_frame({"M": [[1, 2]], "N": [[3, 4]]}, members={"M"})
    staged = pd.DataFrame({"cells": [[1, 2], [5, 6]], "estimated_count": [1.0, 3.0]})
    assert membership_scores(raw, staged, MembershipParams()).to_dict() == {"M": 1.0, "N": 0.0}
    with pytest.raises(InputError, match="count"):
        attack().evaluate(raw, staged.drop(columns="estimated_count"))
