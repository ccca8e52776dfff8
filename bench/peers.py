"""trajpub's syntactic models side by side with their reference code on identical input.

The reference is the survey's Java code (Jin et al., "A Survey and Experimental Study on Privacy-Preserving
Trajectory Data Publishing", TKDE 2023; github.com/uqwhua/TrjPrivacy), which holds GLOVE, KLT, Mixzone and Dummy.
It is cloned into the git-ignored ``bench/ref/TrjPrivacy`` and compiled with our driver ``bench/peers/Driver.java``
(which reads the input with the reference's own reader, times only the model's ``execute`` call, and writes its
output with the reference's own writer)::

    git clone <TrjPrivacy> bench/ref/TrjPrivacy && (cd bench/ref/TrjPrivacy && git checkout HEAD -- src libs)
    javac -nowarn -encoding UTF-8 -cp bench/ref/TrjPrivacy/libs/commons-math3-3.6.1.jar \\
        -d bench/ref/trjprivacy-classes $(find bench/ref/TrjPrivacy/src -name '*.java') bench/peers/Driver.java

Both sides read the same CSV file (``trj-id,user-id,timestamp,longitude,latitude``, the reference's format) written
into ``bench/out/peers/``; trajpub's time is its mechanism's in-memory call on the frame read from that file (the
projection to metres excluded), the reference's is its ``execute`` call (JVM start and file reading excluded).
Runs alternate (reference, trajpub) ``--runs`` times; the tables give medians of wall seconds and the CPU seconds of
the same runs (the machine is shared: CPU time is the steadier figure). After every run the properties of both
outputs are checked by the same functions: group sizes (distinct objects per published group) and the share of
original points covered by their group's published regions.

``python -m bench.peers [--only glove,mixzone] [--runs 3]`` writes ``bench/peers/<case>.json`` per case and the
table of ``bench/PEERS_RESULTS.md`` (between its markers) from all of them.
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bench.fgs_pufferfish import machine
from bench.table4 import central_beijing_network
from bench.tdrive import GRID, load_clean
from mechanisms import dummy, glove, klt, mixzone

ROOT = Path(__file__).resolve().parent
REF = ROOT / "ref"
CLASSES = REF / "trjprivacy-classes"
JAR = REF / "TrjPrivacy" / "libs" / "commons-math3-3.6.1.jar"
OUT = ROOT / "out" / "peers"
RESULTS = ROOT / "peers"
"""One JSON of raw timings and properties per case (``<case>.json``), so cases can be re-run one at a time."""
RESULTS_MD = ROOT / "PEERS_RESULTS.md"
BEGIN, END = "<!-- peers:begin -->", "<!-- peers:end -->"
K = 5
NETWORK = functools.cache(lambda: central_beijing_network(GRID))


@dataclass(frozen=True)
class Case:
    """One comparison: its input, the reference's model and arguments, trajpub's runs (``variant: (label, run)``,
    each compared with the same reference runs) and the property checks."""

    name: str
    n_taxis: int
    java_model: str
    java_args: dict
    trajpub: dict[str, tuple[str, Callable[[pd.DataFrame, int], object]]]
    check_java: Callable[[pd.DataFrame, Path], dict]
    check_trajpub: Callable[[pd.DataFrame, object], dict]
    timeout_s: float | None = None
    """A reference run still going after this long is stopped and counted as a lower bound."""
    max_points: int | None = None
    """Each trajectory cut to its first ``max_points`` points (for reference code that grows faster than
    linearly in a trajectory's length)."""


def tdrive_input(n_taxis: int, max_points: int | None = None) -> Path:
    """The first ``n_taxis`` taxis of the cleaned T-Drive sample, one trajectory per taxi-week (cut to its first
    ``max_points`` points if given), in the reference's CSV format (ids are integers, time in Unix seconds,
    degrees with 6 decimals)."""
    path = OUT / (f"tdrive_{n_taxis}.csv" if max_points is None else f"tdrive_{n_taxis}_first_{max_points}.csv")
    if path.exists():
        return path
    clean, _ = load_clean()
    taxis = clean["object_id"].drop_duplicates().iloc[:n_taxis]
    p = clean[clean["object_id"].isin(taxis)].sort_values(["object_id", "t"], kind="stable")
    if max_points is not None:
        p = p.groupby("object_id", sort=False).head(max_points)
    uid = pd.factorize(p["object_id"])[0]
    frame = pd.DataFrame({"trj-id": uid, "user-id": uid,
                          "timestamp": (p["t"] - pd.Timestamp(0, tz="UTC")).dt.total_seconds().astype(np.int64),
                          "longitude": p["lon"].round(6), "latitude": p["lat"].round(6)})
    OUT.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False, float_format="%.6f")
    return path


