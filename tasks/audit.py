"""Audit + gate: attack the candidate release with the raw data as background knowledge, measure utility,
and decide whether the gate blocks it (the dataset's registered policy, :mod:`tasks.policies`).

The policy names the attacks; those that apply to the release's kind (truthful, synthetic, aggregate; see
:mod:`audits.registry`) run in parallel as Dask tasks on the cluster that holds the data. The gate fails closed:
an attack that raises or outlives the policy's ``timeout_s`` blocks the release with that reason.
"""

from __future__ import annotations

import itertools
import json
import operator
import time
import uuid
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sqlalchemy as sa
from distributed import Client, Future, get_worker
from distributed import wait as wait_futures

from audits.attack import NotApplicable
from audits.controls import MEMBER_COLUMN, SATURATED, UNMEASURED, ControlPolicy, TooFewObjects, hold_out
from audits.gate import GateDecision, GatePolicy, evaluate_gate, verdict, worst_per_attack
from audits.patterns import frequent_patterns
from audits.point_utility import information_loss, moved_share, point_error, retained_share
from audits.registry import GRID_ATTACKS, build_attack
from audits.result import AttackResult
from audits.trajectory_utility import circle_query_re, city_grid_size, outside_bbox_share
from audits.utility import (
    count_query_re,
    density_jsd,
    diameter_error,
    length_jsd,
    random_count_queries,
    trip_error,
)
from trajpub.candidate import CandidateRelease, Shape
from trajpub.errors import InputError
from trajpub.grid import GridSpec
from trajpub.segment import cell_sequences

RAW_COLUMNS = ["object_id", "traj_id", "seq", "t", "lon", "lat", "x", "y", "cell"]
N_QUERIES = 1000
POINT_ERROR_RECORDS = 200


@dataclass(frozen=True)
class AuditOutcome:
    """``results``: each attack's worst result over the resolutions it ran at (what the gate decides on);
    ``by_resolution``: every (resolution in metres, result), 0 for an attack that reads no grid of the policy's;
    ``failures`` and ``not_applicable``: attack -> what went wrong, or why it cannot measure this release."""

    results: list[AttackResult]
    failures: dict[str, str]
    not_applicable: dict[str, str]
    decision: GateDecision
    policy: GatePolicy
    utility: dict
    by_resolution: list[tuple[float, AttackResult]]


REVIEW_SAMPLE_POINTS = 2_000_000
"""The review's plots read the whole raw frame up to this many points, every k-th trajectory beyond it."""


def raw_on_cluster(client: Client, prepared: list[Future], controls: np.ndarray | None = None) -> Future:
    """The auditor's background knowledge, every prepared raw point, built on a worker: it stays out of any
    published table and off the flow process (16 M points are several GiB; bench/SCALE_RESULTS.md). With
    ``controls`` (the objects held out of a synthetic release's input), the ``member`` column says which objects
    the mechanism read (:mod:`audits.controls`)."""
    return client.submit(_raw_frame, prepared, controls, pure=False)


def _raw_frame(parts: list[pd.DataFrame], controls: np.ndarray | None) -> pd.DataFrame:
    raw = pd.concat([df[RAW_COLUMNS] for df in parts], ignore_index=True)
    return raw if controls is None else raw.assign(**{MEMBER_COLUMN: ~raw["object_id"].isin(controls)})


def hold_out_controls(client: Client, prepared: list[Future], share: float, rng: np.random.Generator) -> np.ndarray:
    """The control objects of a synthetic release: ``share`` of the prepared objects, drawn by object
    (:func:`audits.controls.hold_out`; ``rng`` is fresh entropy outside test mode). Only object ids reach the
    driver."""
    objects = np.unique(np.concatenate(client.gather(client.map(
        lambda df: df["object_id"].unique(), prepared, pure=False))))
    return hold_out(objects, share, rng)


def without(client: Client, prepared: list[Future], controls: np.ndarray) -> list[Future]:
    """The prepared partitions without the control objects' rows: the mechanism's input, which never holds them."""
    return client.map(lambda df, held: df[~df["object_id"].isin(held)], prepared, held=controls, pure=False)


