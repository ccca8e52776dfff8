"""Load one raw source file (or folder) into ``raw.points``, its rejected records into ``staging.quarantine``.

The library half of ``trajpub load FORMAT PATH --dataset NAME``. A source is identified by the sha256 of its
bytes (of all its files, in the sorted order the reader uses): loading the same bytes into the same dataset
again is a no-op. Everything a load writes (the dataset rows if new, the ``raw.sources`` row, the points and
the quarantined records) is written in one transaction, so a failure leaves nothing behind.

Points and rejects go in with PostgreSQL ``COPY ... FROM STDIN`` (psycopg 3 ``cursor.copy``), the CSV
written by Arrow. Points are copied straight into ``raw.points`` in blocks of :data:`POINTS_PER_BLOCK` rows (one
COPY statement, so the point ids follow load order): ``t`` as ISO 8601 text in UTC and ``geom`` as hex EWKB
(SRID 4326), both built from the columns by numpy and Arrow without per-row Python. Measured on 4.0 M points
(10x the T-Drive sample, 2 shared cores), this replaced a COPY into a temporary table followed by
``INSERT ... SELECT ST_SetSRID(ST_MakePoint(lon, lat), 4326) ... ORDER BY seq``, which wrote every point twice
and sorted them (bench/SCALE_RESULTS.md has the figures).

Time order: many exports list each object's points newest first. An object whose points never go forward in time
in the file (and go back at least once) is put in time order at load (:func:`time_order`), and the load says how
many; its ``source_line`` values still name the file's lines. An object whose points go both forward and back
is kept in file order: those regressions are real errors, which the release's validation quarantines (the
suite's time-order check reads each object's points in load order, ``raw.points.point_id``).
"""

from __future__ import annotations

import binascii
import hashlib
import io
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import sqlalchemy as sa

from tasks.db import dataset_lock_key
from trajpub import formats
from trajpub.errors import InputError
from trajpub.spec import validate_dataset_name

COPY_CHUNK = 8 << 20  # bytes per COPY write


@dataclass(frozen=True)
class LoadReport:
    """What one ``load_source`` call did. With ``already_loaded`` the counts are those of the earlier load."""

    dataset: str
    source_id: int
    path: str
    sha256: str
    n_read: int
    n_loaded: int
    n_quarantined: int
    n_reordered_objects: int
    n_unordered_objects: int
    already_loaded: bool
    seconds: float


class _LoadedConcurrently(Exception):
    """Another session committed the same (dataset, sha256) while this one was parsing: roll back."""


def sha256_of(files: list[Path]) -> str:
    """sha256 of the files' bytes, concatenated in the given order."""
    digest = hashlib.sha256()
    for path in files:
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class TimeOrdered:
    """Points in load order (:func:`time_order`)."""

    points: pd.DataFrame
    n_reordered_objects: int  # newest-first in the file, put in time order
    n_unordered_objects: int  # going both forward and back in time in the file, kept in file order


def time_order(points: pd.DataFrame) -> TimeOrdered:
    """The points in load order: file order (``source_line``), except that the points of each object listed
    newest-first (no step forward in time, at least one back) are put in time order, in the slots the object
    holds in the file (points at the same time keep their file order)."""
    pts = points.sort_values("source_line", kind="stable").reset_index(drop=True)
    step = pts.groupby("object_id", sort=False)["t"].diff()
    directions = pd.DataFrame({"object_id": pts["object_id"], "back": step < pd.Timedelta(0),
                               "forward": step > pd.Timedelta(0)}).groupby("object_id")[["back", "forward"]].any()
    newest_first = directions.index[directions["back"] & ~directions["forward"]]
    n_unordered = int((directions["back"] & directions["forward"]).sum())
    moving = pts.loc[pts["object_id"].isin(newest_first)]
    order = np.arange(len(pts))
    slots = moving.sort_values("object_id", kind="stable").index.to_numpy()  # each object's slots, file order
    order[slots] = moving.sort_values(["object_id", "t"], kind="stable").index.to_numpy()
    return TimeOrdered(pts.take(order).reset_index(drop=True), len(newest_first), n_unordered)


def _existing(conn: sa.Connection, dataset: str, sha256: str) -> sa.Row | None:
    return conn.execute(sa.text(
        "SELECT source_id, n_read, n_loaded, n_quarantined, n_reordered_objects, n_unordered_objects"
        " FROM raw.sources"
        " WHERE dataset = :d AND sha256 = :s"), {"d": dataset, "s": sha256}).one_or_none()


def copy_in(cursor: Any, sql: str, data: bytes, progress: Callable[[str], None] | None = None,
          what: str = "") -> None:
    with cursor.copy(sql) as copy:
        for start in range(0, len(data), COPY_CHUNK):
            copy.write(data[start:start + COPY_CHUNK])
            if progress is not None and len(data) > COPY_CHUNK:
                progress(f"copied {min(start + COPY_CHUNK, len(data)) / len(data):.0%} of {what}")