def read_input(path: Path) -> pd.DataFrame:
    """The input file as trajpub's point frame (``object_id, traj_id, t, lon, lat, x, y``)."""
    d = pd.read_csv(path)
    x, y = GRID.project(d["longitude"].to_numpy(), d["latitude"].to_numpy())
    return pd.DataFrame({"object_id": d["user-id"].astype(str), "traj_id": d["trj-id"].astype(np.int64),
                         "t": pd.to_datetime(d["timestamp"], unit="s", utc=True), "lon": d["longitude"],
                         "lat": d["latitude"], "x": x, "y": y})


def covered_share(points: pd.DataFrame, boxes: pd.DataFrame, members: pd.DataFrame) -> float:
    """Share of the original ``points`` (``traj_id, ts, lon, lat``) inside some published box of their group.

    ``boxes``: ``group, t0, t1, lon0, lon1, lat0, lat1`` (closed); ``members``: ``traj_id, group`` (a trajectory in
    no group covers nothing)."""
    joined = points.merge(members, on="traj_id", how="inner")
    covered = 0
    by_group = {g: b[["t0", "t1", "lon0", "lon1", "lat0", "lat1"]].to_numpy() for g, b in boxes.groupby("group")}
    for g, pts in joined.groupby("group"):
        b = by_group.get(g)
        if b is None:
            continue
        q = pts[["ts", "lon", "lat"]].to_numpy()
        for a in range(0, len(q), 2000):
            c = q[a:a + 2000, None, :]
            inside = ((c[..., 0] >= b[None, :, 0]) & (c[..., 0] <= b[None, :, 1])
                      & (c[..., 1] >= b[None, :, 2]) & (c[..., 1] <= b[None, :, 3])
                      & (c[..., 2] >= b[None, :, 4]) & (c[..., 2] <= b[None, :, 5]))
            covered += int(inside.any(axis=1).sum())
    return covered / len(points)


def original_points(raw: pd.DataFrame, dtype: type) -> pd.DataFrame:
    return pd.DataFrame({"traj_id": raw["trj-id"].to_numpy(), "ts": raw["timestamp"].to_numpy(),
                         "lon": raw["longitude"].to_numpy(dtype=dtype), "lat": raw["latitude"].to_numpy(dtype=dtype)})


def group_stats(sizes: list[int], covered: float, n_in: int, records: int) -> dict:
    sizes = np.asarray(sizes)
    return {"groups": len(sizes), "group_size_min": int(sizes.min()) if len(sizes) else 0,
            "groups_below_k": int((sizes < K).sum()), "trajectories_in": n_in,
            "trajectories_in_groups_below_k": int(sizes[sizes < K].sum()), "records_out": records,
            "points_covered_share": round(covered, 6)}


