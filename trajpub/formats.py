"""Readers for the raw trajectory formats of ``trajpub load``: one class per format, one verb, ``parse``.

Every reader returns a :class:`ParsedSource`: the points it could read (``source_line``, ``object_id``, ``t``
in UTC, ``lon``, ``lat`` in EPSG:4326) and, for every record it could not use, a reject row with the reason
(one sentence naming the column and the bad value) and the raw record. Nothing is dropped silently:
``len(points) + len(rejects) == n_read`` always holds (:class:`ParsedSource` checks it). Blank lines are not
records and are not counted.

``source_line`` is the 1-based line number in the file. For a folder of files (T-Drive ``*.txt``, GeoLife
``*.plt``) it is the line number in the concatenation of the files in sorted order (the bytes the loader
hashes), so it is unique within the source; reject reasons then also name the file and its own line. For
GeoPackage and GeoJSON it is the 1-based position of the feature in the layer.

Parsing is vectorised: lines are split into string fields with Arrow compute kernels, numbers go through
``pd.to_numeric`` and times through ``pd.to_datetime`` with an explicit format, both with
``errors="coerce"``, and the coerced values are turned into reasons column by column. Only lines holding a
quote character are split one by one (by the csv module). The whole source is held in memory.

Pure pandas/numpy/pyarrow/pyogrio: no database here.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from trajpub.errors import InputError, ParameterError, TrajpubError

POINT_COLUMNS = ("source_line", "object_id", "t", "lon", "lat")
REJECT_COLUMNS = ("source_line", "reason", "record")
ISO8601 = "ISO8601"
UNIX_FORMATS = {"unix": "s", "unix_ms": "ms"}
TIME_FORMAT_HELP = ("how times are written: a strftime format such as '%Y-%m-%d %H:%M:%S', ISO8601, unix (epoch "
                    "seconds) or unix_ms (epoch milliseconds); ISO 8601 when not given")
TIMEZONE_HELP = ("the IANA zone of times written without a UTC offset, e.g. Asia/Shanghai (local times that do "
                 "not exist or are ambiguous at a daylight-saving change are quarantined); times with an offset "
                 "are converted by it")
BEIJING = dt.timezone(dt.timedelta(hours=8), "UTC+8")
BAD_QUOTING = -1  # the field count given to a line whose quotes do not parse
_NAN_SPELLINGS = ("nan", "+nan", "-nan")


@dataclass(frozen=True)
class ParsedSource:
    """What a reader got out of one source: usable points, rejected records with reasons, the record count.

    ``points``: ``source_line`` (int64), ``object_id`` (str), ``t`` (datetime64[us, UTC]), ``lon``, ``lat``
    (float64, EPSG:4326). ``rejects``: ``source_line``, ``reason``, ``record`` (the raw line, or the feature
    as GeoJSON). ``files``: the files read, in the order used for line numbers and for the loader's sha256.
    """

    points: pd.DataFrame
    rejects: pd.DataFrame
    n_read: int
    files: tuple[Path, ...]

    def __post_init__(self) -> None:
        if tuple(self.points.columns) != POINT_COLUMNS or tuple(self.rejects.columns) != REJECT_COLUMNS:
            raise TrajpubError(f"a reader returned columns {list(self.points.columns)} / "
                               f"{list(self.rejects.columns)}", "trajpub.formats")
        if len(self.points) + len(self.rejects) != self.n_read:
            raise TrajpubError(f"{len(self.points)} points + {len(self.rejects)} rejects != {self.n_read} "
                               "records read: a reader lost records", "trajpub.formats")


# ------------------------------------------------------------------------------------------------------------
# Shared machinery: reading text, splitting fields, checking values, assembling points and rejects
# ------------------------------------------------------------------------------------------------------------

def _where(path: Path, line: int | None = None) -> str:
    return f"file {path}" if line is None else f"file {path}, line {line}"


def _require_exists(path: Path) -> None:
    if not path.exists():
        raise InputError("the file does not exist", _where(path))


def _read_text(path: Path) -> str:
    """The file's text (gzip is recognised by its magic bytes and read transparently)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise InputError(f"the gzip stream is corrupt: {exc}", _where(path)) from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"the file is not UTF-8 text (byte {data[exc.start]:#04x})",
                         _where(path, line)) from exc


def _split_lines(text: str) -> pa.LargeStringArray:
    """Lines split on LF only (so line numbers match what editors show), a trailing CR removed, as an Arrow array:
    no Python object per line (a city's file has 10^7 lines)."""
    lines = pc.split_pattern(pa.array([text], pa.large_string()), "\n").flatten()
    if lines[-1].as_py() == "":  # the text ends with a newline (or is empty): no line after it
        lines = lines.slice(0, len(lines) - 1)
    if "\r" not in text:
        return lines
    return pc.replace_substring_regex(lines, "\r$", "")


MAX_HEADER_CHARS = 65_536
"""A header line names a few columns: a longer first line is no header (a file without one, or not the format)."""


def _first_line(text: str) -> tuple[int, str] | None:
    """The first non-blank line of ``text`` and its number (None when every line is blank)."""
    start, number = 0, 1
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if text[start:end].strip():
            return number, text[start:end].rstrip("\r")
        start, number = end + 1, number + 1
    return None


