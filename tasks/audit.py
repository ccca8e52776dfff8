"""Audit + gate: attack the candidate release with the raw data as background knowledge, measure utility,
and decide whether the gate blocks it (policy YAML, ``audits/policies/default.yaml`` by default)."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import sqlalchemy as sa
from distributed import Client, Future

from audits import utility
from audits.gate import GateDecision, GatePolicy, evaluate_gate
from audits.result import AttackResult
from audits.signature_linkage import SignatureLinkage, SignatureLinkageParams
from trajpub.segment import cell_sequences
from trajpub.spec import ReleaseSpec

RAW_COLUMNS = ["object_id", "traj_id", "seq", "lon", "lat", "x", "y", "cell"]
N_QUERIES = 1000


@dataclass(frozen=True)
class AuditOutcome:
    results: list[AttackResult]
    decision: GateDecision
    policy: GatePolicy
    utility: dict


def gather_raw(client: Client, prepared: list[Future]) -> pd.DataFrame:
    """The auditor's background knowledge: every prepared raw point (it stays out of any published table)."""
    parts = client.gather(client.map(lambda df: df[RAW_COLUMNS], prepared))
    return pd.concat(parts, ignore_index=True)


def policy_for(spec: ReleaseSpec) -> GatePolicy:
    if spec.gate_policy is None:
        return GatePolicy.default()
    if isinstance(spec.gate_policy, str):
        return GatePolicy.from_yaml(Path(spec.gate_policy))
    return GatePolicy.from_dict(spec.gate_policy)


def measure_utility(raw: pd.DataFrame, release: pd.DataFrame, seed: int | None) -> dict:
    """The review's utility figures: count-query relative error (Chen et al. Def. 3.7, sanity bound 0.1% of
    |D|; query locations drawn from the cells the raw data visits, so that queries are not trivially empty),
    density, trip and length distribution divergences (JSD, natural log, max ln 2 ≈ 0.693)."""
    rng = np.random.default_rng(seed)
    _, raw_off, raw_cells = cell_sequences(raw)
    raw_seqs = [raw_cells[a:b] for a, b in itertools.pairwise(raw_off)]
    _, rel_off, rel_cells = cell_sequences(release)
    rel_seqs = [seq[seq >= 0] for seq in (rel_cells[a:b] for a, b in itertools.pairwise(rel_off))]  # -1: off grid
    visited = np.unique(raw_cells)
    queries = [visited[q] for q in utility.random_count_queries(len(visited), N_QUERIES, min(6, len(visited)), rng)]
    return {
        "count_query_re": utility.count_query_re(raw_seqs, rel_seqs, queries, sanity=0.001),
        "density_jsd": utility.density_jsd(raw, release, "cell"),
        "trip_error": utility.trip_error(raw, release, grid_size=6),
        "length_jsd_points": utility.length_jsd(raw, release, "points"),
        "raw_trajectories": len(raw_seqs),
        "released_trajectories": len(rel_seqs),
    }


def run(raw: pd.DataFrame, release: pd.DataFrame, spec: ReleaseSpec, release_kind: str) -> AuditOutcome:
    """The survey's signature linkage (A1): arg-max and one-to-one linking of each released record to its owner
    for a truthful release, the threshold form for a synthetic one; then the gate."""
    policy = policy_for(spec)
    results = [SignatureLinkage(SignatureLinkageParams(mode=release_kind)).evaluate(raw, release)]
    measured = measure_utility(raw, release, spec.seed)
    gated = {k: v for k, v in measured.items() if k in policy.max_utility_error}
    return AuditOutcome(results, evaluate_gate(policy, results, gated), policy, measured)


def store(conn: sa.Connection, release_id: int, outcome: AuditOutcome) -> None:
    from tasks.governance import merge_summary

    for r in outcome.results:
        verdict = outcome.decision.per_attack[r.attack]
        conn.execute(sa.text(
            "INSERT INTO governance.audit_results (release_id, attack, success_rate, ci_low, ci_high, baseline,"
            " risk, threshold, passed, evidence) VALUES (:rel, :a, :s, :lo, :hi, :b, :risk, :th, :ok,"
            " CAST(:ev AS jsonb))"),
            {"rel": release_id, "a": r.attack, "s": r.success_rate, "lo": r.ci_low, "hi": r.ci_high,
             "b": r.baseline, "risk": r.risk, "th": verdict["threshold"], "ok": verdict["status"] != "blocked",
             "ev": json.dumps(r.to_dict())})
    merge_summary(conn, release_id, {"utility": outcome.utility,
                                     "gate": {"blocked": outcome.decision.blocked,
                                              "reasons": outcome.decision.reasons}})