def read_java_generalised(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, list[int]]:
    """The reference's GLOVE/KLT output: each published trajectory's samples are boxes ``[lng, lng + deltaLng] x
    [lat, lat + deltaLat] x [t, t + deltaSecond]`` (float32, as the reference computes them); its group is the
    list of merged trajectory ids (none: a trajectory published alone)."""
    rows, members = [], {}
    with open(path) as f:
        next(f)
        for line in f:
            tok = line.rstrip("\n").split(",")
            tid = int(tok[1])
            rows.append((tid, int(tok[3]), tok[4], tok[5], int(tok[6]), tok[7], tok[8]))
            if tid not in members:
                members[tid] = [int(v) for v in tok[9:]] or [tid]
    d = pd.DataFrame(rows, columns=["group", "t", "lon", "lat", "dt", "dlon", "dlat"])
    lon, lat = d["lon"].to_numpy(np.float32), d["lat"].to_numpy(np.float32)
    boxes = pd.DataFrame({"group": d["group"], "t0": d["t"], "t1": d["t"] + d["dt"], "lon0": lon,
                          "lon1": lon + d["dlon"].to_numpy(np.float32), "lat0": lat,
                          "lat1": lat + d["dlat"].to_numpy(np.float32)})
    mem = pd.DataFrame([(m, g) for g, ms in members.items() for m in ms], columns=["traj_id", "group"])
    return boxes, mem, [len(ms) for ms in members.values()]


def check_java_generalised(raw: pd.DataFrame, output: Path) -> dict:
    boxes, members, sizes = read_java_generalised(output)
    covered = covered_share(original_points(raw, np.float32), boxes, members)
    return group_stats(sizes, covered, raw["trj-id"].nunique(), len(sizes))


def check_trajpub_generalised(raw: pd.DataFrame, result: tuple) -> dict:
    """trajpub's GLOVE/KLT release: boxes of one record per group (all records of a group are identical), its
    members the source trajectories of the group's records (private owner table)."""
    points, sources = result[0], result[1]
    first = points.drop_duplicates("set_id")["traj_id"]
    one = points[points["traj_id"].isin(first)]
    seconds = (lambda c: (one[c] - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy())
    boxes = pd.DataFrame({"group": one["set_id"].to_numpy(), "t0": seconds("t"), "t1": seconds("t_end"),
                          "lon0": one["lon_min"].to_numpy(), "lon1": one["lon_max"].to_numpy(),
                          "lat0": one["lat_min"].to_numpy(), "lat1": one["lat_max"].to_numpy()})
    set_of = points.drop_duplicates("traj_id").set_index("traj_id")["set_id"]
    members = pd.DataFrame({"traj_id": sources["source_traj_id"].to_numpy(),
                            "group": set_of.loc[sources["traj_id"]].to_numpy()})
    sizes = points.drop_duplicates("traj_id").groupby("set_id")["object_id"].nunique().tolist()
    covered = covered_share(original_points(raw, np.float64), boxes, members)
    return group_stats(sizes, covered, raw["trj-id"].nunique(), points["traj_id"].nunique())


def network_files() -> Path:
    """The synthetic central-Beijing street grid (:func:`bench.table4.central_beijing_network`, 40,000 nodes) in
    the reference's road-network format (``vertices.txt``: ``vid lat lng``; ``edges.txt``: ``eid u v``; tabs);
    returns the vertices file (the reference derives the edges file's name from it)."""
    vertices = OUT / "network" / "vertices.txt"
    if vertices.exists():
        return vertices
    net = central_beijing_network(GRID)
    lon, lat = GRID.unproject(net.node_xy[:, 0], net.node_xy[:, 1])
    vertices.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"vid": np.arange(net.n_nodes), "lat": np.round(lat, 7), "lng": np.round(lon, 7)}).to_csv(
        vertices, sep="\t", header=False, index=False, float_format="%.7f")
    pd.DataFrame({"eid": np.arange(len(net.source_index)), "u": net.source_index, "v": net.target_index}).to_csv(
        vertices.with_name("edges.txt"), sep="\t", header=False, index=False)
    return vertices