def _header_fields(line: str, sep: str, where: str) -> list[str]:
    """The column names of a header line; one sentence (``where``: file and line) for a line that is no header."""
    if len(line) > MAX_HEADER_CHARS:
        raise InputError(f"the header line is {len(line)} characters long, more than column names take "
                         f"({MAX_HEADER_CHARS}): is this the format, and does the file start with its header?", where)
    try:
        fields = next(csv.reader([line], delimiter=sep))
    except csv.Error as exc:
        raise InputError(f"the header line cannot be split into {sep!r}-separated names: {exc}", where) from None
    return [f.strip().strip('"').strip() for f in fields]


def _text(values: pd.Series) -> pd.Series:
    """Any column as pandas strings (NaN where missing), positionally indexed."""
    return values.reset_index(drop=True).astype("str")


@dataclass
class _Table:
    """Data records of one or several files. ``fields`` holds the string fields of rows whose field count is
    right and NaN for the others; ``file_index`` / ``file_line`` say where each record comes from."""

    source_line: np.ndarray
    record: pd.Series
    n_fields: np.ndarray
    expected: int
    fields: pd.DataFrame
    file_index: np.ndarray
    file_line: np.ndarray
    file_labels: list[str]

    def __len__(self) -> int:
        return len(self.source_line)


def _csv_fields(line: str, sep: str) -> list[str] | None:
    """The fields of one line holding quotes, or None when its quoting is malformed."""
    try:
        return next(csv.reader([line], delimiter=sep, strict=True), [])
    except csv.Error:
        return None


def _split_fields(arr: pa.LargeStringArray, sep: str,
                  names: list[str]) -> tuple[pd.Series, np.ndarray, pd.DataFrame]:
    """Split lines into ``names`` string columns with Arrow compute kernels.

    Lines holding a quote go through the csv module (quoted separators); a row whose field count is wrong gets
    missing fields. Returns the lines, the field count of each and the fields.
    """
    expected = len(names)
    n_fields = pc.count_substring(arr, sep).to_numpy(zero_copy_only=False).astype(np.int64) + 1
    quoted = pc.match_substring(arr, '"').to_numpy(zero_copy_only=False).astype(bool)
    plain_ok = ~quoted & (n_fields == expected)
    kept = arr if plain_ok.all() else pc.if_else(pa.array(plain_ok), arr, pa.nulls(len(arr), pa.large_string()))
    parts = pc.split_pattern(kept, sep, max_splits=expected - 1)
    del kept
    fields = pd.DataFrame({name: pc.list_element(parts, j).to_pandas() for j, name in enumerate(names)})
    del parts
    if quoted.any():
        idx = np.flatnonzero(quoted)
        rows = [_csv_fields(line, sep) for line in arr.take(pa.array(idx)).to_pylist()]
        n_quoted = np.fromiter((BAD_QUOTING if r is None else len(r) for r in rows), dtype=np.int64,
                               count=len(rows))
        n_fields[idx] = n_quoted
        good = n_quoted == expected
        for j, name in enumerate(names):
            column = fields[name].astype(object)
            column.iloc[idx[good]] = [r[j] for r, g in zip(rows, good, strict=True) if g]
            fields[name] = column.astype("str")
    return arr.to_pandas(), n_fields, fields


def _looks_like_header(line: str, sep: str) -> bool:
    """True when none of the line's fields is a number."""
    values = pd.to_numeric(pd.Series(line.split(sep), dtype=object).str.strip(), errors="coerce")
    return bool(values.isna().all())


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root)) if root.is_dir() else path.name
    except ValueError:
        return str(path)


def _read_table(files: list[Path], root: Path, *, sep: str, names: list[str] | None, skip: int = 0,
                header: bool | None = True) -> tuple[_Table, list[str]]:
    """Read delimited files into a :class:`_Table`; return it with the column names.

    ``header``: True (the first non-blank line after ``skip`` names the columns), False (``names`` gives
    them), or None (auto: the first line is a header when none of its fields is a number). Files must agree on
    the header.
    """
    records: list[pa.LargeStringArray] = []
    source_line: list[np.ndarray] = []
    file_index: list[np.ndarray] = []
    file_line: list[np.ndarray] = []
    columns: list[str] | None = None
    offset = 0
    for k, path in enumerate(files):
        lines = _split_lines(_read_text(path))
        first = skip
        has_header = header
        if header is None:
            has_header = len(lines) > skip and _looks_like_header(lines[skip].as_py(), sep)
        if has_header:
            while first < len(lines) and not lines[first].as_py().strip():
                first += 1
            if first >= len(lines):
                offset += len(lines)
                continue
            found = _header_fields(lines[first].as_py(), sep, _where(path, first + 1))
            if columns is None:
                columns = found
            elif found != columns:
                raise InputError(f"the header {found} differs from the first file's header {columns}",
                                 _where(path, first + 1))
            first += 1
        body = lines.slice(first)
        keep = pc.not_equal(pc.utf8_trim_whitespace(body), "").to_numpy(zero_copy_only=False)  # blank lines go
        numbers = np.arange(first + 1, len(lines) + 1, dtype=np.int64)[keep]
        records.append(body if keep.all() else body.filter(pa.array(keep)))
        source_line.append(numbers + offset)
        file_line.append(numbers)
        file_index.append(np.full(len(numbers), k, dtype=np.int64))
        offset += len(lines)
        del lines, body  # the next file's lines are read while only this one's records are held
    if columns is None:
        if names is None:
            raise InputError("the file is empty: no header line, no data rows", _where(files[0]))
        columns = names
    data_lines = records[0] if len(records) == 1 else pa.concat_arrays(records or [pa.array([], pa.large_string())])
    del records
    record, n_fields, fields = _split_fields(data_lines, sep, columns)

    def joined(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)

    table = _Table(source_line=joined(source_line), record=record, n_fields=n_fields, expected=len(columns),
                   fields=fields, file_index=joined(file_index), file_line=joined(file_line),
                   file_labels=[_relative(p, root) for p in files])
    return table, columns