def review_sample(client: Client, raw: Future, cap: int = REVIEW_SAMPLE_POINTS) -> tuple[pd.DataFrame, int]:
    """What the review's plots read of the raw frame, and k: every raw trajectory (k = 1) up to ``cap`` points,
    else every k-th trajectory in order of appearance, k the smallest that keeps about ``cap`` points. The plots
    draw densities and distributions, which a systematic sample of whole trajectories keeps up to sampling
    error; the page says when it is one."""
    return client.submit(_every_kth_trajectory, raw, cap, pure=False).result()


def _every_kth_trajectory(raw: pd.DataFrame, cap: int) -> tuple[pd.DataFrame, int]:
    k = -(-len(raw) // cap)
    if k <= 1:
        return raw, 1
    codes, _ = pd.factorize(raw["traj_id"])
    return raw[codes % k == 0], k


def attack_frames(raw: pd.DataFrame, candidate: CandidateRelease) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(background knowledge, release) as the attacks read them. For an aggregate release the unit is the
    mechanism's client, one trajectory: the raw frame's ``object_id`` becomes object/trajectory and ``member``
    says whether that client answered (``candidate.owners``; the others are the held-out control), and the
    release is the fragment table with ``count``; for anonymity sets the real members carry their
    ``object_id``."""
    if candidate.shape is Shape.FRAGMENTS:  # clients are trajectories: the game is played per trajectory
        members = set(candidate.owners["source_traj_id"]) if candidate.owners is not None else set()
        raw = raw.assign(object_id=raw["object_id"].astype(str) + "/" + raw["traj_id"].astype(str),
                         member=raw["traj_id"].isin(members))
        release = pd.DataFrame({"fragment": candidate.fragments["cells"].map(tuple),
                                "count": candidate.fragments["estimated_count"]})
        return raw, release
    release = candidate.points
    if candidate.shape is Shape.ANONYMITY_SETS and "object_id" not in release:
        # anonymity sets: the attacks get the real members with their owners, i.e. an adversary who has already
        # singled out the real trajectory of each set (an upper bound on the risk; the dummies' protection is
        # what the sets add on top, and the review says so)
        owners = candidate.owners.set_index("traj_id")
        release = release[release["traj_id"].isin(owners.index)]
        # each real member under its owner and its raw trajectory's id, so that the point error pairs them
        release = release.assign(object_id=release["traj_id"].map(owners["object_id"]),
                                 traj_id=release["traj_id"].map(owners["source_traj_id"]))
    return raw, release


def _attack(name: str, params: dict, raw: pd.DataFrame, release: pd.DataFrame, grid: GridSpec | None,
            topic: str, controls: ControlPolicy, max_risk: float | None,
            upper_bound: bool) -> tuple[AttackResult | NotApplicable, float]:
    """On a worker: one attack of the policy (on ``grid``'s cells when given: :func:`at_resolution`), or its word
    that it cannot measure this release (an outcome, not an error: returned, so that the worker logs no failed
    task), and its running time in seconds. A comparison of members against controls too uncertain for the
    policy's ``controls`` (:meth:`audits.controls.ControlPolicy.unmeasurable`, given the attack's ``max_risk``; on
    ``grid``'s cells, one of a grid attack's resolutions, also an interval wider than ``max_risk`` when the policy
    decides on the ``upper_bound``, which :func:`run_at_resolutions` then sets aside if another resolution
    measured) is
    such a word: "too few objects to measure", or "saturated" when nearly every control links too
    (:class:`audits.controls.TooFewObjects`).
    It first tells the driver that it has started (its timeout counts from there, not from when it was queued)."""
    if grid is not None:
        raw, release = at_resolution(raw, grid), at_resolution(release, grid)
    get_worker().log_event(topic, {"attack": name})
    began = time.perf_counter()
    try:
        result = build_attack(name, params).evaluate(raw, release)
        why = None if result.controls is None else controls.unmeasurable(result.controls, max_risk,
                                                                          upper_bound and grid is not None)
        if why is not None:
            result = TooFewObjects(why)
    except NotApplicable as why:
        result = why
    return result, time.perf_counter() - began


def on_cluster(client: Client, *frames: pd.DataFrame | Future) -> list[Future]:
    """The frames scattered to the cluster once (futures are passed through), so that every attack and every
    resolution reads the same copy instead of one sent per call. Sent straight to the workers: through the
    scheduler, a 40x T-Drive raw frame held 1.35 GiB of the scheduler's memory (bench/SCALE_RESULTS.md)."""
    if all(isinstance(f, Future) for f in frames):
        return list(frames)
    return client.scatter(list(frames), hash=False, direct=True)


POLL_S = 0.25  # how often the driver looks for attacks that started or outlived their time


def run_attacks(client: Client, policy: GatePolicy, raw: pd.DataFrame | Future, release: pd.DataFrame | Future,
                release_kind: str, names: list[str] | None = None, grid: GridSpec | None = None
                ) -> tuple[list[AttackResult], dict[str, str], dict[str, str]]:
    """Every attack of the policy that applies to ``release_kind``, in parallel on the cluster; returns the
    results, the failures (attack -> what went wrong), which the gate turns into blocks, and the attacks that
    said they cannot measure this release (attack -> why: :class:`audits.attack.NotApplicable`), which the
    policy's ``when_not_applicable`` rules on.

    ``policy.timeout_s`` bounds each attack's own running time: an attack that finishes later than that on its
    worker's clock fails, and one still running ``timeout_s`` after it reported its start to the driver (seen
    within :data:`POLL_S`) is cancelled and fails. Attacks queued behind others on a busy cluster are not charged
    for the wait. An attack that has not even started once the attacks could have run one after
    another within their timeouts (``timeout_s`` x the number of attacks) is reported as not started. ``names``
    narrows the policy's attacks; ``grid`` puts both frames on its cells first (on the workers). ``raw`` and
    ``release`` are frames, or futures of frames already on the cluster (:func:`on_cluster`)."""
    names = policy.attacks_for(release_kind) if names is None else names
    if not names:
        return [], {}, {}
    topic = f"trajpub-attack-start-{uuid.uuid4().hex}"
    raw_f, release_f = on_cluster(client, raw, release)
    futures = {name: client.submit(_attack, name, dict(policy.attack_params.get(name, {})), raw_f, release_f,
                                   grid, topic, policy.controls, policy.max_risk.get(name),
                                   policy.decide_on == "upper_bound", pure=False,
                                   key=f"attack-{name}-{topic}")
               for name in names}
    launched = time.monotonic()
    started: dict[str, float] = {}
    results, failures, not_applicable = [], {}, {}
    pending = dict(futures)
    while pending:
        try:
            wait_futures(list(pending.values()), timeout=POLL_S, return_when="FIRST_COMPLETED")
        except TimeoutError:
            pass
        now = time.monotonic()
        for _, event in client.get_events(topic):
            started.setdefault(event["attack"], now)
        for name, future in list(pending.items()):
            if future.status == "finished":
                result, elapsed = future.result()
                if elapsed > policy.timeout_s:
                    failures[name] = f"timed out after {policy.timeout_s:g} s (ran {elapsed:.3g} s)"
                elif isinstance(result, NotApplicable):
                    not_applicable[name] = str(result)
                else:
                    results.append(result)
            elif future.status == "error":
                exc = future.exception()
                failures[name] = f"{type(exc).__name__}: {exc}"
            elif name in started and now - started[name] > policy.timeout_s:
                failures[name] = f"timed out after {policy.timeout_s:g} s"
            elif name not in started and now - launched > policy.timeout_s * len(names):
                failures[name] = (f"did not start within {policy.timeout_s * len(names):g} s "
                                  f"({len(names)} attacks x timeout_s)")
            else:
                continue
            if name in failures:
                future.cancel()
            del pending[name]
    return results, failures, not_applicable


def paired_with_sources(candidate: CandidateRelease, release: pd.DataFrame) -> pd.DataFrame:
    """The release with each renumbered truthful record under its raw trajectory's ``traj_id`` (through
    ``candidate.owners``), so that the point error compares a record with its own source; records the owner table
    does not name are left out. Anonymity sets are already paired by :func:`attack_frames`."""
    if candidate.owners is None or "object_id" not in candidate.points:
        return release
    source = candidate.owners.set_index("traj_id")["source_traj_id"]
    named = release[release["traj_id"].isin(source.index)]
    return named.assign(traj_id=named["traj_id"].map(source))


def measure_utility(raw: pd.DataFrame, candidate: CandidateRelease, release: pd.DataFrame, seed: int | None,
                    bbox: tuple[float, float, float, float]) -> dict:
    """The review's utility figures (Jin et al., TKDE 2023, Sec. 4.2; lower is better unless said otherwise).

    Trajectory releases: count-query relative error (Chen et al. Def. 3.7, sanity bound 0.1% of |D|; query
    locations drawn from the cells the raw data visits), the range-count error of 200 random circles (sanity
    bound 1% of |D|), density, trip and length distribution divergences (JSD,
    natural log, max ln 2), diameter error, FFP error and pattern F1 (of the top-100 frequent patterns; F1 higher
    is better; on 6 x 6 cells, and at city resolution, ~1.5 km cells: :func:`audits.trajectory_utility.city_grid_size`), INF, the share of released points outside the spec's public ``bbox``; for truthful releases also
    the Hausdorff point error of up to 200 records, the share of released points more than 1 km from their own
    raw trajectory and the released points of real records per raw point (retained share, higher is better; these
    three need records paired with their sources and are left out when none is). Fragment releases: the number
    of fragments and the median relative error of the released counts against the exact counts of the same
    fragments.
    """
    rng = np.random.default_rng(seed)
    if candidate.shape is Shape.FRAGMENTS:
        return fragment_utility(raw, candidate.fragments)
    release_kind = candidate.shape.audit_kind
    _, raw_off, raw_cells = cell_sequences(raw)
    raw_seqs = [seq[seq >= 0] for seq in (raw_cells[a:b] for a, b in itertools.pairwise(raw_off))]  # -1: off grid
    _, rel_off, rel_cells = cell_sequences(release)
    rel_seqs = [seq[seq >= 0] for seq in (rel_cells[a:b] for a, b in itertools.pairwise(rel_off))]
    visited = np.unique(raw_cells[raw_cells >= 0])
    queries = [visited[q] for q in random_count_queries(len(visited), N_QUERIES, min(6, len(visited)), rng)]
    patterns = frequent_patterns(raw, release)
    figures = {
        "count_query_re": count_query_re(raw_seqs, rel_seqs, queries, sanity=0.001),
        "circle_query_re": circle_query_re(raw, release, rng),
        "density_jsd": density_jsd(raw, release, "cell"),
        "trip_error": trip_error(raw, release, grid_size=6),
        "length_jsd_points": length_jsd(raw, release, "points"),
        "diameter_error": diameter_error(raw, release),
        "ffp_error": 1.0 - patterns["ffp"],
        "pattern_f1": patterns["ffp"],
        "pattern_f1_city": frequent_patterns(raw, release, city_grid_size(raw), 2, 5, 100)["ffp"],
        "outside_bbox_share": outside_bbox_share(release, bbox),
        "information_loss": information_loss(raw, release, tolerance_m=100.0, tolerance_s=None,
                                                     match="owner" if release_kind == "truthful" else "any"),
        "raw_trajectories": len(raw_seqs),
        "released_trajectories": len(rel_seqs),
    }
    if release_kind == "truthful":
        paired = paired_with_sources(candidate, release)
        try:
            figures["point_error_m"] = point_error(raw, paired, "hausdorff", POINT_ERROR_RECORDS, rng)
            figures["moved_share"] = moved_share(raw, paired)
            figures["retained_share"] = retained_share(raw, paired)
        except InputError:  # records renumbered or dummies only: no record pairs with its raw trajectory
            pass
    return figures


def fragment_utility(raw: pd.DataFrame, fragments: pd.DataFrame) -> dict:
    """Median relative error of the released fragment counts against the exact number of raw trajectories that
    contain each fragment as a contiguous run of cells (the auditor's exact answer)."""
    _, off, cells = cell_sequences(raw)
    text = [f",{','.join(map(str, cells[a:b]))}," for a, b in itertools.pairwise(off)]
    exact = np.array([sum(f",{','.join(map(str, frag))}," in t for t in text) for frag in fragments["cells"]],
                     dtype=float)
    released = fragments["estimated_count"].to_numpy(float)
    rel_err = np.abs(released - exact) / np.maximum(exact, 1.0)
    return {"fragments": len(fragments), "fragment_count_re_median": float(np.median(rel_err)) if len(rel_err)
            else float("nan"), "raw_trajectories": len(text)}


def at_resolution(frame: pd.DataFrame, grid: GridSpec) -> pd.DataFrame:
    """``frame`` with its ``cell`` on ``grid`` (from its lon/lat): the adversary's own grid, not the release's."""
    x, y = grid.project(frame["lon"].to_numpy(float), frame["lat"].to_numpy(float))
    return frame.assign(cell=grid.cell_of(x, y))


def run_at_resolutions(client: Client, policy: GatePolicy, raw: pd.DataFrame, release: pd.DataFrame,
                       release_kind: str, bbox: tuple[float, float, float, float]
                       ) -> tuple[list[tuple[float, AttackResult]], dict[str, str], dict[str, str]]:
    """The policy's attacks, those that read grid cells (:data:`audits.registry.GRID_ATTACKS`) once per
    ``policy.resolutions_m`` on a grid of that cell size over ``bbox`` (the adversary picks the
    resolution), the others once (resolution 0). An aggregate release is attacked on its own cells (its fragments
    are sequences of them). Returns every (resolution, result), the failures (a grid attack's error names its
    resolution) and the attacks not applicable (attack -> why).

    A grid attack that is "too few objects to measure" or "saturated" (:class:`audits.controls.TooFewObjects`) at some
    resolutions and measured at others is decided on those it measured: a resolution whose interval is too wide
    to say anything (at 2 km a third or more of the controls link, and ~90 controls give a risk interval ~0.5
    wide whatever the release does) would otherwise block every release of a city-sized fleet. A resolution whose
    whole interval lies above the threshold is a measured block, never set aside (:func:`_attack`). Each measured
    result of such an attack names the set-aside resolutions in its evidence (``unmeasured_resolutions``); an
    attack too few to measure at every resolution is not applicable, as before."""
    names = policy.attacks_for(release_kind)
    gridded = [n for n in names if n in GRID_ATTACKS] if policy.resolutions_m and release_kind != "aggregate" else []
    raw, release = on_cluster(client, raw, release)
    results, failures, not_applicable = run_attacks(client, policy, raw, release, release_kind,
                                                    [n for n in names if n not in gridded])
    out = [(0.0, r) for r in results]
    print(f"audit: {', '.join(n for n in names if n not in gridded) or 'no attack'} done (no grid)")
    too_few: dict[str, dict[str, str]] = {}
    sizes = policy.resolutions_m if gridded else ()
    for step, size in enumerate(sizes, start=1):
        found, failed, inapplicable = run_attacks(client, policy, raw, release, release_kind, gridded,
                                                  GridSpec(bbox, size))
        print(f"audit: at {size:g} m: {', '.join(gridded)} done (resolution {step} of {len(sizes)})")
        out += [(float(size), r) for r in found]
        for name, error in failed.items():
            failures.setdefault(name, f"at {size:g} m: {error}")
        for name, why in inapplicable.items():
            if why.startswith(UNMEASURED):
                too_few.setdefault(name, {})[f"{size:g}"] = why
            else:
                not_applicable.setdefault(name, f"at {size:g} m: {why}")
    for name, by_size in too_few.items():
        if name in not_applicable or not any(r.attack == name for _, r in out):
            size, why = next(iter(by_size.items()))
            not_applicable.setdefault(name, f"at {size} m: {why}")
            continue
        kinds = {SATURATED if why.startswith(SATURATED) else "too few objects to measure" for why in by_size.values()}
        print(f"audit: {name}: set aside at {', '.join(by_size)} m ({' or '.join(sorted(kinds))} there)")
        out = [(size, r.with_evidence({**r.evidence, "unmeasured_resolutions": by_size}) if r.attack == name else r)
               for size, r in out]
    return out, failures, not_applicable


def run(client: Client, raw: pd.DataFrame | Future, candidate: CandidateRelease, policy: GatePolicy,
        seed: int | None = None, *, bbox: tuple[float, float, float, float]) -> AuditOutcome:
    """The policy's attacks (the dataset's registered policy: :func:`tasks.policies.resolve`) that apply to the
    candidate's shape, at the policy's resolutions over the release's ``bbox``, and the utility figures, then
    the gate on the worst case. ``raw`` (a frame, or a future of one: :func:`raw_on_cluster`) and the attack
    frames stay on the workers."""
    release_kind = candidate.shape.audit_kind
    [raw_f] = on_cluster(client, raw)
    candidate_f = client.scatter(candidate, hash=False, direct=True)
    frames = client.submit(attack_frames, raw_f, candidate_f, pure=False)
    attack_raw, release_f = (client.submit(operator.getitem, frames, i, pure=False) for i in (0, 1))
    wait_futures([attack_raw, release_f])  # the attacks' time limits count from when their frames exist
    # the utility figures on a worker while the attacks run (they read the raw frame as prepared: the attacks'
    # one unless the release is fragments, whose attacks play per trajectory)
    utility_f = client.submit(measure_utility, raw_f, candidate_f, release_f, seed, bbox, pure=False)
    by_resolution, failures, not_applicable = run_at_resolutions(client, policy, attack_raw, release_f,
                                                                 release_kind, bbox)
    results = worst_per_attack(policy, by_resolution)
    try:
        measured = utility_f.result()
    except InputError as exc:  # e.g. an empty release: no figure, so every floor of the policy blocks
        measured = {"error": str(exc)}
    decision = evaluate_gate(policy, results, release_kind, measured, failures, not_applicable)
    return AuditOutcome(results, failures, not_applicable, decision, policy, measured, by_resolution)


def store(conn: sa.Connection, release_id: int, outcome: AuditOutcome) -> None:
    """Every attack's result (and every failure, with its error) in ``governance.audit_results``, the utility
    and the decision (with the policy it applied) in the release summary: as the auditor's login (sql/036)."""
    from tasks.governance import record_gate

    for resolution, r in outcome.by_resolution:
        threshold = outcome.decision.per_attack[r.attack]["threshold"]
        conn.execute(sa.text(
            "INSERT INTO governance.audit_results (release_id, attack, resolution_m, success_rate, ci_low, ci_high,"
            " baseline, risk, risk_ci_low, risk_ci_high, threshold, passed, verdict, evidence) VALUES (:rel, :a,"
            " :res, :s, :lo, :hi, :b, :risk, :rlo, :rhi, :th, :ok, :verdict, CAST(:ev AS jsonb))"),
            {"rel": release_id, "a": r.attack, "res": resolution, "s": r.success_rate, "lo": r.ci_low,
             "hi": r.ci_high, "b": r.baseline, "risk": r.risk, "rlo": r.risk_ci_low, "rhi": r.risk_ci_high,
             "th": threshold, "ok": outcome.policy.passes(r),
             "verdict": None if threshold is None else verdict(r, threshold), "ev": json.dumps(r.to_dict())})
    unmeasured = [(name, "failed", error, False) for name, error in outcome.failures.items()]
    unmeasured += [(name, "not applicable", why, outcome.policy.not_applicable_rule(name) == "pass")
                   for name, why in outcome.not_applicable.items()]
    for name, kind, why, passed in unmeasured:
        conn.execute(sa.text(
            "INSERT INTO governance.audit_results (release_id, attack, threshold, passed, outcome, error, evidence)"
            " VALUES (:rel, :a, :th, :ok, :kind, :err, CAST(:ev AS jsonb))"),
            {"rel": release_id, "a": name, "th": outcome.policy.max_risk.get(name), "ok": passed, "kind": kind,
             "err": why, "ev": json.dumps({"outcome": kind, "error": why})})
    record_gate(conn, release_id, outcome.utility, {"blocked": outcome.decision.blocked,
                                                    "reasons": outcome.decision.reasons,
                                                    "privacy": outcome.decision.privacy,
                                                    "utility": outcome.decision.utility,
                                                    "per_utility": outcome.decision.per_utility,
                                                    "policy": outcome.policy.to_dict()})
