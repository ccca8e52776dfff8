"""An outside attacker beside ours: TrjLink's linking against the truthful releases, next to the gate's attacks.

TrjLink (Jin, Hua, Xu, Zhou, "Moving Object Linking Based on Historical Trace", ICDE 2019; Jin et al.,
"Trajectory-Based Spatiotemporal Entity Linking", TKDE 34(9) 2022; github.com/uqwhua/TrjLink) is the linking code
of the survey our attack A1 follows. It is Java with one dependency it ships (commons-lang3) and no build file; it
is cloned into the git-ignored ``bench/ref/TrjLink`` (never copied here) and compiled with javac, with our driver
``bench/external_attacks/TrjLinkDriver.java``::

    git clone <TrjLink> bench/ref/TrjLink && (cd bench/ref/TrjLink && git checkout HEAD -- src libs)
    javac -nowarn -encoding UTF-8 -cp bench/ref/TrjLink/libs/commons-lang3-3.10.jar -d bench/ref/trjlink-classes \\
        $(find bench/ref/TrjLink/src -name '*.java') bench/external_attacks/TrjLinkDriver.java

TrjLink's ``main.Main`` links the odd-day half of each object's trace to the even-day halves of all objects, reads
files ``1.txt`` ... in order and drops objects of fewer than 500 points (a taxi has a median 248 points on the
specs' day). The driver keeps its map-matching, signatures (spatial, temporal, spatiotemporal, sequential), their
reduction to the top ``reduction`` dimensions and its similarities (cosine; 1 - EMD for temporal), and swaps the
protocol: query = the released records, one file per record; data = the raw objects (the background knowledge),
one file per object; both in TrjLink's input format (``id,yyyy-mm-dd hh:mm:ss,lng,lat``, Beijing time). The
driver writes every positive similarity; here each record is linked to its most similar raw object, ties broken
uniformly at random and counted by expectation (our A1's rule; TrjLink's linear scan gives a tie to the true
object). Acc@1 over the same targets as our A1, corrected by the same random-guess baseline 1/N.

Map-matching: TrjLink snaps every point to its nearest road intersection, read from
``Testing/RoadNetworkInfo/NNid2lnglat.csv``, a file absent from the stored snapshot of the repository. No Beijing
road network is available offline, so the intersections are a public lattice: a node every 0.002 degrees (~170 m x
~220 m) over the specs' bbox, each at the centre of one of TrjLink's 0.001-degree grid cells, so that every point
finds a node in the 3 x 3 cells it searches.

Releases: the example specs (``mechanisms/{glove,w4m,dummy}/example.yaml``: one day of the 300-taxi sample,
prepared as the flow prepares it; :func:`bench.table4.partitions`); mix zones and (k-Psi)-anonymity have Helsinki
example specs (simulated traces on an OpenStreetMap network); their parameters run on the same T-Drive day, mix zones
on the synthetic central Beijing network of :func:`bench.table4.central_beijing_network`, (k-Psi) without a network
(``road_aware: false``, ``psi_mode: constant``, ``delta_m`` 500 m, as ``bench/table4.py``). Every mechanism runs
through its flow adapter (:func:`bench.table4.protect`). Our attacks: the default policy's ``signature_linkage``
(A1), ``known_points`` and ``ap_attack``, at its resolutions (:func:`tasks.audit.run_at_resolutions`), on the frames
the gate gives them (:func:`tasks.audit.attack_frames`). Anonymity sets (Dummy, (k-Psi)): both attackers get the
real member of every set with its owner, i.e. an adversary who has already singled it out of its set (the gate's
upper bound); the dummies are not targets.

``python -m bench.external_attacks [--only glove,w4m] [--reuse]`` writes ``bench/external_attacks/results.json``
and the tables of ``bench/EXTERNAL_ATTACKS_RESULTS.md`` (between its markers); ``--reuse`` audits the releases kept
in ``bench/out/external_attacks/`` by an earlier run instead of making them again.
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from distributed import Client
from scipy import sparse

from audits.gate import GatePolicy
from audits.result import AttackResult
from audits.signature_linkage import SIGNATURE_KINDS, expected_in_top, owner_rank_counts
from bench.fgs_pufferfish import machine
from bench.table4 import Model, partitions, protect
from bench.tdrive import TZ, load_clean
from mechanisms.mixzone import MixzoneParams
from mechanisms.registry import example_spec_file, mechanism
from tasks.audit import attack_frames, run_at_resolutions
from tasks.dask_cluster import local_cluster
from trajpub.mechanism import OnRoadNetwork
from trajpub.spec import ReleaseSpec, read_spec_file

ROOT = Path(__file__).resolve().parent
REF = ROOT / "ref"
SOURCE = REF / "TrjLink"
CLASSES = REF / "trjlink-classes"
JAR = SOURCE / "libs" / "commons-lang3-3.10.jar"
OUT = ROOT / "out" / "external_attacks"
RESULTS = ROOT / "external_attacks" / "results.json"
RESULTS_MD = ROOT / "EXTERNAL_ATTACKS_RESULTS.md"
BEGIN, END = "<!-- tables:begin -->", "<!-- tables:end -->"

SPECS = {name: example_spec_file(name) for name in ("glove", "w4m", "mixzone", "dummy", "kpsi_anonymity")}
TDRIVE_SPEC = example_spec_file("glove")  # the window, bbox and preparation of every release (all T-Drive specs agree)
NO_NETWORK = {"road_network": None}
TDRIVE_OVERRIDES = {"mixzone": NO_NETWORK,
                    "kpsi_anonymity": {**NO_NETWORK, "road_aware": False, "psi_mode": "constant", "delta_m": 500.0}}
OUR_ATTACKS = ("signature_linkage", "known_points", "ap_attack")
ATTACK_SEEDS = {"known_points": {"seed": 0}, "ap_attack": {"seed": 0}}

# TrjLink's config.properties defaults (reduction 10, 2-grams, 2-hour windows, 300 x 300 cells for
# spatiotemporal); ``reduction`` 0 is its full-length signature.
SIGNATURES = ("spatial", "temporal", "st", "seq")
REDUCTIONS = (10, 0)
RUNS = tuple((s, r) for s in SIGNATURES for r in REDUCTIONS if s != "temporal" or r == 10)
"""Every signature at both reductions but temporal's: it has at most 24 / 2 = 12 dimensions, so reduction 0 is
hardly different, and its EMD is the costly similarity."""
GRAM_LEN, TIME_WINDOW_H, ST_GRID_NUM = 2, 2, 300
LATTICE_DEG = 0.002
JAVA_HEAP = "-Xmx3g"


def tdrive_spec() -> ReleaseSpec:
    return ReleaseSpec.from_dict(read_spec_file(TDRIVE_SPEC))


def model(name: str) -> Model:
    """The mechanism with its example spec's parameters (and the T-Drive overrides of a Helsinki spec)."""
    params = {**read_spec_file(SPECS[name])["params"], **TDRIVE_OVERRIDES.get(name, {})}
    grid = tdrive_spec().grid
    if name == "mixzone":
        zones = MixzoneParams(**{k: v for k, v in params.items() if k != "road_network"})
        return Model(name, name, params, grid=grid,
                     setup=lambda _: OnRoadNetwork(zones, "synthetic central Beijing", "synthetic"))
    return Model(name, name, params, grid=grid)


