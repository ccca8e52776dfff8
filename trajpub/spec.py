"""The release spec: what a data engineer writes to ask for a release (YAML or flags).

Every section is a frozen dataclass that validates itself; unknown keys are errors that name the key and the
allowed ones, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from trajpub.config import PROJECT_ROOT
from trajpub.errors import ParameterError
from trajpub.grid import GridSpec
from trajpub.identity import canonical_identity
from trajpub.window import ALIGNMENTS, WEEKDAYS, RelativeWindow
from trajpub.yamlfile import read_yaml

DATASET_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
POLICY_NAME = DATASET_NAME  # registered gate policies: governance.gate_policies (tasks/policies.py)
EXAMPLES_DIR = PROJECT_ROOT / "flows" / "specs"

#: The run form's words (the Prefect UI draws a deployment's custom-run form from the spec's JSON schema): a title
#: and a plain description per field, no markup.
FORM_DESCRIPTION = ("One governed release: which data (dataset, bounding box, time window), which mechanism with "
                    "which parameters, and who asks. The run is planned, charged, validated, protected, audited "
                    "and reviewed by a steward before anything is published.")
FORM_FIELDS = {
    "dataset": ("Dataset", "The loaded dataset to release (trajpub dataset list)."),
    "bbox": ("Bounding box", ("The public area, four numbers in degrees: min longitude, min latitude, max longitude, "
                             "max latitude. Points outside it are quarantined.")),
    "mechanism": ("Mechanism", "The privacy mechanism, e.g. citytrace, objtrace, glove."),
    "params": ("Mechanism parameters", ("The mechanism's parameters, e.g. {\"epsilon\": 5}; omitted ones take the "
                                       "mechanism's defaults.")),
    "window_start": ("Window start", ("First instant read, an ISO date or time (UTC unless it carries an offset), "
                                     "e.g. 2008-02-04. Leave empty with a relative window.")),
    "window_end": ("Window end", ("First instant not read (excluded), an ISO date or time, e.g. 2008-02-11. Leave "
                                 "empty with a relative window.")),
    "window": ("Relative window", ("Instead of a start and an end: e.g. {\"last\": \"7d\", \"align\": \"local_week\", "
                                  "\"week_starts\": \"sunday\"}, resolved in the dataset's time zone when the run "
                                  "starts. A run started by hand releases the last complete window that holds data.")),
    "requested_by": ("Requested by", "Who asks: a registered requester or a steward's login."),
    "validation": ("Validation", "How much bad raw data a release tolerates before it fails."),
    "prepare": ("Preparation", "How points become trajectories and grid cells."),
    "gate_policy": ("Gate policy", ("Optional: a registered policy at least as strict as the dataset's (its name, or "
                                   "its name and version). Empty: the dataset's policy.")),
    "approval_timeout_s": ("Approval timeout (seconds)", ("How long the run waits for the steward; the release then "
                                                         "stays awaiting approval.")),
    "queue_timeout_s": ("Queue timeout (seconds)", ("How long the run waits while another release of the dataset "
                                                   "computes.")),
    "time_precision_s": ("Time precision (seconds)", "Released timestamps are floored to this many seconds."),
}
SECTION_FORM_FIELDS = {
    "validation": {
        "max_speed_mps": ("Maximum speed (m/s)", ("A point reached faster than this from the previous one is "
                                                 "quarantined.")),
        "max_quarantine_share": ("Maximum quarantined share", ("The release fails when a larger share of points "
                                                              "fails validation (0 to 1).")),
        "max_duplicate_share": ("Maximum duplicate share", "The same for exact duplicate points (0 to 1)."),
    },
    "prepare": {
        "time_gap_minutes": ("Trip gap (minutes)", "A trajectory ends where two points are further apart in time."),
        "split_by_day": ("Split at midnight", "End every trajectory at midnight UTC."),
        "cell_size_m": ("Grid cell size (m)", "The public grid's cell size."),
        "min_points": ("Minimum points", "Trajectories with fewer points are dropped."),
    },
}


def _check_keys(cls: type, data: dict, where: str) -> None:
    allowed = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ParameterError(f"unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}",
                             where)


def _check_types(obj: Any, section: str) -> None:
    """Every ``bool`` field in a section of a spec is a boolean, every ``float`` or ``int`` field a finite number (an
    ``int`` field a whole one): a string, ``.inf`` or ``.nan`` from YAML is refused here, naming the key, not deep
    in the flow."""
    for f in fields(obj):
        where = f"{section}.{f.name}" if section else f.name
        if f.type == "bool" and not isinstance(getattr(obj, f.name), bool):
            raise ParameterError(f"{f.name} must be true or false, got {str(getattr(obj, f.name))[:40]!r}", where)
        if f.type not in ("float", "int", "float | None"):
            continue
        value = getattr(obj, f.name)
        if value is None and f.type == "float | None":
            continue
        kind = "a whole number" if f.type == "int" else "a finite number"
        if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
                or (f.type == "int" and not float(value).is_integer())):
            raise ParameterError(f"{f.name} must be {kind}, got {str(value)[:40]!r}", where)


def _require(ok: bool, section: str, name: str, what: str) -> None:
    """Refuse the key ``name`` of a spec's ``section`` unless ``ok``: "<name> <what>"."""
    if not ok:
        raise ParameterError(f"{name} {what}", f"{section}.{name}")


