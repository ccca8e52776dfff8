"""Every code block of docs/consumers.md runs, in order, against a published release with timestamps
(the guide's dataset name replaced by the test's), in the consumer's own working folder, without a warning."""

from __future__ import annotations

import os
import re
import subprocess
import warnings
from pathlib import Path

import pytest

from tests.integration.conftest import TDRIVE_WEEK, TRAJPUB, base_spec, cli, start_release, wait_for_status

pytestmark = pytest.mark.integration

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "consumers.md"
#: What Python does not print to a script's user unless asked (its default warning filters).
QUIET_BY_DEFAULT = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)
BLOCK = re.compile(r"^```(python|sh)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_every_code_block_of_the_consumer_guide_runs(engine, loaded_tdrive, tmp_path, monkeypatch):
    dataset = loaded_tdrive("guide")
    run = start_release(base_spec(dataset, mechanism="objtrace", params={"epsilon": 10.0}, **TDRIVE_WEEK), tmp_path)  # the floor on 40 taxis
    assert wait_for_status(engine, run, {"awaiting_approval", "blocked"}) == "awaiting_approval", run.output()
    assert cli("approve", str(run.release_id), "--steward", "ada").returncode == 0
    assert run.proc.wait(timeout=120) == 0, run.output()

    blocks = BLOCK.findall(GUIDE.read_text())
    kinds = [kind for kind, _ in blocks]
    assert kinds.count("python") >= 5 and "sh" in kinds
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for kind, code in blocks:
        code = code.replace("tdrive_demo", dataset)
        if kind == "python":
            with warnings.catch_warnings(record=True) as caught:  # what a consumer would see printed
                warnings.simplefilter("always")
                for hidden in QUIET_BY_DEFAULT:
                    warnings.simplefilter("ignore", hidden)
                exec(compile(code, f"{GUIDE.name} block", "exec"), namespace)  # noqa: S102 - the guide is ours
            # movingpandas' own notice at import (an optional smoother library is missing) is not about the data
            printed = [w for w in caught if "optional dependencies" not in str(w.message)]
            assert not printed, {str(w.message)[:120] for w in printed}
        else:
            env = {**os.environ, "RELEASE_ID": str(namespace["release_id"]),
                   "PATH": f"{Path(TRAJPUB).parent}:{os.environ['PATH']}"}
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], check=False, capture_output=True, text=True, env=env,
                                  timeout=300)
            assert done.returncode == 0, done.stderr
    assert namespace["release_id"] == run.release_id
    assert 0 < len(namespace["collection"]) <= namespace["timed"]["traj_id"].nunique()
    assert (tmp_path / "density.png").stat().st_size > 0