def fragments_stats(raw: pd.DataFrame, fragment: np.ndarray, ts: np.ndarray, lon: np.ndarray,
                    lat: np.ndarray) -> dict:
    """Mixzone's properties: fragments published, the share of input points published, and whether every
    published point is an input point (truthful: same time and coordinates, compared in the output's own
    precision, float32 for the reference) and how many are published twice."""
    dtype = lon.dtype
    key = pd.MultiIndex.from_arrays([raw["timestamp"].to_numpy(), raw["longitude"].to_numpy(dtype),
                                     raw["latitude"].to_numpy(dtype)])
    out = pd.MultiIndex.from_arrays([ts, lon, lat])
    sizes = np.bincount(pd.factorize(fragment)[0]) if len(fragment) else np.zeros(0, int)
    return {"trajectories_in": int(raw["trj-id"].nunique()), "fragments_out": len(sizes),
            "fragment_points_min": int(sizes.min()) if len(sizes) else 0,
            "points_out_share": round(len(ts) / len(raw), 6), "points_truthful": bool(out.isin(key).all()),
            "points_published_twice": int(out.duplicated().sum())}


def check_java_fragments(raw: pd.DataFrame, output: Path) -> dict:
    d = pd.read_csv(output)
    frag = d["user-id"].astype(str) + "/" + d["trj-id"].astype(str) + "/" + d["pseudonym-id"].astype(str)
    return fragments_stats(raw, frag.to_numpy(), d["time-second"].to_numpy(), d["longitude"].to_numpy(np.float32),
                           d["latitude"].to_numpy(np.float32))


def check_trajpub_fragments(raw: pd.DataFrame, result: tuple) -> dict:
    points = result[0]
    ts = (points["t"] - pd.Timestamp(0, tz="UTC")).dt.total_seconds().astype(np.int64).to_numpy()
    return fragments_stats(raw, points["traj_id"].to_numpy(), ts, points["lon"].to_numpy(), points["lat"].to_numpy())


def run_mixzone(frame: pd.DataFrame, seed: int) -> object:
    """UTMP placement on the network, then the cut (r = 500 m, K = 1,000; trajpub's defaults otherwise)."""
    params = mixzone.MixzoneParams(radius_m=500.0, n_zones=1000)
    placement = mixzone.place_mix_zones(NETWORK(), params.n_zones)
    return mixzone.anonymize(frame.assign(seq=frame.groupby("traj_id").cumcount()), placement.zone_xy, params,
                             np.random.default_rng(seed))


JAVA_CATEGORY = ("1000", "2000", "7200", "4000", "5000", "7000", "7180", "7300", "7600", "7700", "7800", "9800",
                 "8000", "A100", "A700", "A980", "A982")
"""A code of each of the reference's seventeen ``Category`` entries, one per synthetic category: its KL divergence
counts a category missing from a region as infinite, so a region can be t-close only if it holds all of them."""


POI_BBOX = (116.17, 39.74, 116.64, 40.10)
"""Central Beijing (the synthetic street grid's 40 km x 40 km): most of the taxis' fixes are here."""


@functools.cache
def synthetic_pois() -> pd.DataFrame:
    """50,000 uniform synthetic POIs of 17 categories over central Beijing (as :mod:`bench.table4`'s KLT row, but
    over the city centre: spread over the whole release bbox they are so sparse that the reference's region growth
    runs for minutes on 10 taxis). There is no offline POI data for Beijing. Both sides take the city-wide
    distribution over the POIs' extent."""
    return klt.synthetic_pois(POI_BBOX, 50_000, len(JAVA_CATEGORY), np.random.default_rng(5))