def csv_for_copy(columns: dict[str, Any]) -> bytes:
    """Columns as headerless CSV for ``COPY ... (FORMAT csv)``, written by Arrow's multithreaded C++ writer
    (8x faster than ``DataFrame.to_csv`` here). Strings are always quoted, so an empty string stays an empty
    string; floats are written in their shortest round-trip form, so coordinates arrive bit for bit."""
    sink = io.BytesIO()
    pacsv.write_csv(pa.table(columns), sink,
                    write_options=pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    return sink.getvalue()


POINTS_PER_BLOCK = 1_000_000  # rows per block of the points' COPY: bounds the CSV held in memory
_EWKB_POINT_HEADER = np.frombuffer(struct.pack("<BII", 1, 0x20000001, 4326), np.uint8)  # LE, Point + SRID flag


def hex_ewkb_points(lon: np.ndarray, lat: np.ndarray) -> pa.Array:
    """Points as hex EWKB text with SRID 4326 (the text form PostGIS reads for ``geometry``), vectorised: byte
    order, type with the SRID flag, SRID, then x and y as little-endian float64 (25 bytes, 50 hex digits)."""
    n = len(lon)
    wkb = np.empty((n, 25), np.uint8)
    wkb[:, :9] = _EWKB_POINT_HEADER
    wkb[:, 9:17] = np.ascontiguousarray(lon, dtype="<f8").view(np.uint8).reshape(n, 8)
    wkb[:, 17:] = np.ascontiguousarray(lat, dtype="<f8").view(np.uint8).reshape(n, 8)
    digits = binascii.hexlify(wkb.tobytes())
    offsets = np.arange(0, 50 * (n + 1), 50, dtype=np.int64)
    return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(digits)])


def _points_csv_blocks(points: pd.DataFrame, dataset: str, source_id: int) -> Iterator[bytes]:
    """Points for ``COPY raw.points (dataset, source_id, source_line, object_id, t, geom)``, in load order, as
    CSV blocks of :data:`POINTS_PER_BLOCK` rows."""
    for start in range(0, len(points), POINTS_PER_BLOCK):
        block = points.iloc[start:start + POINTS_PER_BLOCK]
        n = len(block)
        yield csv_for_copy({
            "dataset": pa.repeat(pa.scalar(dataset, pa.string()), n),
            "source_id": pa.repeat(pa.scalar(source_id, pa.int64()), n),
            "source_line": pa.array(block["source_line"].to_numpy(), pa.int64()),
            "object_id": pa.array(block["object_id"].to_numpy(dtype=object), pa.string()),
            "t": pa.array(block["t"].astype("datetime64[us, UTC]").to_numpy(dtype="datetime64[us]"),
                          pa.timestamp("us", "UTC")),
            "geom": hex_ewkb_points(block["lon"].to_numpy(float), block["lat"].to_numpy(float)),
        })


def _rejects_csv(rejects: pd.DataFrame, dataset: str, source_id: int) -> bytes:
    """Rejects for COPY into staging.quarantine (NUL, which PostgreSQL text cannot hold, spelt out)."""
    n = len(rejects)

    def text(column: str) -> pa.Array:
        values = rejects[column].astype(str).str.replace("\x00", "\\x00", regex=False)
        return pa.array(values.to_numpy(dtype=object), pa.string())

    return csv_for_copy({
        "dataset": pa.repeat(pa.scalar(dataset, pa.string()), n),
        "stage": pa.repeat(pa.scalar("load", pa.string()), n),
        "source_id": pa.repeat(pa.scalar(source_id, pa.int64()), n),
        "source_line": pa.array(rejects["source_line"].to_numpy(), pa.int64()),
        "reason": text("reason"),
        "record": text("record"),
    })


def _refuse_empty(parsed: formats.ParsedSource, shown: str) -> None:
    """A source none of whose records is a point loads nothing, not even the dataset (a dataset of no points
    would be planned, charged and audited for nothing): the error says why the records were rejected."""
    if parsed.rejects.empty:
        raise InputError("the source holds no records; nothing was loaded, no dataset created", f"file {shown}")
    first = parsed.rejects.sort_values("source_line", kind="stable").iloc[0]
    raise InputError(f"none of the {parsed.n_read} records is a point (the first: {str(first['reason'])[:120]}); "
                     "nothing was loaded, no dataset created", f"file {shown}, line {first['source_line']}")


