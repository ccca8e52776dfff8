"""The machinery every text reader of :mod:`trajpub.formats` shares: reading a file's text, splitting lines into
fields with Arrow kernels (the csv module only for lines holding a quote), checking identifiers, numbers and times
column by column into one-sentence reasons, and assembling the points and the rejects of a
:class:`ParsedSource` (``len(points) + len(rejects) == n_read``).

Pure pandas/numpy/pyarrow: no database here.
"""


from __future__ import annotations

import csv
import datetime as dt
import gzip
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

def source_location(path: Path, line: int | None = None) -> str:
    return f"file {path}" if line is None else f"file {path}, line {line}"


def require_exists(path: Path) -> None:
    if not path.exists():
        raise InputError("the file does not exist", source_location(path))


def read_text(path: Path) -> str:
    """The file's text (gzip is recognised by its magic bytes and read transparently)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise InputError(f"the gzip stream is corrupt: {exc}", source_location(path)) from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"the file is not UTF-8 text (byte {data[exc.start]:#04x})",
                         source_location(path, line)) from exc


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


def first_line(text: str) -> tuple[int, str] | None:
    """The first non-blank line of ``text`` and its number (None when every line is blank)."""
    start, number = 0, 1
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if text[start:end].strip():
            return number, text[start:end].rstrip("\r")
        start, number = end + 1, number + 1
    return None


def header_fields(line: str, sep: str, where: str) -> list[str]:
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
class Table:
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


def read_table(files: list[Path], root: Path, *, sep: str, names: list[str] | None, skip: int = 0,
                header: bool | None = True) -> tuple[Table, list[str]]:
    """Read delimited files into a :class:`Table`; return it with the column names.

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
        lines = _split_lines(read_text(path))
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
            found = header_fields(lines[first].as_py(), sep, source_location(path, first + 1))
            if columns is None:
                columns = found
            elif found != columns:
                raise InputError(f"the header {found} differs from the first file's header {columns}",
                                 source_location(path, first + 1))
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
            raise InputError("the file is empty: no header line, no data rows", source_location(files[0]))
        columns = names
    data_lines = records[0] if len(records) == 1 else pa.concat_arrays(records or [pa.array([], pa.large_string())])
    del records
    record, n_fields, fields = _split_fields(data_lines, sep, columns)

    def joined(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)

    table = Table(source_line=joined(source_line), record=record, n_fields=n_fields, expected=len(columns),
                   fields=fields, file_index=joined(file_index), file_line=joined(file_line),
                   file_labels=[_relative(p, root) for p in files])
    return table, columns


def require_columns(found: list[str], wanted: dict[str, str], where: str, what: str = "header") -> None:
    """``wanted`` maps a role (object_id, t, lon, lat) to the source's column name."""
    missing = [c for c in wanted.values() if c not in found]
    if not missing:
        return
    if len(missing) == len(set(wanted.values())):
        raise InputError(f"the {what} has none of the expected columns {', '.join(wanted.values())}; "
                         f"found {', '.join(found)}", where)
    raise InputError(f"missing column(s) {', '.join(missing)}; found {', '.join(found)}", where)


def require_rows(table: Table, path: Path) -> None:
    if len(table) == 0:
        raise InputError("the source has no data rows", f"folder {path}" if path.is_dir() else source_location(path))


class Reasons:
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


def quote(values: pd.Series) -> pd.Series:
    return "'" + values.astype(object).astype(str) + "'"


def check_object_id(values: pd.Series, name: str, reasons: Reasons, rows: np.ndarray) -> pd.Series:
    ids = _text(values).where(rows).str.strip()
    empty = rows & (ids.isna() | (ids == "")).to_numpy()
    reasons.add(empty, f"{name} (the object id) is empty")
    nul = rows & ~empty & ids.str.contains("\x00", regex=False).fillna(False).to_numpy(dtype=bool)
    reasons.add(nul, f"{name} (the object id) contains a NUL character")
    return ids