def poi_file() -> Path:
    """The synthetic POIs in the reference's format (``name, category code, address, telephone, lng, lat``)."""
    path = OUT / "pois.csv"
    if not path.exists():
        p = synthetic_pois()
        code = np.asarray(JAVA_CATEGORY)[p["category"].str.rsplit("_", n=1).str[1].astype(int).to_numpy()]
        pd.DataFrame({"name": "poi", "code": code, "address": "-", "tel": "-", "lng": p["lon"].round(6),
                      "lat": p["lat"].round(6)}).to_csv(path, header=False, index=False, float_format="%.6f")
    return path


def run_klt(candidates: int | None) -> Callable[[pd.DataFrame, int], object]:
    def run(frame: pd.DataFrame, seed: int) -> object:
        params = klt.KltParams(k=K, l=3, t=0.1, candidates=candidates)
        return klt.anonymize(frame, synthetic_pois(), params, np.random.default_rng(seed))
    return run


def run_glove(candidates: int | None) -> Callable[[pd.DataFrame, int], object]:
    def run(frame: pd.DataFrame, seed: int) -> object:
        return glove.anonymize(frame, glove.GloveParams(k=K, candidates=candidates), np.random.default_rng(seed))
    return run


@functools.cache
def dummy_candidates() -> dummy.Candidates:
    """trajpub's public candidates on the synthetic street grid (its vertices and points every 20 m along its
    edges, as the Dummy adapter builds them from a road network): both sides draw dummy locations from them."""
    return dummy.road_candidates(NETWORK(), GRID.unproject, 0.001, dummy.DummyParams().candidate_spacing_m)


def dummy_poi_file() -> Path:
    """:func:`dummy_candidates` as the reference's POI file (one category: its Dummy ignores categories)."""
    path = OUT / "dummy_pois.csv"
    if not path.exists():
        c = dummy_candidates()
        pd.DataFrame({"name": "poi", "code": JAVA_CATEGORY[0], "address": "-", "tel": "-",
                      "lng": np.round(c.lon, 6), "lat": np.round(c.lat, 6)}).to_csv(
            path, header=False, index=False, float_format="%.6f")
    return path


def run_dummy(frame: pd.DataFrame, seed: int) -> object:
    """k = 5, l = 3, exposure ratio 0.2 (the reference's), one generator per trajectory."""
    keys = dummy.trajectory_keys(frame)
    rng = np.random.default_rng(seed)
    return dummy.generate_batch(frame, dummy_candidates(), dummy.DummyParams(k=K, l=3), rng.spawn(len(keys)),
                                rng.permutation(len(keys)))


def dummy_stats(raw: pd.DataFrame, rows: pd.DataFrame, candidates: pd.MultiIndex, dtype: type) -> dict:
    """Dummy's properties from the published rows (``set, source, member, ts, lon, lat``; ``source`` the input
    trajectory of the set, coordinates in the output's precision ``dtype``): sets and members per set, the sets
    whose members are published at the same timestamps, the sets
    holding their real trajectory (a member whose every point is a point of the source trajectory at that
    time), the share of input points published in it, the timestamps all members share (exposed), the share of
    the other timestamps with >= l = 3 distinct locations, and the share of the other members' points (those
    not at a real location) that are public candidates."""
    key = pd.MultiIndex.from_arrays([raw["trj-id"].to_numpy(), raw["timestamp"].to_numpy(),
                                     raw["longitude"].to_numpy(dtype), raw["latitude"].to_numpy(dtype)])
    real_point = pd.MultiIndex.from_arrays([rows["source"], rows["ts"], rows["lon"], rows["lat"]]).isin(key)
    rows = rows.assign(real_point=real_point)
    by_member = rows.groupby(["set", "member"])["real_point"].all()
    real_member = by_member[by_member].reset_index().drop_duplicates("set")[["set", "member"]]
    real = rows.merge(real_member, on=["set", "member"])
    others = rows.merge(real_member, on=["set", "member"], how="left", indicator=True)
    others = others[(others["_merge"] == "left_only") & ~others["real_point"]]
    places = rows.drop_duplicates(["set", "ts", "lon", "lat"]).groupby(["set", "ts"]).size()
    members = rows.groupby("set")["member"].nunique()
    timestamps = rows.groupby(["set", "member"])["ts"].agg(tuple).groupby(level=0).nunique()
    on_candidates = pd.MultiIndex.from_arrays([others["lon"], others["lat"]]).isin(candidates)
    return {"trajectories_in": int(raw["trj-id"].nunique()), "sets_out": len(members),
            "members_per_set_min": int(members.min()) if len(members) else 0,
            "members_per_set_max": int(members.max()) if len(members) else 0,
            "sets_whose_members_share_their_timestamps": int((timestamps == 1).sum()),
            "sets_holding_their_real_trajectory": len(real_member),
            "input_points_published_share": round(len(real) / len(raw), 6),
            "timestamps_all_members_share": round(float((places == 1).mean()), 6) if len(places) else 0.0,
            "other_timestamps_with_3_locations_share": round(float((places[places > 1] >= 3).mean()), 6)
            if (places > 1).any() else 0.0,
            "dummy_points_on_candidates_share": round(float(on_candidates.mean()), 6) if len(others) else 0.0}