def _require_columns(found: list[str], wanted: dict[str, str], where: str, what: str = "header") -> None:
    """``wanted`` maps a role (object_id, t, lon, lat) to the source's column name."""
    missing = [c for c in wanted.values() if c not in found]
    if not missing:
        return
    if len(missing) == len(set(wanted.values())):
        raise InputError(f"the {what} has none of the expected columns {', '.join(wanted.values())}; "
                         f"found {', '.join(found)}", where)
    raise InputError(f"missing column(s) {', '.join(missing)}; found {', '.join(found)}", where)


def _require_rows(table: _Table, path: Path) -> None:
    if len(table) == 0:
        raise InputError("the source has no data rows", f"folder {path}" if path.is_dir() else _where(path))


class _Reasons:
    """Per-row reasons (a numpy object array, None for a good row), added by mask and joined with '; '."""

    def __init__(self, n: int):
        self.reason = np.full(n, None, dtype=object)

    def add(self, mask: np.ndarray | pd.Series, message: str | pd.Series | Callable[[], pd.Series]) -> None:
        """Add ``message`` (one text, or one per row by position) to the rows in ``mask``. A callable message
        is built only when some row needs it."""
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        if callable(message):
            message = message()
        if isinstance(message, str):
            msg = np.full(int(mask.sum()), message, dtype=object)
        else:
            msg = np.asarray(message, dtype=object)[mask]
        current = self.reason[mask]
        earlier = pd.notna(current)
        msg[earlier] = current[earlier] + "; " + msg[earlier]
        self.reason[mask] = msg

    @property
    def bad(self) -> np.ndarray:
        return pd.notna(self.reason)


def _quote(values: pd.Series) -> pd.Series:
    return "'" + values.astype(object).astype(str) + "'"


def _check_object_id(values: pd.Series, name: str, reasons: _Reasons, rows: np.ndarray) -> pd.Series:
    ids = _text(values).where(rows).str.strip()
    empty = rows & (ids.isna() | (ids == "")).to_numpy()
    reasons.add(empty, f"{name} (the object id) is empty")
    nul = rows & ~empty & ids.str.contains("\x00", regex=False).fillna(False).to_numpy(dtype=bool)
    reasons.add(nul, f"{name} (the object id) contains a NUL character")
    return ids


def _check_number(values: pd.Series, name: str, low: float, high: float, reasons: _Reasons,
                  rows: np.ndarray) -> np.ndarray:
    """Parse a coordinate column; reasons for empty, non-numeric, NaN and out-of-range values."""
    text = _text(values).where(rows).str.strip()
    number = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
    empty = rows & (text.isna() | (text == "")).to_numpy()
    reasons.add(empty, f"{name} is empty")
    spelled_nan = rows & text.str.lower().isin(_NAN_SPELLINGS).to_numpy()
    reasons.add(spelled_nan, f"{name} is NaN")
    junk = rows & ~empty & ~spelled_nan & np.isnan(number)
    reasons.add(junk, lambda: name + " " + _quote(text) + " is not a number")
    with np.errstate(invalid="ignore"):
        outside = rows & ~np.isnan(number) & ~((number >= low) & (number <= high))
    reasons.add(outside, lambda: name + " " + text.astype(object).astype(str)
                + f" is outside [{low:g}, {high:g}]")
    return number


def _is_utc(timezone: Any) -> bool:
    return timezone in ("UTC", dt.UTC)


def _localise(naive: pd.Series, timezone: Any) -> pd.Series:
    """Naive local times to UTC; times that do not exist or are ambiguous in ``timezone`` become NaT."""
    if _is_utc(timezone):
        return naive.dt.tz_localize("UTC")
    return naive.dt.tz_localize(timezone, ambiguous="NaT", nonexistent="NaT").dt.tz_convert("UTC")


def _check_time_format(fmt: str, where: str) -> None:
    """Refuse a ``time_format`` that strptime cannot use (an unknown directive, a repeated one)."""
    import re
    from datetime import datetime as dt

    try:
        dt.strptime(dt(2008, 2, 2, 13, 4, 5).strftime(fmt), fmt)
    except (ValueError, re.error) as exc:
        raise ParameterError(f"time_format {fmt!r} is not a usable strftime format: {exc}", where) from None