def window(clean: pd.DataFrame, spec: ReleaseSpec) -> pd.DataFrame:
    """The points of the spec's snapshot window [start, end) (UTC)."""
    t = clean["t"]
    return clean[(t >= pd.Timestamp(spec.window_start)) & (t < pd.Timestamp(spec.window_end))]


def release(client: Client, name: str, day: pd.DataFrame, seed: int, reuse: bool) -> tuple:
    """(candidate, raw as prepared, protect seconds), made by the mechanism's adapter or read back (``reuse``)."""
    kept = OUT / f"{name}.pkl"
    if reuse and kept.exists():
        return pickle.loads(kept.read_bytes())
    m = model(name)
    params = m.parsed()
    parts = partitions(day, day["object_id"].nunique(), mechanism(name).max_records_per_object(params), m.grid)
    candidate, wall, _ = protect(client, m, params, parts, seed)
    out = (candidate, pd.concat(parts, ignore_index=True), wall)
    kept.write_bytes(pickle.dumps(out))
    return out


def lattice_file(frames: list[pd.DataFrame], bbox: tuple, path: Path) -> int:
    """TrjLink's road-intersection file (``id,lng*1e7 lat*1e7``): the public lattice of the module docstring, its
    nodes at the centres of the lattice cells, written only for the cells some point of ``frames`` falls in (every
    point's nearest node is its own cell's centre, so the others are never used; JVM memory stays small), and the
    bbox's corners (TrjLink's grids span the integer degrees around its nodes). Ids start at 1 (its
    spatiotemporal signature drops node 0). Returns the largest id."""
    lon = np.concatenate([f["lon"].to_numpy(float) for f in frames])
    lat = np.concatenate([f["lat"].to_numpy(float) for f in frames])
    cells = np.unique(np.column_stack([np.floor((lon - bbox[0]) / LATTICE_DEG),
                                       np.floor((lat - bbox[1]) / LATTICE_DEG)]), axis=0)
    centres = np.array(bbox[:2]) + (cells + 0.5) * LATTICE_DEG
    nodes = np.vstack([centres, [bbox[:2], bbox[2:]]])
    e7 = np.round(nodes * 1e7).astype(np.int64)
    path.write_text("".join(f"{i},{x} {y}\n" for i, (x, y) in enumerate(e7, start=1)))
    return len(e7)