def check_java_dummy(raw: pd.DataFrame, output: Path) -> dict:
    """The reference's Dummy output: each set keeps the real trajectory's id (``trj-id``), its members differ by
    ``pseudonym-id``; coordinates are float32. Its candidates are the POI file's, read as float32."""
    d = pd.read_csv(output)
    c = pd.read_csv(dummy_poi_file(), header=None)
    candidates = pd.MultiIndex.from_arrays([c[4].to_numpy(np.float32), c[5].to_numpy(np.float32)])
    rows = pd.DataFrame({"set": d["trj-id"], "source": d["trj-id"], "member": d["pseudonym-id"],
                         "ts": d["time-second"], "lon": d["longitude"].to_numpy(np.float32),
                         "lat": d["latitude"].to_numpy(np.float32)})
    return dummy_stats(raw, rows, candidates, np.float32)


def check_trajpub_dummy(raw: pd.DataFrame, result: dummy.DummyRelease) -> dict:
    pub = result.published
    source = result.owners.set_index("set_id")["source_traj_id"]
    c = dummy_candidates()
    rows = pd.DataFrame({"set": pub["set_id"], "source": source.loc[pub["set_id"]].to_numpy(),
                         "member": pub["member"],
                         "ts": (pub["t"] - pd.Timestamp(0, tz="UTC")).dt.total_seconds().astype(np.int64),
                         "lon": pub["lon"], "lat": pub["lat"]})
    return dummy_stats(raw, rows, pd.MultiIndex.from_arrays([c.lon, c.lat]), np.float64)


KLT_JAVA = {"k": K, "l": 3, "t": 0.1, "pois": poi_file}
KLT_VARIANTS = {"klt_exhaustive": ("KLT k=5 l=3 t=0.1, exhaustive greedy k phase (the reference's)", run_klt(None)),
                "klt": ("KLT k=5 l=3 t=0.1, default locality pruning", run_klt(12))}

CASES = {
    "glove": Case("glove", 100, "glove", {"k": K},
                  {"glove_exhaustive": ("GLOVE k=5, exhaustive greedy (the reference's algorithm)", run_glove(None)),
                   "glove": ("GLOVE k=5, default locality pruning (12 candidates)", run_glove(12))},
                  check_java_generalised, check_trajpub_generalised),
    # whole taxi-weeks: the reference does not finish (a lower bound); cut to 200 points each, it does
    "klt": Case("klt", 10, "klt", KLT_JAVA, KLT_VARIANTS, check_java_generalised, check_trajpub_generalised,
                timeout_s=300.0),
    "klt_short": Case("klt_short", 10, "klt", KLT_JAVA, KLT_VARIANTS, check_java_generalised,
                      check_trajpub_generalised, timeout_s=300.0, max_points=200),
    "mixzone": Case("mixzone", 300, "mixzone", {"radius": 0.5, "n_zones": 1000, "network": network_files},
                    {"mixzone": ("Mixzone r=500 m, 1,000 zones, same synthetic 40,000-node network", run_mixzone)},
                    check_java_fragments, check_trajpub_fragments),
    "dummy": Case("dummy", 100, "dummy", {"k": K, "l": 3, "ratio": 0.2, "pois": dummy_poi_file},
                  {"dummy": ("Dummy k=5 l=3 exposure 0.2, same candidates (grid vertices + every 20 m)", run_dummy)},
                  check_java_dummy, check_trajpub_dummy, max_points=300),
}