def _parse_times(text: pd.Series, time_format: str | None, timezone: Any, where: str) -> pd.Series:
    """Strings to ``datetime64[us, UTC]`` (NaT where they do not parse)."""
    fmt = time_format or ISO8601
    if fmt in UNIX_FORMATS:
        epoch = pd.to_numeric(text, errors="coerce")
        return pd.to_datetime(epoch, unit=UNIX_FORMATS[fmt], utc=True, errors="coerce").astype(
            "datetime64[us, UTC]")
    if fmt != ISO8601:
        _check_time_format(fmt, where)
    if _is_utc(timezone):
        return pd.to_datetime(text, format=fmt, errors="coerce", utc=True).astype("datetime64[us, UTC]")
    refusal = (f"the times carry their own UTC offsets, so timezone {timezone} does not apply: leave the "
               "timezone option out")
    try:
        parsed = pd.to_datetime(text, format=fmt, errors="coerce")
    except ValueError as exc:  # mixed offsets
        raise ParameterError(refusal, where) from exc
    if isinstance(parsed.dtype, pd.DatetimeTZDtype):
        raise ParameterError(refusal, where)
    return _localise(parsed, timezone).astype("datetime64[us, UTC]")


def _check_time(values: pd.Series, name: str, time_format: str | None, timezone: Any, reasons: _Reasons,
                rows: np.ndarray, where: str) -> pd.Series:
    text = _text(values).where(rows).str.strip()
    empty = rows & (text.isna() | (text == "")).to_numpy()
    reasons.add(empty, f"{name} is empty")
    parsed = _parse_times(text.where(~empty), time_format, timezone, where)
    # strptime's %S takes 60 and 61 and rolls them into the next minute: a plausible, wrong time. Refuse them.
    # (Arrow's RE2 kernel, vectorised; "(\D|$)" is the lookahead "(?!\d)" that RE2 lacks)
    seconds_60 = pc.match_substring_regex(pa.array(text, pa.large_string(), from_pandas=True), r"\d:\d\d:6[01](\D|$)")
    leap = rows & ~empty & parsed.notna().to_numpy() & seconds_60.fill_null(False).to_numpy(zero_copy_only=False)
    reasons.add(leap, lambda: name + " " + _quote(text) + " has a second of 60 or 61")
    parsed = parsed.where(~leap)
    failed = rows & ~empty & ~leap & parsed.isna().to_numpy()
    if failed.any() and not _is_utc(timezone) and time_format not in UNIX_FORMATS:
        naive = pd.to_datetime(text.where(failed), format=time_format or ISO8601, errors="coerce")
        gap = failed & naive.notna().to_numpy()
        reasons.add(gap, lambda: name + " " + _quote(text)
                    + f" does not exist or is ambiguous in timezone {timezone}")
        failed &= ~gap
    reasons.add(failed, lambda: name + " " + _quote(text) + f" does not parse as {time_format or ISO8601}")
    return parsed


def _assemble(table: _Table, reasons: _Reasons, object_id: pd.Series, t: pd.Series, lon: np.ndarray,
              lat: np.ndarray, files: list[Path]) -> ParsedSource:
    bad = reasons.bad
    good = ~bad
    points = pd.DataFrame({
        "source_line": table.source_line[good].astype(np.int64),
        "object_id": object_id[good].reset_index(drop=True).astype("str"),
        "t": t[good].reset_index(drop=True),
        "lon": lon[good],
        "lat": lat[good],
    })
    reason = pd.Series(reasons.reason[bad], dtype=object)
    if len(files) > 1 and bad.any():
        labels = np.asarray(table.file_labels, dtype=object)[table.file_index[bad]]
        reason = reason + " (file " + labels + ", line " + table.file_line[bad].astype(str) + ")"
    rejects = pd.DataFrame({
        "source_line": table.source_line[bad].astype(np.int64),
        "reason": reason.astype("str"),
        "record": table.record[bad].reset_index(drop=True).astype("str"),
    })
    return ParsedSource(points=points, rejects=rejects, n_read=len(table), files=tuple(files))


def _parse_table(table: _Table, files: list[Path], roles: dict[str, str], *, time_format: str | None,
                 timezone: Any, where: str, object_ids: pd.Series | None = None,
                 t_text: pd.Series | None = None) -> ParsedSource:
    """Check and convert the four columns named by ``roles`` (role -> column) of a table."""
    reasons = _Reasons(len(table))
    rows = table.n_fields == table.expected
    bad_quotes = table.n_fields == BAD_QUOTING
    reasons.add(bad_quotes, "the line's quotes are unbalanced or misplaced")
    reasons.add(~rows & ~bad_quotes, lambda: "wrong number of fields: "
                + pd.Series(table.n_fields).astype(str) + f", expected {table.expected}")
    f = table.fields
    object_id = _check_object_id(f[roles["object_id"]] if object_ids is None else object_ids,
                                 roles["object_id"], reasons, rows)
    t = _check_time(f[roles["t"]] if t_text is None else t_text, roles["t"], time_format, timezone, reasons,
                    rows, where)
    lon = _check_number(f[roles["lon"]], roles["lon"], -180.0, 180.0, reasons, rows)
    lat = _check_number(f[roles["lat"]], roles["lat"], -90.0, 90.0, reasons, rows)
    return _assemble(table, reasons, object_id, t, lon, lat, files)


