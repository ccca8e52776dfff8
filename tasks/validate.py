"""Validate raw points with the Great Expectations suite ``expectations/raw_points.json``, on Dask workers.

Rows that fail an expectation are quarantined with the expectation that failed (never dropped); the release
fails when the quarantined share passes the policy threshold (:class:`trajpub.spec.ValidationSpec`).
"""

from __future__ import annotations

import json
import operator
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import sqlalchemy as sa
from distributed import Client, Future, as_completed

from tasks import dask_wait
from tasks.gx import run_suite
from tasks.load import copy_in, csv_for_copy
from trajpub import config
from trajpub.errors import PolicyError, TrajpubError
from trajpub.spec import ReleaseSpec

SUITE_PATH = config.EXPECTATIONS_DIR / "raw_points.json"
EARTH_RADIUS_M = 6_371_008.8
EARLIEST = datetime(1990, 1, 1, tzinfo=UTC)


def load_suite(path=SUITE_PATH) -> dict:
    return json.loads(path.read_text())


def suite_parameters(spec: ReleaseSpec) -> dict:
    """The values of the suite's ``$PARAMETER`` placeholders for this release."""
    min_lon, min_lat, max_lon, max_lat = spec.bbox
    return {"min_lon": min_lon, "max_lon": max_lon, "min_lat": min_lat, "max_lat": max_lat,
            "window_start": pd.Timestamp(spec.window_start or EARLIEST),
            "window_end": pd.Timestamp(spec.window_end or datetime.now(UTC)),
            "max_speed_mps": spec.validation.max_speed_mps}