def java_command(case: Case, path: Path, output: Path) -> list[str]:
    a = {"k": K, "l": 3, "t": 0.1, "ratio": 0.2, "radius": 0.2, "n_zones": 1000, "min_length": 10,
         "network": "-", "pois": "-", **case.java_args}
    a = {name: value() if callable(value) else value for name, value in a.items()}  # files written on first use
    return ["java", "-Xmx8g", "-cp", f"{CLASSES}:{JAR}", "Driver", case.java_model, str(path), str(output),
            *(str(a[n]) for n in ("k", "l", "t", "ratio", "radius", "n_zones", "min_length", "network", "pois"))]


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_java(case: Case, path: Path, rep: int) -> tuple[dict, Path]:
    output = OUT / f"{case.name}_java_{rep}.csv"
    output.unlink(missing_ok=True)
    cmd = java_command(case, path, output)
    cpu0, t0 = cpu_children(), time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=case.timeout_s)
    except subprocess.TimeoutExpired:
        return {"wall_s": None, "cpu_s": None, "did_not_finish_within_s": case.timeout_s}, None
    wall_process = time.perf_counter() - t0
    said = dict(x.split() for x in proc.stdout.splitlines() if x.startswith("PEERS_"))
    return {"wall_s": float(said["PEERS_SECONDS"]), "cpu_s": float(said["PEERS_CPU_SECONDS"]),
            "process_wall_s": wall_process, "process_cpu_s": cpu_children() - cpu0}, output


def run_trajpub(run: Callable[[pd.DataFrame, int], object], frame: pd.DataFrame, seed: int
                ) -> tuple[dict, object]:
    cpu0, t0 = time.process_time(), time.perf_counter()
    result = run(frame, seed)
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - cpu0}, result


def medians(runs: list[dict]) -> dict:
    return {"wall_s": float(np.median([r["wall_s"] for r in runs])),
            "cpu_s": float(np.median([r["cpu_s"] for r in runs]))}


def compare(case: Case, runs: int) -> dict:
    """Alternating runs: the reference, then each trajpub variant, ``runs`` times."""
    path = tdrive_input(case.n_taxis, case.max_points)
    raw = pd.read_csv(path)
    frame = read_input(path)
    for _, run in case.trajpub.values():  # warm-up: numba's compiled code is loaded, not timed
        run(frame.groupby("traj_id").head(20), 0)
    out = {"input": {"file": str(path.relative_to(ROOT.parent)), "taxis": case.n_taxis,
                     "first_points": case.max_points,
                     "trajectories": int(raw["trj-id"].nunique()), "points": len(raw)},
           "java_command": " ".join(java_command(case, path, OUT / f"{case.name}_java_N.csv")),
           "reference": [], "variants": {v: {"label": label, "runs": []} for v, (label, _) in case.trajpub.items()}}
    for rep in range(runs):
        timing, output = run_java(case, path, rep)
        out["reference"].append({**timing, "properties": case.check_java(raw, output) if output else None})
        print(case.name, rep, "reference", timing, flush=True)
        for v, (_, run) in case.trajpub.items():
            timing, result = run_trajpub(run, frame, rep)
            out["variants"][v]["runs"].append({**timing, "properties": case.check_trajpub(raw, result)})
            print(case.name, rep, v, timing, flush=True)
    finished = [r for r in out["reference"] if r["wall_s"] is not None]
    if len(finished) == len(out["reference"]):
        out["reference_median"] = medians(finished)
    else:  # a lower bound: the reference did not finish within the timeout (its CPU time is then unknown)
        out["reference_median"] = {"wall_s": case.timeout_s, "cpu_s": None, "lower_bound": True}
    for v in out["variants"].values():
        v["median"] = medians(v["runs"])
        v["ratio_wall"] = out["reference_median"]["wall_s"] / v["median"]["wall_s"]
        v["ratio_cpu"] = (out["reference_median"]["cpu_s"] / v["median"]["cpu_s"]
                          if out["reference_median"]["cpu_s"] else None)
    return out