def write_trjlink_folder(frame: pd.DataFrame, key: str, folder: Path) -> pd.Index:
    """One file per ``key`` value in TrjLink's format, numbered 1..n in sorted key order; returns the keys in
    file order (file i holds keys[i - 1])."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    keys = pd.Index(sorted(frame[key].unique(), key=str))
    number = pd.Series(np.arange(1, len(keys) + 1), index=keys)
    local = pd.to_datetime(frame["t"], utc=True).dt.tz_convert(TZ).dt.strftime("%Y-%m-%d %H:%M:%S")
    ids = frame[key].map(number).astype(str)
    text = ids + "," + local + "," + frame["lon"].map("{:.6f}".format) + "," + frame["lat"].map("{:.6f}".format)
    for k, lines in text.groupby(frame[key].map(number).to_numpy(), sort=True):
        (folder / f"{k}.txt").write_text("\n".join(lines) + "\n")
    return keys


def trjlink_command(nodes: Path, max_id: int, query: Path, data: Path, out_prefix: Path,
                    runs: tuple[tuple[str, int], ...]) -> list[str]:
    listed = ",".join(f"{signature}:{reduction}" for signature, reduction in runs)
    return ["java", JAVA_HEAP, "-Duser.timezone=UTC", "-cp", f"{CLASSES}:{JAR}", "TrjLinkDriver", str(nodes),
            str(max_id), str(query), str(data), listed, str(GRAM_LEN), str(TIME_WINDOW_H), str(ST_GRID_NUM),
            str(out_prefix)]


def trjlink_accuracy(pairs: pd.DataFrame, owners: np.ndarray, n_objects: int, name: str) -> AttackResult:
    """Acc@1 of TrjLink's similarities (``query``, ``data`` file numbers, ``similarity``) over the targets,
    ``owners[i]`` the file number of target record i + 1's owner (0 for a record that is no target)."""
    n_records = len(owners)
    sim = sparse.csr_matrix((pairs["similarity"].to_numpy(float),
                             (pairs["query"].to_numpy() - 1, pairs["data"].to_numpy() - 1)),
                            shape=(n_records, n_objects))
    targets = np.flatnonzero(owners > 0)
    sim, owner_col = sim[targets], owners[targets] - 1
    owner_sim = np.asarray(sim[np.arange(len(targets)), owner_col]).ravel()
    above, tied = owner_rank_counts(sim, owner_sim, n_objects)
    successes = float(expected_in_top(1, above, tied).sum())
    return AttackResult(attack=name, n_targets=len(targets), n_successes=successes, baseline=1 / n_objects,
                        evidence={"records_linked_to_nobody": int((np.diff(sim.indptr) == 0).sum())})


