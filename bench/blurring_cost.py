"""The cost of the attacks that see through blurring (``membership_time``, ``membership_shape``) on the
T-Drive sample and its scale-ups up to the 40x city (16 M raw points), in process on one core.

Raw: the sample cleaned (:func:`bench.tdrive.load_clean`), scaled up by :func:`bench.tdrive.replicate` (every taxi
copied under new ids, shifted 200-500 m: the same as ``bench.scale``'s 40x city), prepared on the 2 km grid
(:func:`bench.tdrive.prepare`), 30% of the objects held out as controls. Release: CityTrace ε 5 per taxi (its
example spec) on the sample's members, replicated the same way to the scale-up's size (a synthesizer's release
grows with the fleet; running CityTrace itself on 16 M points is ``bench.scale``'s job), with 10% of its records
replaced by members' records translated 1-5 km (:mod:`tests.controls.blurring`), so that the linking paths run.

    .venv/bin/python -m bench.blurring_cost [--factors 1 10 40]

Prints one line per factor and attack: wall and CPU seconds, the load average, peak resident memory of the process,
the risk found.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np
import pandas as pd

from audits.controls import hold_out
from audits.shape_match import ShapeMatch, ShapeMatchParams
from audits.time_match import TimeMatch, TimeMatchParams
from bench.tdrive import GRID, load_clean, prepare, replicate
from bench.utility_data import TDRIVE_WINDOW
from mechanisms.citytrace import CityTraceParams
from mechanisms.citytrace.adapter import CityTrace
from mechanisms.registry import example_spec_file
from tests.controls.blurring import blurred_records
from tests.controls.mechanism import replacing
from trajpub.mechanism import PublicInputs
from trajpub.spec import read_spec_file


def release_of(members: pd.DataFrame, factor: int, seed: int) -> pd.DataFrame:
    """CityTrace's release of the members with 10% of its records blurred members (translated), scaled up."""
    rng = np.random.default_rng(seed)
    inputs = PublicInputs(GRID, window=TDRIVE_WINDOW)
    params = CityTraceParams.from_dict(read_spec_file(example_spec_file("citytrace"))["params"])
    points = CityTrace().release(members, inputs, params, rng).points
    blur = blurred_records(members, round(0.1 * points["traj_id"].nunique()), "translate", rng, inputs)
    points = replacing(points, blur, rng)
    scaled = replicate(points.assign(object_id=points["traj_id"].astype(str)), factor, seed)
    return scaled.assign(traj_id=pd.factorize(scaled["object_id"])[0])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--factors", type=int, nargs="+", default=[1, 10, 40])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    clean, _ = load_clean()
    for factor in args.factors:
        raw = prepare(replicate(clean, factor, args.seed))
        controls = hold_out(raw["object_id"].unique(), 0.3, np.random.default_rng(args.seed))
        raw = raw.assign(member=~raw["object_id"].isin(controls))
        release = release_of(raw[raw["member"] & ~raw["object_id"].str.contains("~")], factor, args.seed)
        for attack in (TimeMatch(TimeMatchParams()), ShapeMatch(ShapeMatchParams())):
            began, cpu = time.perf_counter(), time.process_time()
            result = attack.evaluate(raw, release)
            print(f"{factor}x: {len(raw):,} raw points, {release['traj_id'].nunique():,} released records: "
                  f"{attack.name} {time.perf_counter() - began:.1f} s wall, {time.process_time() - cpu:.1f} s CPU, "
                  f"load {os.getloadavg()[0]:.0f}, peak RSS "
                  f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB, risk {result.risk:.3f} "
                  f"[{result.risk_ci_low:.3f}, {result.risk_ci_high:.3f}]", flush=True)


if __name__ == "__main__":
    main()
