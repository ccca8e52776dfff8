"""A full disk under a command's output (a real tmpfs of 64 KiB, filled, mounted in the test's own folder: never
the shared disk) is one sentence, exit code 1, no traceback (flows/cli/base.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.integration.conftest import cli

pytestmark = pytest.mark.integration


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small filesystem needs root")
def test_a_full_disk_is_one_sentence(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], check=True)
    try:
        with open(disk / "filler", "wb", buffering=0) as f, pytest.raises(OSError):
            while True:
                f.write(b"\0" * 4096)
        done = cli("verify", "--anchor", str(disk / "anchor.json"), "--new-anchor")
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: the disk is full; free some space"), done.stderr
