"""Ingest: snapshot a dataset in PostGIS and read it in object partitions, each sent to a Dask worker as it is read."""

from __future__ import annotations

import hashlib
import io
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd
import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
import sqlalchemy as sa
from distributed import Client, Future

from tasks.dask_wait import WorkerLost
from tasks.db import dataset_lock_key, with_retries
from trajpub.errors import InputError

HASH_BLOCK = 1_000_000
#: How long a release waits for a Dask worker to read its partitions into, before it fails.
WORKERS_TIMEOUT_S = 600.0
SNAPSHOT_FILTER = ("dataset = %(dataset)s AND point_id <= %(max_point_id)s"
                   " AND (%(ws)s::timestamptz IS NULL OR t >= %(ws)s)"
                   " AND (%(we)s::timestamptz IS NULL OR t < %(we)s)")


@dataclass(frozen=True)
class Snapshot:
    """A reproducible snapshot: raw points are append-only, so (dataset, window, max point id) pins the data."""

    dataset: str
    window_start: datetime | None
    window_end: datetime | None
    max_point_id: int
    n_points: int
    n_objects: int
    content_hash: str

    def filter_params(self) -> dict:
        return {"dataset": self.dataset, "max_point_id": self.max_point_id, "ws": self.window_start,
                "we": self.window_end}

    def to_dict(self) -> dict:
        return {"dataset": self.dataset, "window_start": _iso(self.window_start), "window_end": _iso(self.window_end),
                "max_point_id": self.max_point_id, "n_points": self.n_points, "n_objects": self.n_objects,
                "content_hash": self.content_hash}


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def psycopg_dsn(engine: sa.Engine) -> str:
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


def take_snapshot(engine: sa.Engine, dataset: str, window_start: datetime | None,
                  window_end: datetime | None) -> tuple[Snapshot, list[tuple[str, int]]]:
    """Pin the snapshot, hash its content (SHA-256 over points in id order) and count points per object."""
    with psycopg.connect(psycopg_dsn(engine)) as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        # wait for loads into this dataset in flight, so that no point id below the pin commits later
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (dataset_lock_key(dataset),))
        max_id = conn.execute("SELECT coalesce(max(point_id), 0) FROM raw.points WHERE dataset = %s",
                              (dataset,)).fetchone()[0]
        params = {"dataset": dataset, "max_point_id": max_id, "ws": window_start, "we": window_end}
        # SHA-256 per block of HASH_BLOCK point ids (one text value each stays far below PostgreSQL's 1 GB
        # limit), then SHA-256 of the block digests in id order
        blocks = conn.execute(
            "SELECT count(*), sha256(convert_to(string_agg(concat_ws(',', point_id, object_id, t, ST_AsText(geom)),"
            f" ';' ORDER BY point_id), 'UTF8')) FROM raw.points WHERE {SNAPSHOT_FILTER}"
            f" GROUP BY point_id / {HASH_BLOCK} ORDER BY point_id / {HASH_BLOCK}", params).fetchall()
        n = sum(count for count, _ in blocks)
        digest = hashlib.sha256(b"".join(block for _, block in blocks)).hexdigest()
        objects = conn.execute(f"SELECT object_id, count(*) FROM raw.points WHERE {SNAPSHOT_FILTER} "
                               "GROUP BY object_id ORDER BY object_id", params).fetchall()
    if n == 0:
        window = f", window {_iso(window_start)} to {_iso(window_end)}" if window_start or window_end else ""
        raise InputError(f"dataset '{dataset}' has no points to release", f"raw.points, dataset {dataset}{window}")
    snap = Snapshot(dataset, window_start, window_end, int(max_id), int(n), len(objects), digest)
    return snap, [(o, int(c)) for o, c in objects]


def partition_objects(objects: list[tuple[str, int]], n_partitions: int) -> list[list[str]]:
    """Assign whole objects to partitions, balancing point counts (longest-processing-time greedy)."""
    n_partitions = max(1, min(n_partitions, len(objects)))
    loads = np.zeros(n_partitions, dtype=np.int64)
    parts: list[list[str]] = [[] for _ in range(n_partitions)]
    for obj, count in sorted(objects, key=lambda oc: (-oc[1], oc[0])):
        i = int(np.argmin(loads))
        parts[i].append(obj)
        loads[i] += count
    return [sorted(p) for p in parts]