def load_source(engine: sa.Engine, fmt: str, path: str | Path, dataset: str, options: dict | None = None,
                progress: Callable[[str], None] | None = None) -> LoadReport:
    """Load ``path`` (format ``fmt``, reader ``options``) into ``dataset``; see the module docstring.

    Creates the dataset in ``raw.datasets`` and ``governance.datasets`` (default epsilon cap, the format's local
    time zone: sql/025) if it is new.
    Raises :class:`ParameterError` for a bad dataset name, format or option and :class:`InputError` for a
    source that cannot be read; malformed records are not errors but quarantined rows with their reason.
    ``progress`` receives one-line messages about the long steps.
    """
    started = time.perf_counter()
    say = progress or (lambda _message: None)
    validate_dataset_name(dataset, "--dataset")
    reader = formats.get_format(fmt, options)
    files = reader.files(path)
    shown = str(Path(path).resolve())
    say(f"hashing {len(files)} file(s)")
    digest = sha256_of(files)

    def report(row: Any, already: bool) -> LoadReport:
        return LoadReport(dataset=dataset, source_id=int(row.source_id), path=shown, sha256=digest,
                          n_read=int(row.n_read), n_loaded=int(row.n_loaded), n_quarantined=int(row.n_quarantined),
                          n_reordered_objects=int(row.n_reordered_objects),
                          n_unordered_objects=int(row.n_unordered_objects), already_loaded=already,
                          seconds=time.perf_counter() - started)

    with engine.connect() as conn:
        row = _existing(conn, dataset, digest)
    if row is not None:
        say(f"this file is already loaded into {dataset} (source {row.source_id})")
        return report(row, True)

    say(f"parsing {shown} as {fmt}")
    parsed = reader.parse(path)
    n_points, n_rejects = len(parsed.points), len(parsed.rejects)
    say(f"read {parsed.n_read} records: {n_points} points, {n_rejects} rejected")
    if n_points == 0:
        _refuse_empty(parsed, shown)
    ordered = time_order(parsed.points)
    if ordered.n_reordered_objects:
        say(f"put {ordered.n_reordered_objects} objects listed newest-first in time order (their source lines are "
            "kept)")
    if ordered.n_unordered_objects:
        say(f"{ordered.n_unordered_objects} objects have points that go back in time in the file: kept in file "
            "order, so a release's validation quarantines those points")

    try:
        with engine.begin() as conn:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": dataset_lock_key(dataset)})
            conn.execute(sa.text("INSERT INTO raw.datasets (dataset) VALUES (:d) ON CONFLICT DO NOTHING"),
                         {"d": dataset})
            conn.execute(sa.text("INSERT INTO governance.datasets (dataset, timezone) VALUES (:d, :tz)"
                                 " ON CONFLICT DO NOTHING"), {"d": dataset, "tz": reader.local_timezone})
            source_id = conn.execute(sa.text(
                "INSERT INTO raw.sources (dataset, format, path, sha256, n_read, n_loaded, n_quarantined,"
                " n_reordered_objects, n_unordered_objects) VALUES (:d, :f, :p, :s, :r, :l, :q, :ro, :uo)"
                " ON CONFLICT (dataset, sha256) DO NOTHING RETURNING source_id"),
                {"d": dataset, "f": fmt, "p": shown, "s": digest, "r": parsed.n_read, "l": n_points,
                 "q": n_rejects, "ro": ordered.n_reordered_objects,
                 "uo": ordered.n_unordered_objects}).scalar()
            if source_id is None:
                raise _LoadedConcurrently
            with conn.connection.dbapi_connection.cursor() as cursor:
                say(f"copying {n_points} points into raw.points")
                with cursor.copy("COPY raw.points (dataset, source_id, source_line, object_id, t, geom)"
                                 " FROM STDIN (FORMAT csv)") as copy:
                    for k, block in enumerate(_points_csv_blocks(ordered.points, dataset, source_id)):
                        copy.write(block)
                        if n_points > POINTS_PER_BLOCK:
                            say(f"copied {min((k + 1) * POINTS_PER_BLOCK, n_points) / n_points:.0%} of the points")
                if n_rejects:
                    say(f"quarantining {n_rejects} rejected records")
                    copy_in(cursor, "COPY staging.quarantine (dataset, stage, source_id, source_line, reason,"
                          " record) FROM STDIN (FORMAT csv)",
                          _rejects_csv(parsed.rejects, dataset, source_id))
            say("committing")
    except _LoadedConcurrently:
        with engine.connect() as conn:
            row = _existing(conn, dataset, digest)
        say(f"another session loaded this file into {dataset} meanwhile (source {row.source_id})")
        return report(row, True)
    done = report(SimpleNamespace(source_id=source_id, n_read=parsed.n_read, n_loaded=n_points,
                                  n_quarantined=n_rejects, n_reordered_objects=ordered.n_reordered_objects,
                                  n_unordered_objects=ordered.n_unordered_objects), False)
    say(f"loaded {n_points} points and quarantined {n_rejects} records in {done.seconds:.1f} s")
    return done
