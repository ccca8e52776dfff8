"""The T-Drive taxis the project has never seen: the even-numbered taxis of TrjLink's ``Testing/T-Drive``.

The bundled sample ``tdrive_sample_odd_taxis.csv.gz`` (``trajpub.config.SHARED_DATA_DIR``) holds the taxis with an
odd id of TrjLink's ``Testing/T-Drive/<id>.txt`` (600 files, one per taxi, ``id,yyyy-mm-dd hh:mm:ss,lng,lat``,
Beijing time), their lines verbatim under the header ``taxi_id,datetime,longitude,latitude``, in increasing id:
the same construction with odd ids reproduces it line for line. The even ids are the other 300 taxis of the same
week (2-8 Feb 2008); they are written the same way, times left as the files write them (Beijing time, no offset,
as the sample), to the git-ignored ``bench/ref/tdrive_unseen_even_taxis.csv.gz``. TrjLink is cloned into the
git-ignored ``bench/ref/TrjLink`` as :mod:`bench.external_attacks` does; the files are read from its ``HEAD``
commit, so a clone without a work tree serves::

    git clone --no-checkout https://github.com/uqwhua/TrjLink bench/ref/TrjLink
    .venv/bin/python -m bench.tdrive_unseen          # writes bench/ref/tdrive_unseen_even_taxis.csv.gz

The data are research data under their owners' terms: never committed, never published by the project.
"""

from __future__ import annotations

import gzip
import subprocess
from collections.abc import Mapping
from pathlib import Path

from bench.external_attacks import REF, SOURCE

FOLDER = "Testing/T-Drive"
HEADER = "taxi_id,datetime,longitude,latitude"
UNSEEN = REF / "tdrive_unseen_even_taxis.csv.gz"


def fleet_lines(files: Mapping[int, str], parity: int) -> list[str]:
    """The CSV lines (header first) of the taxis whose id has ``parity`` (0 even, 1 odd): each file's non-empty
    lines verbatim, files in increasing id. A line whose id field is not its file's id is an error (the file
    name is the only id the folder has)."""
    lines = [HEADER]
    for taxi in sorted(t for t in files if t % 2 == parity):
        for n, line in enumerate(files[taxi].splitlines(), 1):
            if not line.strip():
                continue
            if line.split(",", 1)[0] != str(taxi):
                raise ValueError(f"{FOLDER}/{taxi}.txt line {n}: id {line.split(',', 1)[0]!r} is not the file's id")
            lines.append(line)
    return lines


def taxi_files(source: Path = SOURCE) -> tuple[dict[int, str], list[int]]:
    """Every ``Testing/T-Drive/<id>.txt`` of the clone's ``HEAD`` commit, by taxi id, and the ids whose file the
    clone lists but does not hold (a snapshot may leave out large files)."""
    listing = subprocess.run(["git", "-C", str(source), "ls-tree", "-z", "HEAD", f"{FOLDER}/"], check=True,
                             capture_output=True, text=True).stdout
    blobs = {}
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        name = Path(path).name
        if name.endswith(".txt") and name[:-4].isdigit():
            blobs[int(name[:-4])] = meta.split()[2]
    batch = subprocess.run(["git", "-C", str(source), "cat-file", "--batch"], check=True, capture_output=True,
                           input="".join(f"{b}\n" for b in blobs.values()).encode()).stdout
    files, missing, at = {}, [], 0
    for taxi in blobs:
        header_end = batch.index(b"\n", at)
        header = batch[at:header_end].split()
        if header[1] == b"missing":
            missing.append(taxi)
            at = header_end + 1
            continue
        size = int(header[2])
        files[taxi] = batch[header_end + 1:header_end + 1 + size].decode()
        at = header_end + 1 + size + 1
    return files, sorted(missing)


def write_unseen(source: Path = SOURCE, out: Path = UNSEEN) -> list[int]:
    """The even taxis of the clone at ``source`` as ``out`` (gzip), in the bundled sample's format; returns the
    even ids the clone does not hold (left out)."""
    files, missing = taxi_files(source)
    lines = fleet_lines(files, parity=0)
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    return [t for t in missing if t % 2 == 0]


if __name__ == "__main__":
    if not SOURCE.exists():
        raise SystemExit(f"no TrjLink clone at {SOURCE}: clone it first (see python -m pydoc bench.tdrive_unseen)")
    absent = write_unseen()
    print(f"wrote {UNSEEN.relative_to(REF.parent.parent)}"
          + (f"; the clone does not hold the file of even taxi(s) {absent}, left out" if absent else ""))