def _check_number(values: pd.Series, name: str, low: float, high: float, reasons: Reasons,
                  rows: np.ndarray) -> np.ndarray:
    """Parse a coordinate column; reasons for empty, non-numeric, NaN and out-of-range values."""
    text = _text(values).where(rows).str.strip()
    number = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
    empty = rows & (text.isna() | (text == "")).to_numpy()
    reasons.add(empty, f"{name} is empty")
    spelled_nan = rows & text.str.lower().isin(_NAN_SPELLINGS).to_numpy()
    reasons.add(spelled_nan, f"{name} is NaN")
    junk = rows & ~empty & ~spelled_nan & np.isnan(number)
    reasons.add(junk, lambda: name + " " + quote(text) + " is not a number")
    with np.errstate(invalid="ignore"):
        outside = rows & ~np.isnan(number) & ~((number >= low) & (number <= high))
    reasons.add(outside, lambda: name + " " + text.astype(object).astype(str)
                + f" is outside [{low:g}, {high:g}]")
    return number


def _is_utc(timezone: Any) -> bool:
    return timezone in ("UTC", dt.UTC)


def localise(naive: pd.Series, timezone: Any) -> pd.Series:
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


def parse_times(text: pd.Series, time_format: str | None, timezone: Any, where: str) -> pd.Series:
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
    return localise(parsed, timezone).astype("datetime64[us, UTC]")


def check_time(values: pd.Series, name: str, time_format: str | None, timezone: Any, reasons: Reasons,
                rows: np.ndarray, where: str) -> pd.Series:
    text = _text(values).where(rows).str.strip()
    empty = rows & (text.isna() | (text == "")).to_numpy()
    reasons.add(empty, f"{name} is empty")
    parsed = parse_times(text.where(~empty), time_format, timezone, where)
    # strptime's %S takes 60 and 61 and rolls them into the next minute: a plausible, wrong time. Refuse them.
    # (Arrow's RE2 kernel, vectorised; "(\D|$)" is the lookahead "(?!\d)" that RE2 lacks)
    seconds_60 = pc.match_substring_regex(pa.array(text, pa.large_string(), from_pandas=True), r"\d:\d\d:6[01](\D|$)")
    leap = rows & ~empty & parsed.notna().to_numpy() & seconds_60.fill_null(False).to_numpy(zero_copy_only=False)
    reasons.add(leap, lambda: name + " " + quote(text) + " has a second of 60 or 61")
    parsed = parsed.where(~leap)
    failed = rows & ~empty & ~leap & parsed.isna().to_numpy()
    if failed.any() and not _is_utc(timezone) and time_format not in UNIX_FORMATS:
        naive = pd.to_datetime(text.where(failed), format=time_format or ISO8601, errors="coerce")
        gap = failed & naive.notna().to_numpy()
        reasons.add(gap, lambda: name + " " + quote(text)
                    + f" does not exist or is ambiguous in timezone {timezone}")
        failed &= ~gap
    reasons.add(failed, lambda: name + " " + quote(text) + f" does not parse as {time_format or ISO8601}")
    return parsed


def assemble(table: Table, reasons: Reasons, object_id: pd.Series, t: pd.Series, lon: np.ndarray,
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


def parse_table(table: Table, files: list[Path], roles: dict[str, str], *, time_format: str | None,
                 timezone: Any, where: str, object_ids: pd.Series | None = None,
                 t_text: pd.Series | None = None) -> ParsedSource:
    """Check and convert the four columns named by ``roles`` (role -> column) of a table."""
    reasons = Reasons(len(table))
    rows = table.n_fields == table.expected
    bad_quotes = table.n_fields == BAD_QUOTING
    reasons.add(bad_quotes, "the line's quotes are unbalanced or misplaced")
    reasons.add(~rows & ~bad_quotes, lambda: "wrong number of fields: "
                + pd.Series(table.n_fields).astype(str) + f", expected {table.expected}")
    f = table.fields
    object_id = check_object_id(f[roles["object_id"]] if object_ids is None else object_ids,
                                 roles["object_id"], reasons, rows)
    t = check_time(f[roles["t"]] if t_text is None else t_text, roles["t"], time_format, timezone, reasons,
                    rows, where)
    lon = _check_number(f[roles["lon"]], roles["lon"], -180.0, 180.0, reasons, rows)
    lat = _check_number(f[roles["lat"]], roles["lat"], -90.0, 90.0, reasons, rows)
    return assemble(table, reasons, object_id, t, lon, lat, files)


def check_timezone(timezone: Any) -> Any:
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


def sorted_files(folder: Path, pattern: str) -> list[Path]:
    return sorted((p for p in folder.rglob(pattern) if p.is_file()), key=lambda p: str(p.relative_to(folder)))
