"""Gate policies in governance: stewards register versions of named policies and set the one that gates each
dataset; a release is gated by its dataset's current policy, or by a registered policy its spec names that is
at least as strict (never by a policy the requester wrote, never by a file the spec points at).

Tables ``governance.gate_policies`` (name, version -> policy; append-only) and ``governance.dataset_policies``
(the history of each dataset's policy; the newest row is the current one), migration ``sql/013``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from audits.gate import GatePolicy
from tasks import db
from trajpub.errors import PolicyError, TrajpubError
from trajpub.spec import ReleaseSpec, validate_policy_name

DEFAULT_NAME = "default"


@dataclass(frozen=True)
class RegisteredPolicy:
    """A registered policy version; ``policy.version`` is the registered version."""

    name: str
    version: int
    policy: GatePolicy

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"

    def to_record(self) -> dict[str, Any]:
        """What the release summary, the review and lineage say about the policy: its name and version."""
        return {"name": self.name, "version": self.version}


def _comparable(policy: dict) -> str:
    return json.dumps({k: v for k, v in policy.items() if k != "version"}, sort_keys=True)


def register(conn: sa.Connection, name: str, policy: GatePolicy) -> int:
    """Register ``policy`` as the next version of ``name`` on a steward's connection (the database records the
    login as ``registered_by``); an identical policy already registered as the newest version of ``name`` is not
    registered twice. Returns the version."""
    validate_policy_name(name, "policy name")
    latest = conn.execute(sa.text("SELECT version, policy FROM governance.gate_policies WHERE name = :n"
                                  " ORDER BY version DESC LIMIT 1"), {"n": name}).first()
    record = policy.to_dict()
    if latest is not None and _comparable(latest.policy) == _comparable(record):
        return latest.version
    version = (latest.version if latest else 0) + 1
    record["version"] = version
    conn.execute(sa.text("INSERT INTO governance.gate_policies (name, version, policy) VALUES"
                         " (:n, :v, CAST(:p AS jsonb))"), {"n": name, "v": version, "p": json.dumps(record)})
    return version


def set_for_dataset(conn: sa.Connection, dataset: str, name: str, version: int) -> None:
    """Make ``name`` version ``version`` the dataset's policy, on a steward's connection (the database records
    the login as ``set_by``; the history stays)."""
    if conn.execute(sa.text("SELECT 1 FROM governance.datasets WHERE dataset = :d"), {"d": dataset}).first() is None:
        raise TrajpubError(f"dataset '{dataset}' has not been loaded", "governance.datasets")
    conn.execute(sa.text("INSERT INTO governance.dataset_policies (dataset, policy_name, policy_version)"
                         " VALUES (:d, :n, :v)"), {"d": dataset, "n": name, "v": version})


def load(conn: sa.Connection, name: str, version: int | None = None) -> RegisteredPolicy:
    """A registered policy: ``version`` of ``name``, or its newest version."""
    row = conn.execute(sa.text(
        "SELECT name, version, policy FROM governance.gate_policies WHERE name = :n"
        " AND (CAST(:v AS integer) IS NULL OR version = :v) ORDER BY version DESC LIMIT 1"),
        {"n": name, "v": version}).first()
    if row is None:
        which = f"'{name}'" + (f" version {version}" if version is not None else "")
        raise PolicyError(f"no gate policy {which} is registered; a steward registers one with "
                          "`trajpub policy set`", "governance.gate_policies")
    return RegisteredPolicy(row.name, row.version, GatePolicy.from_dict(row.policy, f"gate policy {row.name}"))


def current(conn: sa.Connection, dataset: str) -> RegisteredPolicy:
    """The dataset's current policy; a dataset no steward has set one for adopts the shipped default
    (``audits/policies/default.yaml``), registered as the next version of ``default`` if it changed."""
    row = conn.execute(sa.text("SELECT policy_name, policy_version FROM governance.dataset_policies"
                               " WHERE dataset = :d ORDER BY entry_id DESC LIMIT 1"), {"d": dataset}).first()
    if row is None:
        if conn.execute(sa.text("SELECT 1 FROM governance.datasets WHERE dataset = :d"),
                        {"d": dataset}).first() is None:
            raise TrajpubError(f"dataset '{dataset}' has not been loaded", "governance.datasets")
        conn.execute(sa.text("SELECT governance.adopt_default_policy(:d, CAST(:p AS jsonb))"),
                     {"d": dataset, "p": json.dumps(GatePolicy.default().to_dict())})
        return current(conn, dataset)
    return load(conn, row.policy_name, row.policy_version)


def history(conn: sa.Connection, dataset: str) -> list[dict]:
    """Every policy the dataset has had, oldest first."""
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT policy_name, policy_version, set_by, set_at FROM governance.dataset_policies WHERE dataset = :d"
        " ORDER BY entry_id"), {"d": dataset}).mappings()]


def weakenings(candidate: GatePolicy, floor: GatePolicy) -> list[str]:
    """Every way ``candidate`` is less strict than ``floor`` (empty: at least as strict). Attack by attack: each
    of the floor's attacks must stay, with a ceiling no higher, the same parameters, on at least the same release
    kinds, and blocking a release it cannot measure where the floor blocks one; the same control share, and no
    fewer objects or wider intervals before "too few objects to measure"; the adversary's resolutions must
    all stay; a floor that decides on the upper confidence bound may not be replaced by one that decides on the
    point estimate; each utility limit of each release kind likewise must stay and be no looser."""
    out = []
    if (candidate.decide_on, floor.decide_on) == ("point", "upper_bound"):
        out.append("it decides on the point estimate of each risk, where the floor decides on its upper bound")
    for name, limit in floor.max_risk.items():
        if name not in candidate.max_risk:
            out.append(f"it drops attack {name}")
            continue
        if candidate.max_risk[name] > limit:
            out.append(f"it raises {name} max_risk from {limit:g} to {candidate.max_risk[name]:g}")
        if dict(candidate.attack_params.get(name, {})) != dict(floor.attack_params.get(name, {})):
            out.append(f"it changes the parameters of {name}")
        floor_kinds = set(floor.attack_products.get(name, ())) or None
        kinds = set(candidate.attack_products.get(name, ())) or None
        if kinds is not None and (floor_kinds is None or not floor_kinds <= kinds):
            out.append(f"it runs {name} on fewer release kinds")
        if (candidate.not_applicable_rule(name), floor.not_applicable_rule(name)) == ("pass", "block"):
            out.append(f"it passes releases that {name} cannot measure, where the floor blocks them")
    mine, theirs = candidate.controls, floor.controls
    if mine.share != theirs.share:  # another split is another measurement, not a stricter one
        out.append(f"it changes the control share from {theirs.share:g} to {mine.share:g}")
    if mine.min_objects < theirs.min_objects or mine.max_risk_ci_width > theirs.max_risk_ci_width:
        out.append("it measures members against controls on fewer objects or wider intervals than the floor")
    missing = sorted(set(floor.resolutions_m) - set(candidate.resolutions_m))
    if missing:  # the adversary's grids: dropping one lets a release pass where it would link more
        out.append(f"it drops the adversary's resolutions {', '.join(f'{r:g} m' for r in missing)}")
    for kind, limits in floor.utility.items():
        for name, limit in limits.items():
            mine = candidate.utility.get(kind, {}).get(name)
            if mine is None:
                out.append(f"it drops the utility {limit.bound} on {name} for {kind} releases")
            elif (mine.value > limit.value) if limit.bound == "max" else (mine.value < limit.value):
                out.append(f"it {'raises' if limit.bound == 'max' else 'lowers'} the utility {limit.bound} on "
                           f"{name} for {kind} releases from {limit.value:g} to {mine.value:g}")
    return out


def check(spec: ReleaseSpec) -> RegisteredPolicy:
    """The gate policy of the release (:func:`resolve`) in a transaction of its own: a spec naming a weaker policy
    is refused before a flow run exists. The flow's ``plan`` resolves it again in its own transaction."""
    with db.engine().begin() as conn:
        return resolve(conn, spec)


def resolve(conn: sa.Connection, spec: ReleaseSpec) -> RegisteredPolicy:
    """The policy that gates this release: the dataset's current one, or the registered policy the spec names if
    it is at least as strict; otherwise one sentence saying why not. Either in the dataset's local time zone
    (:meth:`audits.gate.GatePolicy.in_timezone`, sql/025) where it sets none. Reads no data."""
    zone = conn.execute(sa.text("SELECT timezone FROM governance.datasets WHERE dataset = :d"),
                        {"d": spec.dataset}).scalar()
    floor = current(conn, spec.dataset)
    floor = RegisteredPolicy(floor.name, floor.version, floor.policy.in_timezone(zone))
    if spec.gate_policy is None:
        return floor
    chosen = load(conn, spec.gate_policy["name"], spec.gate_policy.get("version"))
    chosen = RegisteredPolicy(chosen.name, chosen.version, chosen.policy.in_timezone(zone))
    weaker = weakenings(chosen.policy, floor.policy)
    if weaker:
        raise PolicyError(f"gate policy {chosen.label} is less strict than dataset '{spec.dataset}''s policy "
                          f"{floor.label}: {'; '.join(weaker)}", "release spec: gate_policy")
    return chosen