def validate_dataset_name(name: str, where: str = "dataset") -> str:
    if not isinstance(name, str) or not DATASET_NAME.fullmatch(name):  # fullmatch: "$" would let "x\n" in
        raise ParameterError(f"dataset name {name!r} must match {DATASET_NAME.pattern} "
                             "(lower-case letters, digits, underscores; at most 40 characters)", where)
    return name


def validate_policy_name(name: Any, where: str = "gate_policy") -> str:
    if not isinstance(name, str) or not POLICY_NAME.fullmatch(name):
        raise ParameterError(f"gate_policy names a policy a steward registered ({POLICY_NAME.pattern}), not a file "
                             f"or a policy of its own; got {str(name)[:60]!r}", where)
    return name


def parse_policy_reference(value: Any) -> dict | None:
    """A spec's ``gate_policy``: absent (the dataset's policy), a registered policy's name (its newest version),
    or ``{name: NAME, version: N}``. A spec never carries thresholds of its own or a file path: the requester
    must not be able to weaken the gate."""
    if value is None:
        return None
    if isinstance(value, str):
        return {"name": validate_policy_name(value), "version": None}
    if isinstance(value, dict) and set(value) <= {"name", "version"} and "name" in value:
        version = value.get("version")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
            raise ParameterError(f"version must be a positive integer, got {version!r}", "gate_policy.version")
        return {"name": validate_policy_name(value["name"]), "version": version}
    raise ParameterError("a spec cannot set gate thresholds; it may only name a registered policy at least as "
                         "strict as the dataset's (gate_policy: NAME or {name: NAME, version: N})", "gate_policy")


def parse_utc(value: Any, where: str) -> datetime | None:
    """An ISO date or time (or a YAML date) as an aware UTC datetime; naive values are taken as UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ParameterError(f"{value!r} is not an ISO date or time", where) from None
    if isinstance(value, date) and not isinstance(value, datetime):  # a date from YAML
        value = datetime(value.year, value.month, value.day)
    elif not isinstance(value, datetime):
        raise ParameterError(f"{str(value)[:40]!r} is not an ISO date or time", where)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parameter_core_schema(cls: type, parse: Callable[[Any], Any], input_schema: Any) -> Any:
    """The pydantic core schema of a flow parameter typed ``cls`` (Prefect validates a flow's parameters with
    pydantic): a value is parsed by ``parse``, an instance of ``cls`` taken as it is; ``input_schema`` is what the
    parameter's JSON schema is drawn from (the deployment's parameter schema, the Prefect UI's run form)."""
    from pydantic_core import core_schema

    return core_schema.no_info_plain_validator_function(
        lambda value: value if isinstance(value, cls) else parse(value), json_schema_input_schema=input_schema)