def _check_timezone(timezone: Any) -> Any:
    if isinstance(timezone, dt.tzinfo):
        return timezone
    if not isinstance(timezone, str) or not timezone:
        raise ParameterError(f"timezone must be a zone name such as 'UTC' or 'Asia/Shanghai', got "
                             f"{timezone!r}", "option timezone")
    if timezone.upper() == "UTC":
        return "UTC"
    try:
        pd.Timestamp("2000-01-01").tz_localize(timezone)
    except Exception as exc:  # zoneinfo and pytz raise several unrelated types
        raise ParameterError(f"unknown timezone {timezone!r}", "option timezone") from exc
    return timezone


def _sorted_files(folder: Path, pattern: str) -> list[Path]:
    return sorted((p for p in folder.rglob(pattern) if p.is_file()), key=lambda p: str(p.relative_to(folder)))


# ------------------------------------------------------------------------------------------------------------
# The formats
# ------------------------------------------------------------------------------------------------------------

class SourceFormat:
    """A raw input format: which files a path stands for (:meth:`files`) and how to read them (:meth:`parse`).

    Options are validated on construction: an unknown option, or a missing required one, is a
    :class:`ParameterError` that lists the allowed ones.
    """

    name: ClassVar[str]
    REQUIRED: ClassVar[object] = object()
    allowed_options: ClassVar[dict[str, Any]] = {}  # option -> default (REQUIRED when there is none)
    option_help: ClassVar[dict[str, str]] = {}  # option -> what it means (``trajpub load --help``)
    summary: ClassVar[str]  # one line for ``trajpub load --help``

    def __init__(self, options: dict[str, Any] | None = None):
        options = dict(options or {})
        unknown = sorted(set(options) - set(self.allowed_options))
        if unknown:
            allowed = ", ".join(sorted(self.allowed_options)) or "none"
            raise ParameterError(f"unknown option(s) {', '.join(unknown)} for format {self.name}; "
                                 f"allowed: {allowed}", f"format {self.name}")
        merged = {k: options.get(k, default) for k, default in self.allowed_options.items()}
        missing = [k for k, v in merged.items() if v is SourceFormat.REQUIRED]
        if missing:
            raise ParameterError(f"format {self.name} needs option(s) {', '.join(missing)}",
                                 f"format {self.name}")
        self.options = merged

    @property
    def local_timezone(self) -> str | None:
        """The IANA zone the source's people live by (home/work inference reads hours in it), or None when the
        format does not say: the ``timezone`` option of formats that have one, unless it is UTC."""
        zone = self.options.get("timezone")
        return zone if isinstance(zone, str) and zone.upper() != "UTC" else None

    def files(self, path: str | Path) -> list[Path]:
        """The files ``path`` stands for, in the sorted order used for hashing and line numbering."""
        path = Path(path)
        _require_exists(path)
        if path.is_dir():
            raise InputError(f"format {self.name} reads one file, not a folder", f"folder {path}")
        return [path]

    def parse(self, path: str | Path) -> ParsedSource:
        raise NotImplementedError


class TDrive(SourceFormat):
    """Microsoft Research T-Drive taxi trajectories (Yuan et al., KDD 2010 / ACM GIS 2010).

    Either the per-taxi text files of the release (a ``*.txt`` file or a folder of them, lines
    ``taxi_id,YYYY-MM-DD HH:MM:SS,longitude,latitude``, no header) or one CSV with the header
    ``taxi_id,datetime,longitude,latitude`` (gzip read transparently). A first line none of whose fields is a
    number is taken as a header.

    T-Drive times are Beijing local time, UTC+8 (China has had no daylight saving time since 1991): they are
    converted to UTC by subtracting 8 hours.
    """

    name = "tdrive"
    summary = "T-Drive taxi files (*.txt, or a folder of them) or one CSV; times are Beijing time (UTC+8)"
    local_timezone = "Asia/Shanghai"
    COLUMNS: ClassVar[list[str]] = ["taxi_id", "datetime", "longitude", "latitude"]
    TIME_FORMAT = "%Y-%m-%d %H:%M:%S"

    def files(self, path: str | Path) -> list[Path]:
        path = Path(path)
        _require_exists(path)
        if not path.is_dir():
            return [path]
        found = _sorted_files(path, "*.txt")
        if not found:
            raise InputError("the folder holds no T-Drive *.txt files", f"folder {path}")
        return found

    def parse(self, path: str | Path) -> ParsedSource:
        path = Path(path)
        files = self.files(path)
        table, columns = _read_table(files, path, sep=",", names=self.COLUMNS, header=None)
        roles = dict(zip(("object_id", "t", "lon", "lat"), self.COLUMNS, strict=True))
        _require_columns(columns, roles, _where(files[0], 1))
        _require_rows(table, path)
        return _parse_table(table, files, roles, time_format=self.TIME_FORMAT, timezone=BEIJING,
                            where=_where(path))