def run_trjlink(background: pd.DataFrame, frame: pd.DataFrame, name: str, bbox: tuple,
                runs: tuple[tuple[str, int], ...]) -> dict:
    """TrjLink's signatures at their reductions (``runs``) on (release records -> raw objects), in one JVM."""
    work = OUT / name
    objects = write_trjlink_folder(background, "object_id", work / "data")
    records = write_trjlink_folder(frame, "traj_id", work / "query")
    nodes = work / "lattice.csv"
    max_id = lattice_file([background, frame], bbox, nodes)
    owner_of = frame.groupby("traj_id")["object_id"].first().astype(str)
    number = pd.Series(np.arange(1, len(objects) + 1), index=objects.astype(str))
    owners = owner_of.reindex(records).map(number).fillna(0).astype(int).to_numpy()
    cmd = trjlink_command(nodes, max_id, work / "query", work / "data", work / "pairs", runs)
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    out: dict = {"process_s": time.perf_counter() - started, "command": " ".join(str(c) for c in cmd), "runs": {}}
    said = {(key, run): value for key, run, value in (x.split() for x in proc.stdout.splitlines()
                                                      if x.startswith("TRJLINK_"))}
    for signature, reduction in runs:
        run = f"{signature}:{reduction}"
        pairs = pd.read_csv(work / f"pairs_{signature}_{reduction}.csv")
        r = trjlink_accuracy(pairs, owners, len(objects), f"trjlink_{signature}")
        out["runs"][run] = {
            "signature": signature, "reduction": reduction, "n_targets": r.n_targets, "acc1": r.success_rate,
            "ci": [r.ci_low, r.ci_high], "baseline": r.baseline, "risk": r.risk,
            "linked_to_nobody": r.evidence["records_linked_to_nobody"],
            "query_signatures": int(said["TRJLINK_QUERY_SIGNATURES", run]),
            "linking_s": float(said["TRJLINK_SECONDS", run])}
        print(f"  TrjLink {run}: Acc@1 {r.success_rate:.3f}", flush=True)
    return out


def gate_policy() -> GatePolicy:
    """The default policy's ceilings, parameters and resolutions, for the three attacks compared."""
    default = GatePolicy.default()
    return replace(default, max_risk={n: default.max_risk[n] for n in OUR_ATTACKS},
                   attack_params={n: {**default.attack_params.get(n, {}), **ATTACK_SEEDS.get(n, {})}
                                  for n in OUR_ATTACKS},
                   utility={}, when_not_applicable={})