@dataclass(frozen=True)
class ValidationSpec:
    """Policy of the raw-point suite ``expectations/raw_points.json``.

    ``max_quarantine_share``: the release fails when more than this share of points fails an integrity
    expectation (keys, coordinates, bbox, window, time order, speed). Exact duplicates (same object, time and
    position) are a logger artefact: they are quarantined too but counted against ``max_duplicate_share``.
    """

    max_speed_mps: float = 60.0
    max_quarantine_share: float = 0.05
    max_duplicate_share: float = 0.10

    def __post_init__(self) -> None:
        _check_types(self, "validation")
        _require(self.max_speed_mps > 0, "validation", "max_speed_mps", "must be positive")
        for name in ("max_quarantine_share", "max_duplicate_share"):
            _require(0 <= getattr(self, name) <= 1, "validation", name, "must be in [0, 1]")


@dataclass(frozen=True)
class PrepareSpec:
    """Trajectory segmentation and gridding.

    A trajectory ends where two consecutive points of an object are more than ``time_gap_minutes`` apart, and at
    midnight UTC when ``split_by_day``. Runs of the same grid cell are collapsed to one location
    (Chen et al. 2012 treat a trajectory as a sequence of visited locations).
    """

    time_gap_minutes: float = 30.0
    split_by_day: bool = True
    cell_size_m: float = 2000.0
    min_points: int = 2

    def __post_init__(self) -> None:
        _check_types(self, "prepare")
        _require(self.time_gap_minutes > 0, "prepare", "time_gap_minutes", "must be positive")
        _require(self.min_points >= 1, "prepare", "min_points", "must be at least 1")