class GeoLife(SourceFormat):
    """Microsoft Research GeoLife GPS trajectories (Zheng et al., IEEE Data Eng. Bull. 2010), three layouts:

    - the release layout ``Data/NNN/Trajectory/*.plt``, given the folder holding ``Data/``, ``Data/`` itself,
      a user folder or one ``.plt`` file. Each ``.plt`` has 6 header lines, then
      ``latitude,longitude,0,altitude_ft,days_since_1899,date,time``; the object id is the user folder.
    - the scikit-mobility CSV ``lat,lng,datetime,uid`` (object id = ``uid``).
    - the movingpandas CSV ``X;Y;fid;id;sequence;trajectory_id;tracker;t`` (X = lon, Y = lat, object id =
      ``tracker``, ``t`` with a ``+00`` offset).

    GeoLife times are GMT, i.e. UTC: no conversion.
    """

    name = "geolife"
    summary = "GeoLife .plt files (a file, user folder or Data/ folder) or its CSV exports; times are UTC"
    local_timezone = "Asia/Shanghai"  # its 182 users lived in Beijing (Zheng et al. 2010)
    PLT_COLUMNS: ClassVar[list[str]] = ["latitude", "longitude", "zero", "altitude", "days", "date", "time"]
    PLT_HEADER_LINES = 6
    SKMOB: ClassVar[dict[str, str]] = {"object_id": "uid", "t": "datetime", "lon": "lng", "lat": "lat"}
    MPD: ClassVar[dict[str, str]] = {"object_id": "tracker", "t": "t", "lon": "X", "lat": "Y"}

    def files(self, path: str | Path) -> list[Path]:
        path = Path(path)
        _require_exists(path)
        if not path.is_dir():
            return [path]
        found = _sorted_files(path, "*.plt")
        if not found:
            raise InputError("the folder holds no GeoLife .plt files (expected Data/NNN/Trajectory/*.plt)",
                             f"folder {path}")
        return found

    @staticmethod
    def _user(plt: Path) -> str:
        return plt.parent.parent.name if plt.parent.name.lower() == "trajectory" else plt.parent.name

    def parse(self, path: str | Path) -> ParsedSource:
        path = Path(path)
        files = self.files(path)
        if path.is_dir() or path.suffix.lower() == ".plt":
            return self._parse_plt(path, files)
        found_first = _first_line(_read_text(path))
        if found_first is None:
            raise InputError("the source has no data rows", _where(path))
        number, first = found_first
        sep = ";" if first.count(";") > first.count(",") else ","
        found = _header_fields(first, sep, _where(path, number))
        roles = self.MPD if set(self.MPD.values()) <= set(found) else self.SKMOB
        if not set(roles.values()) <= set(found):
            raise InputError("the header matches no GeoLife layout: expected lat,lng,datetime,uid or "
                             f"X;Y;...;tracker;t; found {', '.join(found)[:200]}", _where(path, number))
        table, _ = _read_table(files, path, sep=sep, names=None, header=True)
        _require_rows(table, path)
        fmt = ISO8601 if roles is self.MPD else "%Y-%m-%d %H:%M:%S"
        return _parse_table(table, files, roles, time_format=fmt, timezone="UTC", where=_where(path))

    def _parse_plt(self, path: Path, files: list[Path]) -> ParsedSource:
        table, _ = _read_table(files, path, sep=",", names=self.PLT_COLUMNS, skip=self.PLT_HEADER_LINES,
                               header=False)
        _require_rows(table, path)
        users = np.asarray([self._user(p) for p in files], dtype=object)[table.file_index]
        object_ids = pd.Series(users, dtype="str").where(table.n_fields == table.expected)
        t_text = table.fields["date"].str.strip() + " " + table.fields["time"].str.strip()
        roles = {"object_id": "user folder", "t": "date time", "lon": "longitude", "lat": "latitude"}
        return _parse_table(table, files, roles, time_format="%Y-%m-%d %H:%M:%S", timezone="UTC",
                            where=f"folder {path}" if path.is_dir() else _where(path),
                            object_ids=object_ids, t_text=t_text)


class DelimitedText(SourceFormat):
    """A generic delimited text file with a header line (gzip read transparently).

    Options: ``object_id``, ``t``, ``lon``, ``lat`` (the file's column names, required); ``sep`` (default
    ``,``); ``timezone`` of times without a UTC offset (default ``UTC``; an IANA name such as
    ``Europe/Paris``, where local times that do not exist or are ambiguous at a daylight-saving change are
    rejected); ``time_format`` (a ``strftime`` format, ``ISO8601`` (the default), or ``unix`` / ``unix_ms``
    for epoch seconds / milliseconds). Times with an explicit UTC offset are converted to UTC. Fields may be
    quoted; a quoted field cannot span lines.
    """

    name = "csv"
    summary = "a delimited text file with a header line (gzip read transparently)"
    allowed_options: ClassVar[dict[str, Any]] = {
        "object_id": SourceFormat.REQUIRED, "t": SourceFormat.REQUIRED, "lon": SourceFormat.REQUIRED,
        "lat": SourceFormat.REQUIRED, "sep": ",", "timezone": "UTC", "time_format": None}
    option_help: ClassVar[dict[str, str]] = {
        "object_id": "the column holding each object's id (the person or vehicle a release protects)",
        "t": "the column holding the time",
        "lon": "the column holding the longitude (degrees, EPSG:4326)",
        "lat": "the column holding the latitude (degrees, EPSG:4326)",
        "sep": "the field separator, one character",
        "timezone": TIMEZONE_HELP,
        "time_format": TIME_FORMAT_HELP}

    def __init__(self, options: dict[str, Any] | None = None):
        super().__init__(options)
        sep = self.options["sep"]
        if not isinstance(sep, str) or len(sep) != 1 or sep in '"\r\n':
            raise ParameterError(f"sep must be one character other than a quote or newline, got {sep!r}",
                                 "option sep")
        self.options["timezone"] = _check_timezone(self.options["timezone"])

    def parse(self, path: str | Path) -> ParsedSource:
        path = Path(path)
        files = self.files(path)
        table, columns = _read_table(files, path, sep=self.options["sep"], names=None, header=True)
        roles = {k: str(self.options[k]) for k in ("object_id", "t", "lon", "lat")}
        _require_columns(columns, roles, _where(path, 1))
        _require_rows(table, path)
        return _parse_table(table, files, roles, time_format=self.options["time_format"],
                            timezone=self.options["timezone"], where=_where(path))


