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
quote character are split one by one (by the csv module); that machinery is :mod:`trajpub.source_text`. The
whole source is held in memory.

Pure pandas/numpy/pyarrow/pyogrio: no database here.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from trajpub.errors import InputError, ParameterError
from trajpub.source_text import (
    BEIJING,
    ISO8601,
    TIME_FORMAT_HELP,
    TIMEZONE_HELP,
    ParsedSource,
    Reasons,
    Table,
    assemble,
    check_object_id,
    check_time,
    check_timezone,
    first_line,
    header_fields,
    localise,
    parse_table,
    quote,
    read_table,
    read_text,
    require_columns,
    require_exists,
    require_rows,
    sorted_files,
    source_location,
)

# ------------------------------------------------------------------------------------------------------------
# The formats
# ------------------------------------------------------------------------------------------------------------

class SourceFormat:
    """A raw input format: which files a path stands for (:meth:`files`) and how to read them (:meth:`parse`).

    Options are validated on construction: an unknown option, or a missing required one, is a
    :class:`ParameterError` that lists the allowed ones; a ``timezone`` option must name a known zone.
    """

    name: ClassVar[str]
    REQUIRED: ClassVar[object] = object()
    allowed_options: ClassVar[dict[str, Any]] = {}  # option -> default (REQUIRED when there is none)
    option_help: ClassVar[dict[str, str]] = {}  # option -> what it means (``trajpub load --help``)
    summary: ClassVar[str]  # one line for ``trajpub load --help``
    folder_files: ClassVar[tuple[str, str] | None] = None  # (glob, what they are) when a folder of files is a source

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
        if "timezone" in merged:
            merged["timezone"] = check_timezone(merged["timezone"])
        self.options = merged

    @property
    def local_timezone(self) -> str | None:
        """The IANA zone the source's people live by (home/work inference reads hours in it), or None when the
        format does not say: the ``timezone`` option of formats that have one, unless it is UTC."""
        zone = self.options.get("timezone")
        return zone if isinstance(zone, str) and zone.upper() != "UTC" else None

    def files(self, path: str | Path) -> list[Path]:
        """The files ``path`` stands for, in the sorted order used for hashing and line numbering: the file itself,
        or the files of :attr:`folder_files` below a folder (a format without them refuses a folder)."""
        path = Path(path)
        require_exists(path)
        if not path.is_dir():
            return [path]
        if self.folder_files is None:
            raise InputError(f"format {self.name} reads one file, not a folder", f"folder {path}")
        pattern, what = self.folder_files
        found = sorted_files(path, pattern)
        if not found:
            raise InputError(f"the folder holds no {what}", f"folder {path}")
        return found

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
    folder_files = ("*.txt", "T-Drive *.txt files")

    def parse(self, path: str | Path) -> ParsedSource:
        path = Path(path)
        files = self.files(path)
        table, columns = read_table(files, path, sep=",", names=self.COLUMNS, header=None)
        roles = dict(zip(("object_id", "t", "lon", "lat"), self.COLUMNS, strict=True))
        require_columns(columns, roles, source_location(files[0], 1))
        require_rows(table, path)
        return parse_table(table, files, roles, time_format=self.TIME_FORMAT, timezone=BEIJING,
                            where=source_location(path))


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
    folder_files = ("*.plt", "GeoLife .plt files (expected Data/NNN/Trajectory/*.plt)")

    @staticmethod
    def _user(plt: Path) -> str:
        return plt.parent.parent.name if plt.parent.name.lower() == "trajectory" else plt.parent.name

    def parse(self, path: str | Path) -> ParsedSource:
        path = Path(path)
        files = self.files(path)
        if path.is_dir() or path.suffix.lower() == ".plt":
            return self._parse_plt(path, files)
        found_first = first_line(read_text(path))
        if found_first is None:
            raise InputError("the source has no data rows", source_location(path))
        number, first = found_first
        sep = ";" if first.count(";") > first.count(",") else ","
        found = header_fields(first, sep, source_location(path, number))
        roles = self.MPD if set(self.MPD.values()) <= set(found) else self.SKMOB
        if not set(roles.values()) <= set(found):
            raise InputError("the header matches no GeoLife layout: expected lat,lng,datetime,uid or "
                             f"X;Y;...;tracker;t; found {', '.join(found)[:200]}", source_location(path, number))
        table, _ = read_table(files, path, sep=sep, names=None, header=True)
        require_rows(table, path)
        fmt = ISO8601 if roles is self.MPD else "%Y-%m-%d %H:%M:%S"
        return parse_table(table, files, roles, time_format=fmt, timezone="UTC", where=source_location(path))

    def _parse_plt(self, path: Path, files: list[Path]) -> ParsedSource:
        table, _ = read_table(files, path, sep=",", names=self.PLT_COLUMNS, skip=self.PLT_HEADER_LINES,
                               header=False)
        require_rows(table, path)
        users = np.asarray([self._user(p) for p in files], dtype=object)[table.file_index]
        object_ids = pd.Series(users, dtype="str").where(table.n_fields == table.expected)
        t_text = table.fields["date"].str.strip() + " " + table.fields["time"].str.strip()
        roles = {"object_id": "user folder", "t": "date time", "lon": "longitude", "lat": "latitude"}
        return parse_table(table, files, roles, time_format="%Y-%m-%d %H:%M:%S", timezone="UTC",
                            where=f"folder {path}" if path.is_dir() else source_location(path),
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

    def parse(self, path: str | Path) -> ParsedSource:
        path = Path(path)
        files = self.files(path)
        table, columns = read_table(files, path, sep=self.options["sep"], names=None, header=True)
        roles = {k: str(self.options[k]) for k in ("object_id", "t", "lon", "lat")}
        require_columns(columns, roles, source_location(path, 1))
        require_rows(table, path)
        return parse_table(table, files, roles, time_format=self.options["time_format"],
                            timezone=self.options["timezone"], where=source_location(path))


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

    def _declared_crs_problem(self, path: Path) -> str | None:
        """A reason to refuse the file's CRS declaration that GDAL does not report (None: no problem)."""
        return None

    def _layer(self, path: Path) -> str:
        import pyogrio

        try:
            layers = [str(name) for name, _ in pyogrio.list_layers(path)]
        except Exception as exc:  # pyogrio raises DataSourceError and friends
            raise InputError(f"cannot open the file as {self.name}: {exc}", source_location(path)) from exc
        layer = self.options["layer"]
        if layer is None:
            if len(layers) != 1:
                raise InputError(f"the file has {len(layers)} layers ({', '.join(layers)}): choose one with "
                                 "the layer option", source_location(path))
            return layers[0]
        if layer not in layers:
            raise InputError(f"no layer {layer!r}; the file has {', '.join(layers)}", source_location(path))
        return str(layer)

    def parse(self, path: str | Path) -> ParsedSource:
        import pyogrio
        import shapely

        path = Path(path)
        files = self.files(path)
        if path.stat().st_size == 0:
            raise InputError("the file is empty", source_location(path))
        problem = self._declared_crs_problem(path)
        layer = self._layer(path)
        where = f"{source_location(path)}, layer {layer}"
        gdf = pyogrio.read_dataframe(path, layer=layer)
        if len(gdf) == 0:
            raise InputError("the layer has no features", where)
        if problem is not None:
            raise InputError(problem, where)
        if gdf.crs is None:
            raise InputError("the layer has no CRS, so its coordinates cannot be placed on EPSG:4326; assign "
                             "one (e.g. ogr2ogr -a_srs) before loading", where)
        roles = {"object_id": str(self.options["object_id"]), "t": str(self.options["t"])}
        require_columns([str(c) for c in gdf.columns if c != gdf.geometry.name], roles, where, "layer")
        gdf = gdf.reset_index(drop=True)

        n = len(gdf)
        reasons = Reasons(n)
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
        object_id = check_object_id(gdf[roles["object_id"]], roles["object_id"], reasons, every)
        t = self._times(gdf[roles["t"]], roles["t"], reasons, every, where)
        position = np.arange(1, n + 1, dtype=np.int64)
        table = Table(source_line=position, record=self._records(gdf, reasons.bad),
                       n_fields=np.ones(n, dtype=np.int64), expected=1, fields=pd.DataFrame(index=range(n)),
                       file_index=np.zeros(n, dtype=np.int64), file_line=position, file_labels=[path.name])
        return assemble(table, reasons, object_id, t, lon, lat, files)

    def _times(self, values: pd.Series, name: str, reasons: Reasons, rows: np.ndarray,
               where: str) -> pd.Series:
        """A datetime attribute is taken as is (naive ones in ``timezone``); a text one is parsed."""
        values = values.reset_index(drop=True)
        timezone = self.options["timezone"]
        if not pd.api.types.is_datetime64_any_dtype(values.dtype):
            return check_time(values, name, self.options["time_format"], timezone, reasons, rows, where)
        reasons.add(values.isna().to_numpy(), f"{name} is empty")
        if isinstance(values.dtype, pd.DatetimeTZDtype):
            return values.dt.tz_convert("UTC").astype("datetime64[us, UTC]")
        t = localise(values, timezone).astype("datetime64[us, UTC]")
        gap = values.notna().to_numpy() & t.isna().to_numpy()
        reasons.add(gap, lambda: name + " " + quote(values)
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
            document = json.loads(read_text(path))
        except json.JSONDecodeError as exc:
            raise InputError(f"the file is not valid JSON: {exc.msg}", source_location(path, exc.lineno)) from exc
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
