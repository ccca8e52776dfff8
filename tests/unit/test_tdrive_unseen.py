"""bench.tdrive_unseen: the taxis of TrjLink's folder by id parity, in the bundled sample's format and time zone."""

import gzip

import pandas as pd
import pytest

from bench.fgs_pufferfish import TDRIVE_SAMPLE, load_tdrive
from bench.tdrive_unseen import HEADER, fleet_lines


def shipped_taxis(ids: set[str]) -> dict[int, list[str]]:
    """The bundled sample's lines of the given taxis, by id, verbatim."""
    found: dict[int, list[str]] = {}
    with gzip.open(TDRIVE_SAMPLE, "rt") as f:
        assert next(f).rstrip("\n") == HEADER
        for line in f:
            taxi = line.split(",", 1)[0]
            if taxi in ids:
                found.setdefault(int(taxi), []).append(line.rstrip("\n"))
    return found


def test_odd_ids_rebuild_the_bundled_sample_verbatim_and_even_ids_leave_them_out():
    odd = shipped_taxis({"1", "3", "11"})
    files = {t: "\n".join(lines) + "\n\n" for t, lines in odd.items()}  # a trailing blank line is skipped
    files |= {2: "2,2008-02-02 13:33:52,116.36422,39.88781\n", 10: "10,2008-02-03 00:00:05,116.4,39.9\n"}
    assert fleet_lines(files, parity=1) == [HEADER, *odd[1], *odd[3], *odd[11]]
    # numeric order, not the folder's (10.txt sorts before 2.txt by name)
    assert fleet_lines(files, parity=0) == [HEADER, "2,2008-02-02 13:33:52,116.36422,39.88781",
                                            "10,2008-02-03 00:00:05,116.4,39.9"]


def test_times_stay_beijing_time_as_the_sample_writes_them(tmp_path):
    """Read as the sample is read (Beijing time -> UTC): 00:00:05 on 3 Feb in Beijing is 16:00:05 on 2 Feb UTC."""
    path = tmp_path / "even.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(fleet_lines({4: "4,2008-02-03 00:00:05,116.4,39.9\n"}, parity=0)) + "\n")
    points = load_tdrive(path)
    assert points["object_id"].tolist() == ["4"]
    assert points["t"].iloc[0] == pd.Timestamp("2008-02-02 16:00:05", tz="UTC")


def test_a_line_of_another_taxi_is_refused():
    with pytest.raises(ValueError, match=r"Testing/T-Drive/6.txt line 2: id '8' is not the file's id"):
        fleet_lines({6: "6,2008-02-02 10:00:00,116.4,39.9\n8,2008-02-02 10:01:00,116.4,39.9\n"}, parity=0)