class _OgrPoints(SourceFormat):
    """Point layers read with pyogrio.

    Options: ``layer`` (required when the file has several), ``object_id`` and ``t`` (attribute names, default
    ``object_id`` and ``t``), ``time_format`` and ``timezone`` for string or naive times (as for
    :class:`DelimitedText`).

    A layer in another CRS is reprojected to EPSG:4326; a layer with no CRS is an :class:`InputError` (an
    unknown SRID must not slip in). Records that are not a single non-empty Point are rejected with their
    geometry type. ``source_line`` is the 1-based position of the feature in the layer; a rejected record is
    kept as GeoJSON, with its coordinates as read.
    """

    allowed_options: ClassVar[dict[str, Any]] = {
        "layer": None, "object_id": "object_id", "t": "t", "time_format": None, "timezone": "UTC"}
    option_help: ClassVar[dict[str, str]] = {
        "layer": "the layer to read (needed when the file has several)",
        "object_id": "the attribute holding each object's id (the person or vehicle a release protects)",
        "t": "the attribute holding the time",
        "time_format": TIME_FORMAT_HELP,
        "timezone": TIMEZONE_HELP}

    def __init__(self, options: dict[str, Any] | None = None):
        super().__init__(options)
        self.options["timezone"] = _check_timezone(self.options["timezone"])

    def _declared_crs_problem(self, path: Path) -> str | None:
        """A reason to refuse the file's CRS declaration that GDAL does not report (None: no problem)."""
        return None

    def _layer(self, path: Path) -> str:
        import pyogrio

        try:
            layers = [str(name) for name, _ in pyogrio.list_layers(path)]
        except Exception as exc:  # pyogrio raises DataSourceError and friends
            raise InputError(f"cannot open the file as {self.name}: {exc}", _where(path)) from exc
        layer = self.options["layer"]
        if layer is None:
            if len(layers) != 1:
                raise InputError(f"the file has {len(layers)} layers ({', '.join(layers)}): choose one with "
                                 "the layer option", _where(path))
            return layers[0]
        if layer not in layers:
            raise InputError(f"no layer {layer!r}; the file has {', '.join(layers)}", _where(path))
        return str(layer)

    def parse(self, path: str | Path) -> ParsedSource:
        import pyogrio
        import shapely

        path = Path(path)
        files = self.files(path)
        if path.stat().st_size == 0:
            raise InputError("the file is empty", _where(path))
        problem = self._declared_crs_problem(path)
        layer = self._layer(path)
        where = f"{_where(path)}, layer {layer}"
        gdf = pyogrio.read_dataframe(path, layer=layer)
        if len(gdf) == 0:
            raise InputError("the layer has no features", where)
        if problem is not None:
            raise InputError(problem, where)
        if gdf.crs is None:
            raise InputError("the layer has no CRS, so its coordinates cannot be placed on EPSG:4326; assign "
                             "one (e.g. ogr2ogr -a_srs) before loading", where)
        roles = {"object_id": str(self.options["object_id"]), "t": str(self.options["t"])}
        _require_columns([str(c) for c in gdf.columns if c != gdf.geometry.name], roles, where, "layer")
        gdf = gdf.reset_index(drop=True)

        n = len(gdf)
        reasons = _Reasons(n)
        geoms = gdf.geometry.array
        missing = shapely.is_missing(geoms)
        reasons.add(missing, "geometry is missing")
        point = ~missing & (shapely.get_type_id(geoms) == 0)
        reasons.add(~missing & ~point, lambda: "geometry is a " + gdf.geometry.geom_type.astype(object)
                    + ", expected a Point")
        empty = point & shapely.is_empty(geoms)
        reasons.add(empty, "geometry is an empty Point")
        usable = point & ~empty

        lon = np.full(n, np.nan)
        lat = np.full(n, np.nan)
        if usable.any():
            pts = gdf.geometry[usable]
            if gdf.crs.to_epsg() != 4326:
                pts = pts.to_crs(4326)
            lon[usable] = shapely.get_x(pts.array)
            lat[usable] = shapely.get_y(pts.array)
        for values, name, bound in ((lon, "longitude", 180.0), (lat, "latitude", 90.0)):
            reasons.add(usable & np.isnan(values), f"{name} is NaN")
            with np.errstate(invalid="ignore"):
                outside = usable & ~np.isnan(values) & ~(np.abs(values) <= bound)
            reasons.add(outside, lambda v=values, nm=name, b=bound: nm + " "
                        + pd.Series(v).map(repr).astype(object) + f" is outside [{-b:g}, {b:g}]")

        every = np.ones(n, dtype=bool)
        object_id = _check_object_id(gdf[roles["object_id"]], roles["object_id"], reasons, every)
        t = self._times(gdf[roles["t"]], roles["t"], reasons, every, where)
        position = np.arange(1, n + 1, dtype=np.int64)
        table = _Table(source_line=position, record=self._records(gdf, reasons.bad),
                       n_fields=np.ones(n, dtype=np.int64), expected=1, fields=pd.DataFrame(index=range(n)),
                       file_index=np.zeros(n, dtype=np.int64), file_line=position, file_labels=[path.name])
        return _assemble(table, reasons, object_id, t, lon, lat, files)

    def _times(self, values: pd.Series, name: str, reasons: _Reasons, rows: np.ndarray,
               where: str) -> pd.Series:
        """A datetime attribute is taken as is (naive ones in ``timezone``); a text one is parsed."""
        values = values.reset_index(drop=True)
        timezone = self.options["timezone"]
        if not pd.api.types.is_datetime64_any_dtype(values.dtype):
            return _check_time(values, name, self.options["time_format"], timezone, reasons, rows, where)
        reasons.add(values.isna().to_numpy(), f"{name} is empty")
        if isinstance(values.dtype, pd.DatetimeTZDtype):
            return values.dt.tz_convert("UTC").astype("datetime64[us, UTC]")
        t = _localise(values, timezone).astype("datetime64[us, UTC]")
        gap = values.notna().to_numpy() & t.isna().to_numpy()
        reasons.add(gap, lambda: name + " " + _quote(values)
                    + f" does not exist or is ambiguous in timezone {timezone}")
        return t

    @staticmethod
    def _records(gdf: Any, bad: np.ndarray) -> pd.Series:
        """GeoJSON of the rejected features (as read, before any reprojection); empty text for the others."""
        record = pd.Series(np.full(len(gdf), "", dtype=object), dtype=object)
        if bad.any():
            rows = np.flatnonzero(bad)
            features = json.loads(gdf.iloc[rows].to_json(na="null", drop_id=True, default=str))["features"]
            record.iloc[rows] = [json.dumps(f, sort_keys=True) for f in features]
        return record