def run_ours(client: Client, background: pd.DataFrame, frame: pd.DataFrame, bbox: tuple) -> dict:
    started = time.perf_counter()
    found, failures, not_applicable = run_at_resolutions(client, gate_policy(), background, frame, "truthful", bbox)
    out: dict = {"wall_s": time.perf_counter() - started, "failures": failures | not_applicable, "results": []}
    for resolution, r in found:
        out["results"].append({
            "attack": r.attack, "resolution_m": resolution, "n_targets": r.n_targets,
            "success_rate": r.success_rate, "ci": [r.ci_low, r.ci_high], "baseline": r.baseline, "risk": r.risk,
            "acc1": r.evidence.get("acc_at_k", {}).get("1"), "variant": r.evidence.get("reported_variant"),
            "signature": r.evidence.get("signature"), "by_signature": r.evidence.get("by_signature")})
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated mechanisms (default: all five)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reuse", action="store_true", help="audit the releases kept by an earlier run")
    parser.add_argument("--skip-trjlink", action="store_true", help="keep TrjLink's results of an earlier run")
    parser.add_argument("--no-temporal", action="store_true",
                        help="leave out TrjLink's temporal signature (its EMD is the slow part: minutes per release)")
    args = parser.parse_args(argv)
    names = [n for n in SPECS if not args.only or n in args.only.split(",")]
    OUT.mkdir(parents=True, exist_ok=True)
    RESULTS.parent.mkdir(exist_ok=True)
    spec = tdrive_spec()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=SOURCE,
                            check=True).stdout.strip()
    ours_commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                                 check=True).stdout.strip()
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True).stderr.splitlines()[0]
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"releases": {}}
    results.update({"machine": machine(), "trjlink_commit": commit, "commit": ours_commit, "java": java,
                    "command": " ".join(["python -m bench.external_attacks", *(sys.argv[1:] if argv is None else argv)])})
    day = window(load_clean()[0], spec)
    with local_cluster(2, memory_limit="4GB") as cluster, Client(cluster) as client:
        for name in names:
            candidate, raw, protect_s = release(client, name, day, args.seed, args.reuse)
            background, frame = attack_frames(raw, candidate)
            print(f"{name}: {frame['traj_id'].nunique()} target records of {background['object_id'].nunique()} "
                  f"objects", flush=True)
            entry = results["releases"].setdefault(name, {})
            if not args.skip_trjlink:
                runs = tuple(r for r in RUNS if not (args.no_temporal and r[0] == "temporal"))
                entry["trjlink"] = {**run_trjlink(background, frame, name, spec.bbox, runs),
                                    "run_date": results["machine"]["date"], "commit": ours_commit}
            entry["ours"] = run_ours(client, background, frame, spec.bbox)
            entry["a1_params"] = gate_policy().attack_params.get("signature_linkage", {})
            entry["run"] = {"command": results["command"], "commit": ours_commit, "date": results["machine"]["date"]}
            entry.update({
                "spec": f"{name}/example.yaml", "params": model(name).params, "shape": candidate.shape.name,
                "protect_s": protect_s, "objects": int(background["object_id"].nunique()),
                "released_records": int(candidate.points["traj_id"].nunique()),
                "target_records": int(frame["traj_id"].nunique())})
            RESULTS.write_text(json.dumps(results, indent=1, default=str))
    write_report(results)