def add_derived_columns(df: pd.DataFrame, params: dict) -> pd.DataFrame:
    """Columns the suite checks: ``is_repeat`` (exact duplicate of an earlier point) and, between consecutive
    plausible points of an object in load order (tasks.load.time_order), ``dt_prev_s`` and ``speed_mps`` (haversine distance / time).

    Only points that pass the key, range, bbox and duplicate checks take part in the time-order and speed
    checks, so one impossible point does not drag its neighbours into quarantine.
    """
    df = df.copy()
    df["is_repeat"] = df.duplicated(["object_id", "t", "lon", "lat"], keep="first")
    plausible = (df["object_id"].notna() & df["t"].notna() & ~df["is_repeat"]
                 & df["lon"].between(params["min_lon"], params["max_lon"])
                 & df["lat"].between(params["min_lat"], params["max_lat"]))
    p = df.loc[plausible]
    same = p["object_id"].eq(p["object_id"].shift())
    dt = (p["t"] - p["t"].shift()).dt.total_seconds()
    lat1, lat2 = np.radians(p["lat"].shift()), np.radians(p["lat"])
    dlat, dlon = lat2 - lat1, np.radians(p["lon"] - p["lon"].shift())
    a = np.sin(dlat / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin(dlon / 2) ** 2
    dist = 2 * EARTH_RADIUS_M * np.arcsin(np.sqrt(a.clip(0, 1)))
    df["dt_prev_s"] = dt.where(same)
    speed = (dist / dt).where(same & (dt > 0))
    df["speed_mps"] = speed
    return df


def warm_up() -> None:
    """Import Great Expectations on a worker while the database takes the snapshot: a worker forked from the fork
    server holds it already (:data:`tasks.dask_cluster.WORKER_PRELOAD`); one the nanny started again after a loss
    is spawned and takes 4-8 s."""
    import great_expectations  # noqa: F401


def warm_up_workers(client: Client) -> list[Future]:
    """One :func:`warm_up` per worker; one meant for a worker that leaves runs on another (a task held to a
    worker that is gone would wait in the scheduler for ever: :mod:`tasks.dask_wait`)."""
    return [client.submit(warm_up, workers=[w], allow_other_workers=True, pure=False)
            for w in client.scheduler_info()["workers"]]


def validate_partition(df: pd.DataFrame, suite: dict, params: dict) -> tuple[pd.DataFrame, pd.DataFrame, list]:
    """Runs on a Dask worker: GX validation of one partition.

    Returns (clean points, quarantined points with ``reason`` and ``counts_as``, per-expectation results).
    """
    df = add_derived_columns(df, params)
    result = run_suite(suite, df, params,
                       {"result_format": "COMPLETE", "unexpected_index_column_names": ["point_id"]})
    reasons: dict[int, list[str]] = {}
    kinds: dict[int, set[str]] = {}
    summary = []
    for r in result.results:  # GX does not keep the suite's order: read each result's own configuration
        config = r.expectation_config
        name, says, counts_as = f"{config.type}({config.kwargs['column']})", config.meta["says"], config.meta["counts_as"]
        if r.exception_info and r.exception_info.get("raised_exception"):
            raise TrajpubError(f"the expectation could not be evaluated: {r.exception_info['exception_message']}",
                               f"expectation {name} in {SUITE_PATH.name}")
        ids = [int(d["point_id"]) for d in r.result.get("unexpected_index_list") or []]
        for pid in ids:
            reasons.setdefault(pid, []).append(f"{name}: {says}")
            kinds.setdefault(pid, set()).add(counts_as)
        summary.append({"expectation": name, "says": says, "counts_as": counts_as, "success": bool(r.success),
                        "element_count": int(r.result.get("element_count") or 0), "unexpected_count": len(ids)})
    bad = df["point_id"].isin(reasons)
    quarantined = df.loc[bad, ["point_id", "source_id", "source_line", "object_id", "t", "lon", "lat"]].copy()
    quarantined["reason"] = quarantined["point_id"].map(lambda p: "; ".join(reasons[p]))
    # a row counts against the integrity share if any integrity expectation failed, else as a duplicate
    quarantined["counts_as"] = quarantined["point_id"].map(
        lambda p: "integrity" if "integrity" in kinds[p] else "duplicate")
    clean = df.loc[~bad, ["point_id", "object_id", "t", "lon", "lat"]].reset_index(drop=True)
    return clean, quarantined.reset_index(drop=True), summary


def merge_summaries(parts: list[list[dict]]) -> list[dict]:
    merged: dict[str, dict] = {}
    for part in parts:
        for e in part:
            m = merged.setdefault(e["expectation"] + e["says"], {**e, "element_count": 0, "unexpected_count": 0})
            m["element_count"] += e["element_count"]
            m["unexpected_count"] += e["unexpected_count"]
            m["success"] = m["success"] and e["success"]
    return list(merged.values())


def validate(client: Client, partitions: list[Future], spec: ReleaseSpec, release_id: int, timeout_s: float
             ) -> tuple[list[Future], list[Future], dict]:
    """Validate every partition on the workers; the clean partitions and the quarantined rows (as the CSV of
    :func:`store`'s COPY, one per partition: :func:`quarantine_csv`) stay there as futures, the flow gets the
    report. Each wait is bounded by ``timeout_s`` and a partition lost with its worker fails the stage
    (:mod:`tasks.dask_wait`)."""
    suite, params = load_suite(), suite_parameters(spec)
    results = client.map(validate_partition, partitions, suite=suite, params=params, pure=False)
    clean = client.map(operator.itemgetter(0), results)
    quarantined = client.map(operator.itemgetter(1), results)
    quarantine = client.map(quarantine_csv, quarantined, dataset=spec.dataset, release_id=release_id, pure=False)
    summaries = client.map(operator.itemgetter(2), results)
    what = "validation"
    try:
        for done, _ in enumerate(as_completed(summaries, timeout=timeout_s), start=1):
            print(f"validation: partition {done} of {len(summaries)} checked")
    except TimeoutError:
        raise dask_wait.late(summaries, what, timeout_s) from None
    summary_parts = dask_wait.gather(client, summaries, what, timeout_s)
    n_rows = sum(int(n) for n in dask_wait.gather(client, client.map(len, partitions), what, timeout_s))
    kinds = dask_wait.gather(client, client.map(lambda q: q["counts_as"].value_counts().to_dict(), quarantined),
                             what, timeout_s)
    dask_wait.settle(quarantine, what, timeout_s)  # :func:`store` then reads each at once
    n_integrity = sum(int(k.get("integrity", 0)) for k in kinds)
    n_duplicate = sum(int(k.get("duplicate", 0)) for k in kinds)
    report = {"suite": suite["name"], "n_rows": n_rows, "n_quarantined": n_integrity + n_duplicate,
              "n_integrity": n_integrity, "n_duplicate": n_duplicate,
              "integrity_share": n_integrity / n_rows, "duplicate_share": n_duplicate / n_rows,
              "max_quarantine_share": spec.validation.max_quarantine_share,
              "max_duplicate_share": spec.validation.max_duplicate_share,
              "parameters": {k: str(v) for k, v in params.items()},
              "expectations": merge_summaries(summary_parts)}
    report["success"] = (report["integrity_share"] <= spec.validation.max_quarantine_share
                         and report["duplicate_share"] <= spec.validation.max_duplicate_share)
    return clean, quarantine, report


def quarantine_csv(quarantined: pd.DataFrame, dataset: str, release_id: int) -> bytes:
    """On a worker: one partition's quarantined rows as the CSV of :func:`store`'s COPY into
    ``staging.quarantine`` (``record`` is the raw row as JSON). Built where the rows are, so that the flow
    process only passes a city's quarantine (~10^6 rows) through, a partition at a time."""
    n = len(quarantined)
    if n == 0:
        return b""
    records = quarantined.assign(t=quarantined["t"].astype(str)).drop(columns=["reason", "counts_as"])
    return csv_for_copy({
        "dataset": pa.repeat(pa.scalar(dataset, pa.string()), n),
        "stage": pa.repeat(pa.scalar("validate", pa.string()), n),
        "source_id": pa.array(quarantined["source_id"].to_numpy(), pa.int64()),
        "source_line": pa.array(quarantined["source_line"].to_numpy(), pa.int64()),
        "release_id": pa.repeat(pa.scalar(release_id, pa.int64()), n),
        "point_id": pa.array(quarantined["point_id"].to_numpy(), pa.int64()),
        "reason": pa.array(quarantined["reason"].to_numpy(dtype=object), pa.string()),
        "record": pa.array(records.to_json(orient="records", lines=True).splitlines(), pa.string()),
    })


def store(conn: sa.Connection, release_id: int, quarantine: list[Future], report: dict, timeout_s: float) -> None:
    """Quarantine the failing rows (with the expectations they failed; ``quarantine``: futures of
    :func:`quarantine_csv`, read one at a time, each within ``timeout_s``) and store the suite's result."""
    with conn.connection.dbapi_connection.cursor() as cursor:
        for part in quarantine:
            if data := dask_wait.result(part, "validation", timeout_s):  # with COPY, as the loader writes its rejects
                copy_in(cursor, "COPY staging.quarantine (dataset, stage, source_id, source_line, release_id,"
                        " point_id, reason, record) FROM STDIN (FORMAT csv)", data)
    conn.execute(sa.text(
        "INSERT INTO governance.validation_results (release_id, suite, success, n_rows, n_quarantined, result)"
        " VALUES (:r, :s, :ok, :n, :q, CAST(:res AS jsonb))"),
        {"r": release_id, "s": report["suite"], "ok": report["success"], "n": report["n_rows"],
         "q": report["n_quarantined"], "res": json.dumps(report)})


def enforce_policy(report: dict) -> None:
    if report["integrity_share"] > report["max_quarantine_share"]:
        worst = max(report["expectations"], key=lambda e: e["unexpected_count"] if e["counts_as"] == "integrity"
                    else -1)
        raise PolicyError(
            f"{report['n_integrity']} of {report['n_rows']} points ({report['integrity_share']:.1%}) failed "
            f"validation, above the policy threshold of {report['max_quarantine_share']:.1%}; most failures: "
            f"{worst['says']} ({worst['unexpected_count']} points)", f"expectation {worst['expectation']}")
    if report["duplicate_share"] > report["max_duplicate_share"]:
        raise PolicyError(
            f"{report['n_duplicate']} of {report['n_rows']} points ({report['duplicate_share']:.1%}) are exact "
            f"duplicates, above the policy threshold of {report['max_duplicate_share']:.1%}",
            "expectation expect_column_values_to_be_in_set(is_repeat)")