class GeoPackage(_OgrPoints):
    __doc__ = "A GeoPackage point layer. " + (_OgrPoints.__doc__ or "")
    name = "gpkg"
    summary = "a GeoPackage point layer (reprojected to EPSG:4326)"


class GeoJSON(_OgrPoints):
    __doc__ = (
        "A GeoJSON FeatureCollection of points. Without a ``crs`` member the coordinates are WGS 84 "
        "longitude/latitude, as RFC 7946 (sec. 4) defines (GDAL reads them as EPSG:4326); a "
        "``\"crs\": null`` member means no CRS can be assumed (GeoJSON 2008, sec. 3) and is an InputError; "
        "any other ``crs`` is honoured and reprojected. Coordinates outside lon/lat range (e.g. metres in a "
        "file without ``crs``) are rejected row by row. " + (_OgrPoints.__doc__ or ""))
    name = "geojson"
    summary = "a GeoJSON FeatureCollection of points (WGS 84 unless it names a CRS)"

    def _declared_crs_problem(self, path: Path) -> str | None:
        try:
            document = json.loads(_read_text(path))
        except json.JSONDecodeError as exc:
            raise InputError(f"the file is not valid JSON: {exc.msg}", _where(path, exc.lineno)) from exc
        if isinstance(document, dict) and "crs" in document and document["crs"] is None:
            return ('the GeoJSON has "crs": null, which means no CRS can be assumed (GeoJSON 2008, sec. 3); '
                    "remove the member for WGS 84 or name the CRS")
        return None


FORMATS: dict[str, type[SourceFormat]] = {
    f.name: f for f in (TDrive, GeoLife, DelimitedText, GeoPackage, GeoJSON)}


def options_help(width: int = 100) -> str:
    """Every format and its ``--option KEY=VALUE`` options with their meaning and default, for ``trajpub load
    --help``."""
    lines = []
    for name, cls in FORMATS.items():
        lines += textwrap.wrap(f"{name}: {cls.summary}" + ("" if cls.allowed_options else "; no options"),
                               width=width, subsequent_indent="    ")
        for option, default in cls.allowed_options.items():
            given = ("required" if default is SourceFormat.REQUIRED else "optional" if default is None
                     else f"default {default}")
            lines += textwrap.wrap(f"{option} ({given}): {cls.option_help[option]}", width=width,
                                   initial_indent="  ", subsequent_indent="      ")
    return "\n".join(lines)


def get_format(fmt: str, options: dict[str, Any] | None = None) -> SourceFormat:
    """The reader for ``fmt``, its options validated (a ParameterError lists the allowed formats/options)."""
    if fmt not in FORMATS:
        raise ParameterError(f"unknown format {fmt!r}; allowed: {', '.join(FORMATS)}", "trajpub load FORMAT")
    return FORMATS[fmt](options)


def parse(fmt: str, path: str | Path, options: dict[str, Any] | None = None) -> ParsedSource:
    """Read ``path`` in format ``fmt`` into points and rejects."""
    return get_format(fmt, options).parse(path)