def fmt(x, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def worst(ours: dict, attack: str) -> dict | None:
    """The attack's result of largest risk over the resolutions (the gate's figure)."""
    found = [r for r in ours["results"] if r["attack"] == attack]
    return max(found, key=lambda r: r["risk"]) if found else None


BEFORE = "spatial/10"
"""A1 as the default policy ran it before it learnt TrjLink's signatures (version 4): spatial, top 10."""


def a1_before(ours: dict) -> dict:
    """The version-4 A1 at its worst resolution, from the per-signature figures of the same run."""
    found = [(r["resolution_m"], r["by_signature"][BEFORE]) for r in ours["results"]
             if r["attack"] == "signature_linkage"]
    resolution, figures = max(found, key=lambda x: x[1]["risk"])
    return {**figures, "resolution_m": resolution}


def tables(results: dict) -> str:
    m = results["machine"]
    results = {**results, "releases": {n: results["releases"][n] for n in SPECS if n in results["releases"]}}
    lines = [(f"TrjLink {results['trjlink_commit']}, {results['java']}; {m['nproc']} cores ({m['cpu']}), "
              f"{m['ram_gb']} GB, a machine shared with other engineers (load average 25-37 during the runs); 2 Dask "
              "workers. Runs (`python -m bench.external_attacks`; TrjLink's and ours at the commits and dates below):"),
             ""]
    for name, e in results["releases"].items():
        run = e["run"]
        lines.append(f"- {name}: TrjLink at {e['trjlink']['commit']}, {e['trjlink']['run_date'][:16]} UTC; ours "
                     f"`{run['command']}` at {run['commit']}, {run['date'][:16]} UTC")
    lines += ["", "### TrjLink's best signature beside our A1 (worst resolution, as the gate decides)", "",
             ("| release | targets / objects | TrjLink best: signature:reduction, Acc@1 [95% CI], risk | A1 before "
             "(spatial top 10): success, risk, resolution | A1 now (default policy): success [95% CI], risk, "
             "signature/top_m, variant, resolution | known_points risk | ap_attack risk |"),
             "|---|---|---|---|---|---|---|"]
    for name, e in results["releases"].items():
        best = max(e["trjlink"]["runs"].values(), key=lambda r: r["acc1"])
        a1, before = worst(e["ours"], "signature_linkage"), a1_before(e["ours"])
        kp, ap = worst(e["ours"], "known_points"), worst(e["ours"], "ap_attack")
        lines.append(
            f"| {name} | {e['target_records']} / {e['objects']} | {best['signature']}:{best['reduction']}, "
            f"{best['acc1']:.3f} [{best['ci'][0]:.3f}, {best['ci'][1]:.3f}], {best['risk']:.3f} | "
            f"{before['success_rate']:.3f}, {before['risk']:.3f}, {before['resolution_m']:g} m | "
            f"{a1['success_rate']:.3f} [{a1['ci'][0]:.3f}, {a1['ci'][1]:.3f}], {a1['risk']:.3f}, "
            f"{max(a1['by_signature'], key=lambda k: a1['by_signature'][k]['risk'])}, {a1['variant']}, "
            f"{a1['resolution_m']:g} m | "
            f"{fmt(kp and kp['risk'])} | {fmt(ap and ap['risk'])} |")
    runs = [f"{s}:{r}" for s, r in RUNS]
    lines += ["", "### TrjLink, every signature: Acc@1 (seconds of signature building and linking in the JVM)", "",
              "| release | " + " | ".join(runs) + " |", "|---|" + "---|" * len(runs)]
    for name, e in results["releases"].items():
        done = e["trjlink"]["runs"]
        lines.append(f"| {name} | " + " | ".join(
            f"{done[r]['acc1']:.3f} ({done[r]['linking_s']:.0f} s)" if r in done else "not run" for r in runs)
            + " |")
    keys = [f"{k}/{t}" for k in SIGNATURE_KINDS for t in ("10", "all")]
    lines += ["", "### Ours, every attack and resolution; A1 by signature kind / top_m (success rate, risk)", "",
              "| release | attack | resolution m | success [95% CI] | risk | " + " | ".join(keys) + " |",
              "|---|---|---|---|---|" + "---|" * len(keys)]
    for name, e in results["releases"].items():
        for r in sorted(e["ours"]["results"], key=lambda r: (r["attack"], r["resolution_m"])):
            by = r.get("by_signature") or {}
            lines.append(f"| {name} | {r['attack']} | {r['resolution_m']:g} | {r['success_rate']:.3f} "
                         f"[{r['ci'][0]:.3f}, {r['ci'][1]:.3f}] | {r['risk']:.3f} | " + " | ".join(
                             f"{by[k]['success_rate']:.3f}, {by[k]['risk']:.3f}" if k in by else ""
                             for k in keys) + " |")
        for attack, why in e["ours"]["failures"].items():
            lines.append(f"| {name} | {attack} | | **not measured**: {why} | |" + " |" * len(keys))
    lines += ["", "### Run times (wall seconds)", "",
              ("| release | mechanism (its adapter, 2 workers) | TrjLink (one JVM, every signature run) | ours (A1 "
              "with 6 signatures, known_points, ap_attack; 4 resolutions) |"), "|---|---|---|---|"]
    for name, e in results["releases"].items():
        lines.append(f"| {name} | {e['protect_s']:.1f} | {e['trjlink']['process_s']:.1f} | "
                     f"{e['ours']['wall_s']:.1f} |")
    example = next(iter(results["releases"].values()))["trjlink"]["command"]
    lines += ["", f"TrjLink command (the first release's): `{example}`"]
    return "\n".join(lines) + "\n"


def write_report(results: dict) -> None:
    text = RESULTS_MD.read_text() if RESULTS_MD.exists() else (
        "# An outside attacker beside ours: TrjLink on the truthful releases\n\n" + BEGIN + "\n" + END + "\n")
    before, rest = text.split(BEGIN, 1)
    RESULTS_MD.write_text(before + BEGIN + "\n" + tables(results) + END + rest.split(END, 1)[1])


if __name__ == "__main__":
    main()