PARTITION_COLUMNS = {"point_id": pa.int64(), "source_id": pa.int64(), "source_line": pa.int64(),
                     "object_id": pa.string(), "t_us": pa.int64(), "lon": pa.float64(), "lat": pa.float64()}


def partition_csv(dsn: str, snapshot_params: dict, object_ids: list[str]) -> bytes:
    """Runs in the flow: one partition's points as CSV, read from PostGIS with ``COPY (SELECT ...) TO STDOUT`` in
    load order per object (point id: file order, or time order for an object the load found newest-first;
    tasks.load.time_order), retried on transient database errors. Times travel as epoch microseconds (``t`` is
    microsecond-exact in PostgreSQL) and coordinates as float8 text, which PostgreSQL writes in its shortest form
    that reads back to the same double."""
    query = ("SELECT point_id, source_id, source_line, object_id, (extract(epoch FROM t) * 1000000)::bigint,"
             f" ST_X(geom), ST_Y(geom) FROM raw.points WHERE {SNAPSHOT_FILTER} AND object_id = ANY(%(ids)s)"
             " ORDER BY object_id, point_id")

    def read() -> bytes:
        sink = io.BytesIO()
        with psycopg.connect(dsn) as conn, conn.cursor() as cur, \
                cur.copy(f"COPY ({query}) TO STDOUT (FORMAT csv)", {**snapshot_params, "ids": object_ids}) as copy:
            for block in copy:
                sink.write(block)
        return sink.getvalue()

    return with_retries(read, "read partition")


def parse_partition(csv: bytes) -> pd.DataFrame:
    """Runs on a Dask worker: the frame of one partition's CSV (:func:`partition_csv`), parsed by Arrow's C++
    reader: no Python object per value, which fetching rows as tuples made (a quarter of the client CPU)."""
    if csv:
        table = pacsv.read_csv(pa.py_buffer(csv),
                               read_options=pacsv.ReadOptions(column_names=list(PARTITION_COLUMNS)),
                               parse_options=pacsv.ParseOptions(newlines_in_values=True),
                               convert_options=pacsv.ConvertOptions(column_types=PARTITION_COLUMNS))
    else:
        table = pa.schema(PARTITION_COLUMNS).empty_table()
    df = table.to_pandas()
    df.insert(4, "t", pd.to_datetime(df.pop("t_us"), unit="us", utc=True))
    return df.astype({"object_id": "str"})


def read_partitions(client: Client, engine: sa.Engine, snapshot: Snapshot,
                    objects: list[tuple[str, int]], n_partitions: int) -> list[Future]:
    """Futures of the partitions, held in worker memory. The flow reads each partition from PostGIS and sends its
    CSV to a worker, which parses it: the workers never receive a database credential, and a scheduler gets
    only the partitions, never a password (docs/design.md, "Decision codes and the control plane"). One read
    per worker at a time (reads overlap parsing), so the flow holds at most that many partitions' CSV. A partition
    for a worker that has left goes to another; partitions lost with a worker are found by validation's bounded
    waits (:mod:`tasks.dask_wait`)."""
    dsn = psycopg_dsn(engine)
    parts = partition_objects(objects, n_partitions)
    workers = sorted(client.scheduler_info()["workers"])
    deadline = time.monotonic() + WORKERS_TIMEOUT_S
    while not workers:  # a worker can leave between the wait and the listing (a nanny restarting it under load)
        client.wait_for_workers(1, timeout=max(1.0, deadline - time.monotonic()))
        workers = sorted(client.scheduler_info()["workers"])
    params = snapshot.filter_params()

    def send(i: int) -> Future:
        worker, data = workers[i % len(workers)], partition_csv(dsn, params, parts[i])
        try:
            [csv] = client.scatter([data], workers=[worker], hash=False, direct=True)
        except OSError:  # the worker left ("No valid workers found", "Timed out trying to connect"): any other
            try:
                [csv] = client.scatter([data], hash=False, direct=True)
            except OSError:
                raise WorkerLost("no Dask worker is left to take the partitions during ingest; run the release "
                                 "again", "Dask") from None
        return client.submit(parse_partition, csv, workers=[worker], allow_other_workers=True, pure=False)

    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        return list(pool.map(send, range(len(parts))))
