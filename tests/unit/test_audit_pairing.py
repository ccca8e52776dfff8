"""The audit's point error pairs a renumbered truthful record with the raw trajectory it comes from."""

import pandas as pd
import pytest

from audits.point_utility import point_error
from tasks.audit import paired_with_sources
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import InputError


def test_renumbered_records_are_paired_through_the_owner_table():
    raw = pd.DataFrame({"object_id": ["a"] * 3 + ["b"] * 3, "traj_id": [1, 1, 1, 2, 2, 2], "seq": [0, 1, 2] * 2,
                        "x": [0.0, 100.0, 200.0, 5000.0, 5100.0, 5200.0], "y": 0.0})
    # published unchanged but under shuffled ids: 7 is b's trajectory 2, 9 is a's trajectory 1
    release = raw.assign(traj_id=[9, 9, 9, 7, 7, 7])
    owners = pd.DataFrame({"traj_id": [7, 9], "object_id": ["b", "a"], "source_traj_id": [2, 1]})
    paired = paired_with_sources(CandidateRelease(Shape.TRUTHFUL, release, {}, owners=owners), release)
    assert point_error(raw, paired, "hausdorff") == 0.0
    # without the owner table nothing pairs; a wrong table pairs nothing either (owners differ)
    assert paired_with_sources(CandidateRelease(Shape.TRUTHFUL, release, {}), release) is release
    wrong = owners.assign(source_traj_id=[1, 2])
    for unpaired in (release, paired_with_sources(CandidateRelease(Shape.TRUTHFUL, release, {}, owners=wrong), release)):
        with pytest.raises(InputError, match="no released record shares traj_id and object_id"):
            point_error(raw, unpaired, "hausdorff")
