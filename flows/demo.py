"""``make demo``: a real governed release of real T-Drive taxi data, end to end.

Loads the T-Drive sample into PostGIS, runs the release flow (the spec's mechanism) with ``trajpub release run``,
which returns once the release awaits approval, approves it with ``trajpub approve`` as a named steward (the flow
run, still paused in the background, publishes it), and prints the published release (exported as the consumer
would), row counts, the ε spent and the lineage.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trajpub import config

config.apply_environment()

SPEC = Path(__file__).with_name("specs") / "tdrive_demo.yaml"
DATA = config.SHARED_DATA_DIR / "tdrive_sample_odd_taxis.csv.gz"
TRAJPUB = str(Path(sys.executable).with_name("trajpub"))
STEWARD = "dana"  # a steward login, added by the demo as an operator would


def banner(text: str) -> None:
    print(f"\n=== {text} ===", flush=True)


def run(*args: str) -> None:
    subprocess.run([TRAJPUB, *args], check=True)


def main() -> None:
    import geopandas as gpd

    from tasks import outcomes

    banner(f"load {DATA.name}")
    run("load", "tdrive", str(DATA), "--dataset", "tdrive_demo")

    banner("the spec's requester is registered, as an operator registers the people who ask for releases")
    run("requester", "add", "demo-engineer")

    banner("release run (returns once the release awaits the steward, after the audit gate)")
    started = subprocess.run([TRAJPUB, "release", "run", "--spec", str(SPEC)], check=False, stdout=subprocess.PIPE,
                             text=True)
    print(started.stdout, end="", flush=True)
    if started.returncode != 0:
        sys.exit(f"the release did not reach approval (exit code {started.returncode}); see the output above")
    release_id = json.loads(started.stdout.strip().splitlines()[-1])["release_id"]

    banner(f"steward {STEWARD} approves release {release_id}, logged in as themselves")
    run("steward", "add", STEWARD)
    run("approve", str(release_id), "--steward", STEWARD, "--comment", "demo: guarantee and audit reviewed")
    deadline = time.monotonic() + 300
    while (status := outcomes.release(release_id)["status"]) == "approved" and time.monotonic() < deadline:
        time.sleep(1)
    if status != "published":
        sys.exit(f"release {release_id} is '{status}', not published")

    with tempfile.TemporaryDirectory() as folder:
        banner("the published release, exported as the consumer role (first rows)")
        out = Path(folder) / "release.parquet"
        run("export", str(release_id), "--format", "geoparquet", "--out", str(out))
        points = gpd.read_parquet(out)
        print(points.head(8).to_string(index=False))
        banner("row counts")
        run("dataset", "show", "tdrive_demo")
        print(f"released: {points['traj_id'].nunique()} trajectories, {len(points)} points "
              "(view published.tdrive_demo_latest)")
    banner("privacy budget")
    run("budget", "show", "--dataset", "tdrive_demo")
    banner("release and lineage")
    run("release", "show", str(release_id))


if __name__ == "__main__":
    main()
