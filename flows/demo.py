"""``make demo``: a real governed release of real T-Drive taxi data, end to end.

Loads the T-Drive sample into PostGIS, runs the release flow (the spec's mechanism) in a subprocess, waits until it
stops for approval, approves it with ``trajpub approve`` as a named steward, and prints the published table, row
counts, the ε spent and the lineage.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
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
    import pandas as pd
    import sqlalchemy as sa

    from tasks import governance
    from tasks.db import engine

    banner(f"load {DATA.name}")
    run("load", "tdrive", str(DATA), "--dataset", "tdrive_demo")

    banner("the spec's requester is registered, as an operator registers the people who ask for releases")
    run("requester", "add", "demo-engineer")

    banner("release run (waits for the steward after the audit gate)")
    proc = subprocess.Popen([TRAJPUB, "release", "run", "--spec", str(SPEC)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    found: dict[str, int] = {}

    def echo() -> None:
        for line in proc.stdout:
            print(f"  | {line}", end="", flush=True)
            m = re.search(r"release (\d+) planned", line)
            if m:
                found["id"] = int(m.group(1))

    reader = threading.Thread(target=echo, daemon=True)
    reader.start()
    eng = engine()
    status = None
    while proc.poll() is None:
        if "id" in found:
            with eng.connect() as conn:
                status = governance.get_release(conn, found["id"])["status"]
            if status == "awaiting_approval":
                break
        time.sleep(1)
    if status != "awaiting_approval":
        reader.join(timeout=5)
        sys.exit(f"the release did not reach approval (exit code {proc.wait()}); see the output above")
    release_id = found["id"]

    banner(f"steward {STEWARD} approves release {release_id}, logged in as themselves")
    run("steward", "add", STEWARD)
    run("approve", str(release_id), "--steward", STEWARD, "--comment", "demo: guarantee and audit reviewed")
    proc.wait(timeout=300)
    reader.join(timeout=5)
    if proc.returncode != 0:
        sys.exit(f"the release flow failed (exit code {proc.returncode})")

    with eng.connect() as conn:
        rel = governance.get_release(conn, release_id)
        table = rel["published_table"]
        banner(f"published table {table} (first rows)")
        print(pd.read_sql(sa.text(f"SELECT traj_id, seq, ST_AsText(geom) AS geom FROM {table} "
                                  "ORDER BY traj_id, seq LIMIT 8"), conn).to_string(index=False))
        n_pts, n_traj = conn.execute(sa.text(f"SELECT count(*), count(DISTINCT traj_id) FROM {table}")).one()
        n_raw = conn.execute(sa.text("SELECT count(*) FROM raw.points WHERE dataset = 'tdrive_demo'")).scalar_one()
    banner("row counts")
    print(f"raw points: {n_raw}; released: {n_traj} trajectories, {n_pts} points (view published.tdrive_demo_latest)")
    banner("privacy budget")
    run("budget", "show", "--dataset", "tdrive_demo")
    banner("release and lineage")
    run("release", "show", str(release_id))


if __name__ == "__main__":
    main()