@dataclass(frozen=True)
class ReleaseSpec:
    """One governed release: dataset, snapshot window, public bbox, mechanism, policies.

    ``time_precision_s``: released timestamps are floored to this many seconds (the output suite checks it);
    ``queue_timeout_s``: how long the release waits while another release of the same dataset is being
    computed (one at a time per dataset) before it fails; ``approval_timeout_s``: how long the flow waits for
    the steward (the release then stays awaiting approval). ``requested_by``: who asks, a registered requester
    or a steward's login (:mod:`trajpub.identity`; the database refuses anyone else when it records the release),
    kept in its canonical form.

    ``window``: a relative window ``{last: 7d, align: local_week}`` (:mod:`trajpub.window`) instead of
    ``window_start``/``window_end``; :meth:`resolved` turns it into them when the run starts, and keeps it with
    the time and zone it was resolved in (``resolved_at``, ``timezone``), which the release records.
    """

    dataset: str
    bbox: tuple[float, float, float, float]
    mechanism: str = "prefix_tree"
    params: dict = field(default_factory=dict)
    window_start: datetime | None = None
    window_end: datetime | None = None
    window: dict | None = None
    requested_by: str | None = None
    validation: ValidationSpec = field(default_factory=ValidationSpec)
    prepare: PrepareSpec = field(default_factory=PrepareSpec)
    gate_policy: dict | None = None
    approval_timeout_s: float = 3600.0
    queue_timeout_s: float = 3600.0
    time_precision_s: float = 60.0
    seed: int | None = None

    def __post_init__(self) -> None:
        validate_dataset_name(self.dataset)
        if self.requested_by is not None:
            object.__setattr__(self, "requested_by", canonical_identity(self.requested_by))
        object.__setattr__(self, "gate_policy", parse_policy_reference(self.gate_policy))
        GridSpec(tuple(self.bbox), self.prepare.cell_size_m)  # validates the bbox and the cell size
        if self.window_start and self.window_end and self.window_start >= self.window_end:
            raise ParameterError("window_start must be before window_end", "window")
        if self.window is not None:
            RelativeWindow.parse(self.window)
        for name in ("approval_timeout_s", "queue_timeout_s", "time_precision_s"):
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
                    or not value > 0):
                raise ParameterError(f"{name} must be a positive number of seconds, got {value!r}", name)
        if self.seed is not None and os.environ.get("TRAJPUB_TEST_MODE") != "1":
            raise ParameterError("a fixed random seed is allowed only in test mode (TRAJPUB_TEST_MODE=1): "
                                 "a seed and the output give the noise back", "seed")

    @property
    def grid(self) -> GridSpec:
        return GridSpec(tuple(self.bbox), self.prepare.cell_size_m)

    @property
    def relative_window(self) -> RelativeWindow | None:
        return None if self.window is None else RelativeWindow.parse(self.window)

    @property
    def unresolved(self) -> bool:
        """A relative window not yet resolved to ``window_start``/``window_end``."""
        return self.window is not None and "resolved_at" not in self.window

    def resolved(self, at: datetime, timezone: str | None, week_start: str | None = None) -> ReleaseSpec:
        """The spec with its relative window resolved for a run at ``at`` in the dataset's ``timezone``, a
        ``local_week`` starting on the window's own ``week_starts`` or else the dataset's ``week_start``
        (:meth:`trajpub.window.RelativeWindow.resolve`); a spec without one, or already resolved, as it is. The
        record keeps the week's first day it was resolved with."""
        if not self.unresolved:
            return self
        relative = self.relative_window.with_week_start(week_start)
        start, end = relative.resolve(at, timezone)
        record = {**relative.to_dict(), "resolved_at": at.astimezone(UTC).isoformat(), "timezone": timezone or "UTC"}
        return replace(self, window_start=start, window_end=end, window=record)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: type, handler: Any) -> Any:
        """As a flow's parameter type (pydantic, which Prefect uses): the JSON schema of the spec's fields, so
        that the deployment's parameter schema and the Prefect UI's run form show them; a value is parsed by
        :meth:`from_parameters` (the checks and one-sentence errors of a YAML spec, and never a seed), an
        instance taken as it is."""
        return parameter_core_schema(cls, cls.from_parameters, handler(source))

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict:
        """The run form a person reads (the Prefect UI draws it from this schema, and the server checks a run's
        parameters against it): every field labelled in words with a plain description, what :meth:`from_dict`
        accepts beyond the parsed types (a window end as ISO text, a gate policy by name), and no ``seed``: a run
        started from the form or the API cannot carry one (:meth:`from_parameters`)."""
        json_schema = handler(schema)
        fields_schema = handler.resolve_ref_schema(json_schema)
        fields_schema["additionalProperties"] = False  # from_dict refuses unknown keys
        fields_schema["description"] = FORM_DESCRIPTION
        props = fields_schema["properties"]
        props.pop("seed")
        for key in ("window_start", "window_end"):
            props[key] = {"default": None, "anyOf": [{"type": "string", "title": "ISO date or time"},
                                                     {"type": "null"}]}
        props["window"] = {"default": None, "anyOf": [{"type": "object", "title": "last and align", "properties": {
            "last": {"type": "string", "title": "Length (7d, 2w, 24h)"},
            "align": {"type": "string", "title": "Aligned to", "enum": list(ALIGNMENTS)},
            "week_starts": {"type": "string", "title": "First day of the week", "enum": list(WEEKDAYS)}}},
            {"type": "null"}]}
        props["gate_policy"] = {"default": None, "anyOf": [
            {"type": "string", "title": "Policy name"},
            {"type": "object", "title": "Policy name and version", "properties": {
                "name": {"type": "string", "title": "Name"}, "version": {"type": "integer", "title": "Version"}}},
            {"type": "null"}]}
        for key, (title, description) in FORM_FIELDS.items():
            props[key].update(title=title, description=description)
        for key in ("validation", "prepare"):
            sub = handler.resolve_ref_schema(props[key])
            sub["title"], sub["description"] = FORM_FIELDS[key]
            for name, (title, description) in SECTION_FORM_FIELDS[key].items():
                sub["properties"][name].update(title=title, description=description)
        return json_schema

    @classmethod
    def from_parameters(cls, data: Any) -> ReleaseSpec:
        """A flow run's ``spec`` parameter (a deployment's defaults, the Prefect UI's run form, the API) parsed as
        :meth:`from_dict` parses a YAML spec, refusing a ``seed`` even in test mode: a seed and the output give
        the noise back, and a run's parameters are stored by the Prefect server (a test that needs a fixed seed
        hands the flow a parsed spec)."""
        return cls.from_dict(cls.without_seed(data))

    @staticmethod
    def without_seed(data: Any) -> Any:
        """A run's parameters (a release's or a comparison's spec mapping) without a ``seed`` key, refused in one
        sentence when it holds a seed (:meth:`from_parameters`)."""
        if not isinstance(data, dict):
            return data
        if data.get("seed") is not None:
            raise ParameterError("a run's parameters cannot carry a random seed: a seed and the output give the "
                                 "noise back; every run draws its own", "seed")
        return {k: v for k, v in data.items() if k != "seed"}

    @classmethod
    def from_dict(cls, data: dict) -> ReleaseSpec:
        if not isinstance(data, dict):
            raise ParameterError("a release spec must be a mapping of keys to values", "release spec")
        data = dict(data)
        if "dask_address" in data:
            raise ParameterError("a release spec cannot name a Dask scheduler: the operator sets it "
                                 "(TRAJPUB_DASK_ADDRESS, with its TLS certificates)", "dask_address")
        _check_keys(cls, data, "release spec")
        for key in ("dataset", "bbox"):
            if key not in data:
                raise ParameterError(f"the release spec needs '{key}'", "release spec")
        try:
            data["bbox"] = tuple(float(v) for v in data["bbox"])
            assert len(data["bbox"]) == 4
        except (TypeError, ValueError, AssertionError):
            raise ParameterError("bbox must be four numbers: min_lon, min_lat, max_lon, max_lat", "bbox") from None
        for key, sub in (("validation", ValidationSpec), ("prepare", PrepareSpec)):
            if isinstance(data.get(key), dict):
                _check_keys(sub, data[key], key)
                data[key] = sub(**data[key])
            elif key in data:
                raise ParameterError(f"'{key}' must be a mapping of its settings", key)
        if "params" in data and not isinstance(data["params"], dict):
            raise ParameterError("'params' must be a mapping of the mechanism's parameters, e.g. {epsilon: 5}",
                                 "params")
        for key in ("window_start", "window_end"):
            data[key] = parse_utc(data.get(key), key)
        if (window := data.get("window")) is not None:
            relative = RelativeWindow.parse(window).to_dict()
            if isinstance(window, dict) and "resolved_at" in window and data["window_start"] and data["window_end"]:
                # a spec as a run recorded it (resolved, :meth:`resolved`): read back as it was
                relative |= {"resolved_at": str(window["resolved_at"]), "timezone": str(window.get("timezone"))}
                if window.get("latest_with_data"):
                    relative["latest_with_data"] = True
            elif data["window_start"] or data["window_end"]:
                raise ParameterError("a spec has a relative window or window_start/window_end, not both", "window")
            data["window"] = relative
        return cls(**data)

    def to_record(self) -> dict:
        """The spec as stored in governance and lineage: JSON-safe, **without the random seed**."""
        d = asdict(self)
        d.pop("seed")
        d["bbox"] = list(self.bbox)
        for key in ("window_start", "window_end"):
            d[key] = d[key].isoformat() if d[key] else None
        return d


def read_spec_file(path: str | Path) -> dict:
    """The mapping of a release spec YAML file (size- and alias-limited); errors name the file, line and
    column."""
    data = read_yaml(path, "release spec")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ParameterError("a release spec must be a mapping of keys to values", f"file {path}")
    return data