def uptime() -> str:
    """The 1, 5 and 15 minute load averages (the machine is shared)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def properties(p: dict) -> str:
    return "; ".join(f"{k.replace('_', ' ')} {v}" for k, v in p.items())


def table(cases: dict) -> str:
    lines = [("| model | input | reference wall s / CPU s (median) | trajpub wall s / CPU s (median) "
              "| ratio wall / CPU | reference output (last run) | trajpub output (last run) |"),
             "|---|---|---|---|---|---|---|"]
    for r in cases.values():
        i, m = r["input"], r["reference_median"]
        ref_props = next((x["properties"] for x in reversed(r["reference"]) if x["properties"]), None)
        if m.get("lower_bound"):
            ref, ref_out = f"> {m['wall_s']:.0f} (stopped) / ?", "none: stopped before it finished"
        else:
            ref, ref_out = f"{m['wall_s']:.2f} / {m['cpu_s']:.2f}", properties(ref_props)
        for v in r["variants"].values():
            t = v["median"]
            bound = ">" if m.get("lower_bound") else ""
            cpu = f"**{v['ratio_cpu']:.1f}x**" if v["ratio_cpu"] else "?"
            cut = f" (first {i['first_points']} points each)" if i.get("first_points") else ""
            lines.append(
                f"| {v['label']} | {i['taxis']} taxis, {i['trajectories']} trajectories{cut}, {i['points']:,} points "
                f"| {ref} | {t['wall_s']:.2f} / {t['cpu_s']:.2f} | **{bound}{v['ratio_wall']:.1f}x** / {cpu} "
                f"| {ref_out} | {properties(v['runs'][-1]['properties'])} |")
    return "\n".join(lines)


def write_md() -> None:
    cases = {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))}
    text = RESULTS_MD.read_text() if RESULTS_MD.exists() else f"{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    runs = "\n".join(
        f"- {name}: {c['machine']['cpu']}, nproc {c['machine']['nproc']}, {c['machine']['ram_gb']} GB; "
        f"{c['machine']['date'][:16]} UTC; load average before / after {c['load_before']} / {c['load_after']}; "
        f"`python -m bench.peers {c['argv']}`; reference commit {c['reference_commit'][:7]}; reference command "
        f"per run: `{c['java_command'].replace(str(ROOT.parent) + '/', '')}`" for name, c in cases.items())
    body = f"\n{table(cases)}\n\nRuns:\n\n{runs}\n"
    RESULTS_MD.write_text(head + BEGIN + body + END + tail)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(CASES), help="comma-separated cases: " + ", ".join(CASES))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    commit = subprocess.run(["git", "-C", str(REF / "TrjPrivacy"), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    RESULTS.mkdir(parents=True, exist_ok=True)
    for name in args.only.split(","):
        load_before = uptime()
        result = compare(CASES[name], args.runs)
        result.update(machine=machine(), load_before=load_before, load_after=uptime(), reference_commit=commit,
                      argv=" ".join(argv if argv is not None else sys.argv[1:]))
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1))
        write_md()


if __name__ == "__main__":
    main()
