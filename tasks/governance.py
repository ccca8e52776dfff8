"""The release record in ``governance``: the status machine, results, approvals and the budget ledger."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tasks import lineage
from tasks.db import alive_lock_key, lock_is_held
from trajpub.errors import PolicyError, TrajpubError
from trajpub.guarantee import ACCOUNTS, Charge, Guarantee
from trajpub.periods import Spend, Unit

# planned → validated → protected → audited → blocked | awaiting_approval → approved | rejected → published
# → withdrawn; any non-final status → failed (with the reason). The moves are the table
# governance.release_status_moves, which a trigger enforces for every role (sql/015).
FINAL = {"blocked", "rejected", "published", "failed", "withdrawn"}
REFUSED = "TP001"  # the SQLSTATE of a governance rule the database enforces


@contextmanager
def refusals() -> Iterator[None]:
    """Turn a governance rule the database enforced (SQLSTATE TP001) into a one-sentence PolicyError."""
    try:
        yield
    except sa.exc.DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) != REFUSED:
            raise
        raise PolicyError(exc.orig.diag.message_primary, "governance") from None


def check_requester(conn: sa.Connection, requested_by: str | None) -> str:
    """The canonical identity of a release's requester; refuses (PolicyError) a name that is not an identity or
    not a registered person (a registered requester or a steward's login), as the database would on recording
    the release (sql/028): a command asks this before a flow run exists."""
    with refusals():
        name = conn.execute(sa.text("SELECT governance.canonical_identity(:n, 'requested_by')"),
                            {"n": requested_by}).scalar_one()
    if not conn.execute(sa.text("SELECT governance.registered_person(:n)"), {"n": name}).scalar_one():
        raise PolicyError(f"requested_by '{name}' is neither a registered requester nor a steward's login (the "
                          "operator registers requesters: trajpub requester add NAME)", "requested_by")
    return name


def create_release(conn: sa.Connection, spec_record: dict, params: dict, guarantee: dict) -> int:
    """Record a release as planned; the database refuses a requester that is not a registered person."""
    with refusals():
        row = conn.execute(sa.text(
            "INSERT INTO governance.releases (dataset, mechanism, params, spec, requested_by, window_start,"
            " window_end, guarantee) VALUES (:dataset, :mechanism, CAST(:params AS jsonb), CAST(:spec AS jsonb),"
            " :requested_by, :ws, :we, CAST(:guarantee AS jsonb)) RETURNING release_id"),
            {"dataset": spec_record["dataset"], "mechanism": spec_record["mechanism"], "params": json.dumps(params),
             "spec": json.dumps(spec_record), "requested_by": spec_record["requested_by"],
             "ws": spec_record["window_start"], "we": spec_record["window_end"],
             "guarantee": json.dumps(guarantee)}).scalar_one()
    conn.execute(sa.text("INSERT INTO governance.release_transitions (release_id, to_status, detail) "
                         "VALUES (:r, 'planned', 'release planned')"), {"r": row})
    return row


def transition(conn: sa.Connection, release_id: int, to: str, detail: str | None = None) -> None:
    """Move a release to ``to``; refuses moves the status machine does not allow (a steward's decision and a
    withdrawal are not moves of this kind: :func:`decide`, :func:`tasks.publish.withdraw`)."""
    current = conn.execute(sa.text("SELECT status FROM governance.releases WHERE release_id = :r FOR UPDATE"),
                           {"r": release_id}).scalar()
    if current is None:
        raise TrajpubError(f"release {release_id} does not exist", "governance.releases")
    allowed = conn.execute(sa.text("SELECT 1 FROM governance.release_status_moves WHERE from_status = :f AND "
                                   "to_status = :t"), {"f": current, "t": to}).scalar()
    if not allowed:
        raise TrajpubError(f"release {release_id} is '{current}' and cannot become '{to}'", "governance.releases")
    with refusals():
        conn.execute(sa.text(
            "UPDATE governance.releases SET status = :to, updated_at = now(),"
            " failure_reason = CASE WHEN :to = 'failed' THEN :detail ELSE failure_reason END"
            " WHERE release_id = :r"), {"to": to, "detail": detail, "r": release_id})
    conn.execute(sa.text("INSERT INTO governance.release_transitions (release_id, from_status, to_status, detail)"
                         " VALUES (:r, :f, :t, :d)"), {"r": release_id, "f": current, "t": to, "d": detail})
    if to in FINAL:
        ended(conn, release_id)


def ended(conn: sa.Connection, release_id: int) -> None:
    """What follows a release's final status in the same transaction: its staging rows go now unless its
    dataset keeps them longer (``staging_retention_days``)."""
    retention = conn.execute(sa.text(
        "SELECT d.staging_retention_days FROM governance.datasets d JOIN governance.releases r USING (dataset)"
        " WHERE r.release_id = :r"), {"r": release_id}).scalar()
    if retention == 0:
        purge_staging(conn, release_id)


STAGING_TABLES = ("staging.candidate_points", "staging.candidate_owners", "staging.candidate_fragments")


def purge_staging(conn: sa.Connection, release_id: int) -> None:
    """Delete an ended release's candidate points, fragments and private owner keys (nothing of a
    person's data stays in staging once the release is decided). Its audit figures, review report, ledger and
    lineage stay in governance; publication has copied what it publishes before its final transition."""
    for table in STAGING_TABLES:
        conn.execute(sa.text(f"DELETE FROM {table} WHERE release_id = :r"), {"r": release_id})
    conn.execute(sa.text("UPDATE governance.releases SET staging_purged_at = now() WHERE release_id = :r"),
                 {"r": release_id})


def purge_expired_staging(conn: sa.Connection) -> list[int]:
    """Purge the staging rows of every release that ended longer ago than its dataset's
    ``staging_retention_days`` (a steward's setting, ``trajpub retention``); returns their ids."""
    due = [r[0] for r in conn.execute(sa.text(
        "SELECT r.release_id FROM governance.releases r JOIN governance.datasets d USING (dataset)"
        " WHERE r.status = ANY(:final) AND r.staging_purged_at IS NULL"
        " AND (SELECT max(t.at) FROM governance.release_transitions t WHERE t.release_id = r.release_id)"
        "     < now() - make_interval(days => d.staging_retention_days)"
        " ORDER BY r.release_id"), {"final": sorted(FINAL)})]
    for release_id in due:
        purge_staging(conn, release_id)
    return due


def update_release(conn: sa.Connection, release_id: int, **values: Any) -> None:
    """Set descriptive columns (flow_run_id, snapshot_hash, snapshot_points); the summary grows through
    :func:`merge_summary`. The published table is named by the database's publication function."""
    allowed = {"flow_run_id", "snapshot_hash", "snapshot_points"}
    if set(values) - allowed:
        raise ValueError(f"cannot update {sorted(set(values) - allowed)}")
    sets = ", ".join(f"{k} = :{k}" for k in values)
    conn.execute(sa.text(f"UPDATE governance.releases SET {sets}, updated_at = now() WHERE release_id = :r"),
                 {**values, "r": release_id})


def merge_summary(conn: sa.Connection, release_id: int, part: dict) -> None:
    """Merge ``part`` into the release's summary; non-finite numbers (which JSON cannot hold) become null."""
    conn.execute(sa.text("UPDATE governance.releases SET summary = summary || CAST(:p AS jsonb) "
                         "WHERE release_id = :r"), {"p": json.dumps(json_finite(part), default=str), "r": release_id})


def record_gate(conn: sa.Connection, release_id: int, utility: dict, gate: dict) -> None:
    """The gate's decision and the utility figures into the release summary, as the auditor's login only
    (``governance.record_gate``, sql/036: the pipeline cannot write or change them)."""
    with refusals():
        conn.execute(sa.text("SELECT governance.record_gate(:r, CAST(:u AS jsonb), CAST(:g AS jsonb))"),
                     {"r": release_id, "u": json.dumps(json_finite(utility), default=str),
                      "g": json.dumps(json_finite(gate), default=str)})


def attest_audit(conn: sa.Connection, release_id: int) -> str:
    """The auditor's attestation of the audit (sql/036): the staged candidate read again against its seal, and the
    digests of the audit results, the review report and the gate decision recorded under the auditor's login.
    Without it the release cannot await approval. Returns the attestation's row hash."""
    with refusals():
        return conn.execute(sa.text("SELECT governance.attest_audit(:r)"), {"r": release_id}).scalar_one()


def evidence_break(conn: sa.Connection, release_id: int) -> str | None:
    """The first break in the release's chain charge -> seal -> attested audit (sql/036), None when intact."""
    return conn.execute(sa.text("SELECT governance.evidence_break(release_id, summary) FROM governance.releases"
                                " WHERE release_id = :r"), {"r": release_id}).scalar()


def json_finite(value):
    """``value`` with every NaN or infinite float (at any depth of dicts, lists, tuples) replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_finite(v) for v in value]
    return value


def get_release(conn: sa.Connection, release_id: int) -> dict:
    row = conn.execute(sa.text("SELECT * FROM governance.releases WHERE release_id = :r"),
                       {"r": release_id}).mappings().first()
    if row is None:
        raise TrajpubError(f"release {release_id} does not exist", "governance.releases")
    return dict(row)


def release_of_flow_run(conn: sa.Connection, flow_run_id: str) -> dict | None:
    """``release_id`` and ``status`` of the release a flow run recorded (None before it has planned one)."""
    row = conn.execute(sa.text("SELECT release_id, status FROM governance.releases WHERE flow_run_id = :f"),
                       {"f": str(flow_run_id)}).mappings().first()
    return dict(row) if row else None


def list_releases(conn: sa.Connection, dataset: str | None = None, limit: int = 50) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT release_id, dataset, mechanism, status, requested_by, created_at, updated_at, published_table"
        " FROM governance.releases WHERE (CAST(:d AS text) IS NULL OR dataset = :d)"
        " ORDER BY release_id DESC LIMIT :n"), {"d": dataset, "n": limit}).mappings()]


#: The cap column of ``governance.datasets`` of each account that has one (heuristic guarantees are counted,
#: not capped: they spend no ε). δ is capped only for ε-DP (``delta_cap``); the other accounts refuse a δ.
CAP_COLUMNS = {"epsilon-DP": "epsilon_cap", "epsilon-LDP": "ldp_epsilon_cap", "Pufferfish": "pufferfish_epsilon_cap"}
#: The optional lifetime cap column of each capped account (sql/031): over every charge, whatever the unit's period.
LIFETIME_CAP_COLUMNS = {"epsilon-DP": "lifetime_epsilon_cap", "epsilon-LDP": "lifetime_ldp_epsilon_cap",
                        "Pufferfish": "lifetime_pufferfish_epsilon_cap"}


@dataclass(frozen=True)
class Account:
    """One currency of a dataset's ledger: its cap in the dataset's unit (None: counted, not capped; per period
    or per w periods under a per-period unit), what all its charges add up to per object (sequential
    composition; under a per-period unit, the lifetime figure), its optional lifetime cap, and the releases whose
    charge could not be converted."""

    account: str
    unit: str
    cap: float | None
    spent: float
    delta_cap: float
    delta_spent: float
    releases: int
    unconvertible: tuple[int, ...]
    cap_words: str = ""
    lifetime_cap: float | None = None

    @property
    def left(self) -> float | None:
        """What is left of the cap (the lifetime unit); under a per-period unit, see ``trajpub budget show``."""
        return None if self.cap is None else self.cap - self.spent

    def describe(self) -> str:
        """One line for a steward: spent, cap and left, per unit."""
        if self.cap is None:
            return f"{self.account}: {self.releases} release(s), no epsilon (not DP; counted, not capped)"
        if self.unit in ("object", "record"):
            text = (f"{self.account}: epsilon {self.spent:g} per {self.unit} spent of cap {self.cap:g} "
                    f"({self.left:g} left) over {self.releases} release(s)")
        else:
            text = (f"{self.account}: cap {self.cap:g} {self.cap_words}; epsilon {self.spent:g} per object "
                    f"over the dataset's life, {self.releases} release(s)")
        if self.lifetime_cap is not None:
            text += f"; lifetime cap {self.lifetime_cap:g} per object ({self.lifetime_cap - self.spent:g} left)"
        if self.account == "epsilon-DP":
            text += f"; delta {self.delta_spent:g} of cap {self.delta_cap:g}"
        if self.unconvertible:
            text += (f"; UNCONVERTIBLE charges of releases {', '.join(map(str, self.unconvertible))}: "
                     "this account refuses new charges")
        return text


def dataset_unit(conn: sa.Connection, dataset: str) -> str:
    """Whose data the dataset protects (``object`` or ``record``): the unit a guarantee's privacy map converts to."""
    return unit_of(conn, dataset).subject


def unit_of(conn: sa.Connection, dataset: str) -> Unit:
    """The dataset's declared unit of protection: object or record, and its period and w (sql/031)."""
    row = conn.execute(sa.text("SELECT privacy_unit, budget_period, budget_w, timezone, week_start"
                               " FROM governance.datasets WHERE dataset = :d"), {"d": dataset}).first()
    if row is None:
        raise TrajpubError(f"dataset '{dataset}' has not been loaded", "governance.datasets")
    return Unit(row.privacy_unit, row.budget_period, row.budget_w, row.timezone, row.week_start)


def accounts(conn: sa.Connection, dataset: str, lock: bool = False) -> dict[str, Account]:
    """Every account of a dataset's ledger (:data:`trajpub.guarantee.ACCOUNTS`), in the dataset's unit;
    ``lock`` holds the dataset row until commit."""
    row = conn.execute(sa.text(
        "SELECT * FROM governance.datasets WHERE dataset = :d" + (" FOR UPDATE" if lock else "")),
        {"d": dataset}).mappings().first()
    if row is None:
        raise TrajpubError(f"dataset '{dataset}' has not been loaded", "governance.datasets")
    unit = Unit(row["privacy_unit"], row["budget_period"], row["budget_w"], row["timezone"], row["week_start"])
    sums = {r.account: r for r in conn.execute(sa.text(
        "SELECT account, coalesce(sum(unit_epsilon), 0) AS eps, coalesce(sum(unit_delta), 0) AS delta,"
        " count(*) FILTER (WHERE entry_kind = 'charge') - count(*) FILTER (WHERE entry_kind = 'release') AS n,"
        " array_agg(release_id ORDER BY release_id) FILTER (WHERE unit_epsilon IS NULL AND account <> 'heuristic'"
        "   AND entry_kind = 'charge' AND NOT EXISTS (SELECT 1 FROM governance.budget_ledger g WHERE"
        "   g.release_id = l.release_id AND g.entry_kind = 'release')) AS unconvertible"
        " FROM governance.budget_ledger l WHERE dataset = :d GROUP BY account"), {"d": dataset})}
    out = {}
    for name in ACCOUNTS:
        s = sums.get(name)
        cap = row[CAP_COLUMNS[name]] if name in CAP_COLUMNS else None
        lifetime = row[LIFETIME_CAP_COLUMNS[name]] if name in LIFETIME_CAP_COLUMNS else None
        out[name] = Account(name, unit.words, None if cap is None else float(cap),
                            float(s.eps) if s else 0.0, float(row["delta_cap"]) if name == "epsilon-DP" else 0.0,
                            float(s.delta) if s else 0.0, int(s.n) if s else 0,
                            tuple(s.unconvertible or ()) if s else (), unit.cap_words,
                            None if lifetime is None else float(lifetime))
    return out


def charge_of(conn: sa.Connection, dataset: str, guarantee: Guarantee) -> Charge:
    """What ``guarantee`` costs in the dataset's unit (its privacy map applied to the declared unit)."""
    return guarantee.charge(dataset_unit(conn, dataset))


def check_budget(conn: sa.Connection, dataset: str, guarantee: Guarantee,
                 window: tuple[datetime | str | None, datetime | str | None] = (None, None)) -> Charge:
    """The release's charge in the dataset's unit; refuses one that is unbounded (no cap on records per object),
    or falls in an account holding unconvertible charges, or would pass a cap of its account
    (:func:`cap_refusal`) for a release on ``window``."""
    charge = charge_of(conn, dataset, guarantee)
    if not charge.bounded:
        raise PolicyError(f"this release is {guarantee.model} per {guarantee.privacy_unit} and nothing caps the "
                          f"records of one {charge.unit}, so its epsilon per {charge.unit} is unbounded; set "
                          f"max_records_per_object, or declare the dataset's unit 'record' "
                          f"(trajpub budget unit {dataset} record)", "governance.budget_ledger")
    if charge.epsilon is None:
        return charge
    acc = accounts(conn, dataset)[charge.account]
    if acc.unconvertible:
        raise PolicyError(f"the {charge.account} account of dataset '{dataset}' holds charges that cannot be "
                          f"converted to epsilon per {charge.unit} (releases "
                          f"{', '.join(map(str, acc.unconvertible))}), so what is left of its cap is unknown",
                          "governance.budget_ledger")
    if refusal := cap_refusal(conn, dataset, charge.account, charge.epsilon, charge.delta, window):
        raise PolicyError(f"{refusal} ({charge.how})", "governance.budget_ledger")
    return charge


def cap_refusal(conn: sa.Connection, dataset: str, account: str, epsilon: float, delta: float,
                window: tuple[datetime | str | None, datetime | str | None]) -> str | None:
    """Why a charge of (``epsilon``, ``delta``) in ``account`` by a release on ``window`` would pass a cap, in one
    sentence, or None: the database's own check (``governance.budget_refusal``, sql/031), which the ledger's
    trigger repeats under the dataset's row lock: the lifetime unit sums every charge (sequential composition;
    accounts are never summed), a per-period unit the charges of every run of w consecutive periods the window
    touches, and a lifetime cap every charge."""
    return conn.execute(sa.text(
        "SELECT governance.budget_refusal(:d, :a, :e, :dl, CAST(:ws AS timestamptz), CAST(:we AS timestamptz),"
        " false)"), {"d": dataset, "a": account, "e": epsilon, "dl": delta,
                     "ws": window[0], "we": window[1]}).scalar()


def guarantee_record(conn: sa.Connection, dataset: str, guarantee: Guarantee) -> dict:
    """The guarantee as a release records it (``governance.releases.guarantee``, which the review, lineage and
    the consumer's card carry): the mechanism's own, plus ``protection``, its charge stated verbatim in the
    dataset's unit with the lifetime figure beside it (:meth:`trajpub.periods.Unit.statement`)."""
    unit = unit_of(conn, dataset)
    charge = guarantee.charge(unit.subject)
    acc = accounts(conn, dataset).get(charge.account)
    epsilon = charge.epsilon if charge.bounded else None
    return {**guarantee.to_dict(), "protection": {
        "unit": unit.words, "period": unit.period, "w": unit.w, "timezone": unit.tz if unit.period else None,
        "account": charge.account, "epsilon": epsilon,
        "statement": unit.statement(epsilon, acc.cap if acc else None, acc.lifetime_cap if acc else None)}}


def spends(conn: sa.Connection, dataset: str, account: str) -> list[Spend]:
    """The account's ledger rows under a per-period unit, as periods and ε (give-backs negative)."""
    return [Spend(r.period_first, r.period_last, float(r.unit_epsilon)) for r in conn.execute(sa.text(
        "SELECT period_first, period_last, unit_epsilon FROM governance.budget_ledger WHERE dataset = :d AND"
        " account = :a AND period_first IS NOT NULL AND unit_epsilon IS NOT NULL ORDER BY entry_id"),
        {"d": dataset, "a": account})]


def charge_budget(conn: sa.Connection, release_id: int, dataset: str, mechanism: str, guarantee: Guarantee) -> Charge:
    """Charge the ledger in the dataset's unit (sequential composition: spent = Σ ε (and Σ δ) per account of every
    run on the raw data, published or not; under a per-period unit, to every period the release's window
    touches, sql/031). The mechanism's own ε and unit are kept beside the charge. The flow
    charges at plan, before any data is read: a reservation, given back by :func:`release_reservation` if the
    release fails before its mechanism runs. :func:`check_budget` refuses first with the whole reason; the
    ledger's trigger (sql/015, sql/031) checks the same caps again under a lock on the dataset's row, so two releases
    cannot overspend together (the pipeline role itself cannot lock that row)."""
    window = conn.execute(sa.text("SELECT window_start, window_end FROM governance.releases WHERE release_id = :r"),
                          {"r": release_id}).one()
    charge = check_budget(conn, dataset, guarantee, tuple(window))
    with refusals():
        conn.execute(sa.text(
            "INSERT INTO governance.budget_ledger (dataset, release_id, mechanism, epsilon, delta, privacy_unit,"
            " max_records_per_object, account, unit, unit_epsilon, unit_delta, conversion) VALUES (:d, :r, :m, :e,"
            " :dl, :u, :k, :acc, :unit, :ue, :ud, :how) ON CONFLICT (release_id, entry_kind) DO NOTHING"),
            {"d": dataset, "r": release_id, "m": mechanism, "e": guarantee.epsilon or 0.0, "dl": guarantee.delta,
             "u": guarantee.privacy_unit, "k": guarantee.privacy_map.records_per_object, "acc": charge.account,
             "unit": charge.unit, "ue": charge.epsilon, "ud": charge.delta, "how": charge.how})
    return charge


def mark_mechanism_started(conn: sa.Connection, release_id: int) -> None:
    """Record that the mechanism is about to be given the data: from now on the reserved budget is spent."""
    conn.execute(sa.text("UPDATE governance.releases SET mechanism_started_at = clock_timestamp() "
                         "WHERE release_id = :r AND mechanism_started_at IS NULL"), {"r": release_id})


def release_reservation(conn: sa.Connection, release_id: int, reason: str) -> bool:
    """Give back the budget a failed release reserved at plan when its mechanism never ran: a compensating ledger
    row mirroring the charge (the ledger is append-only; the database refuses any other give-back, sql/026).
    Returns whether it did."""
    return conn.execute(sa.text(
        "INSERT INTO governance.budget_ledger (dataset, release_id, mechanism, epsilon, delta, privacy_unit,"
        " max_records_per_object, account, unit, unit_epsilon, unit_delta, conversion, entry_kind, reason)"
        " SELECT l.dataset, l.release_id, l.mechanism, -l.epsilon, -l.delta, l.privacy_unit, l.max_records_per_object,"
        " l.account, l.unit, -l.unit_epsilon, -l.unit_delta, l.conversion, 'release', :why FROM governance.budget_ledger l"
        " JOIN governance.releases r USING (release_id) WHERE l.release_id = :r AND l.entry_kind = 'charge'"
        " AND r.status = 'failed' AND r.mechanism_started_at IS NULL ON CONFLICT (release_id, entry_kind) DO NOTHING"),
        {"r": release_id, "why": reason}).rowcount > 0


def ledger(conn: sa.Connection, dataset: str | None = None) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT l.entry_id, l.dataset, l.release_id, l.entry_kind, l.mechanism, l.account, l.unit, l.unit_epsilon,"
        " l.unit_delta, l.epsilon, l.delta, l.privacy_unit, l.max_records_per_object, l.conversion, l.charged_at,"
        " l.period, l.period_first, l.period_last, r.status"
        " FROM governance.budget_ledger l JOIN governance.releases r USING (release_id)"
        " WHERE (CAST(:d AS text) IS NULL OR l.dataset = :d) ORDER BY l.entry_id"), {"d": dataset}).mappings()]


def release_charge(conn: sa.Connection, release_id: int) -> dict | None:
    """The ledger row of a release (None before it is charged)."""
    row = conn.execute(sa.text("SELECT * FROM governance.budget_ledger WHERE release_id = :r"),
                       {"r": release_id}).mappings().first()
    return dict(row) if row else None


def budget_lines(conn: sa.Connection, release: dict) -> list[str]:
    """The review's budget section, in the dataset's unit: the unit, this release's charge and how it was
    derived from the mechanism's own ε, and every account (never summed across models)."""
    g = release.get("guarantee") or {}
    lines = [f"Unit of protection of dataset '{release['dataset']}': {unit_of(conn, release['dataset']).describe()}."]
    if protection := g.get("protection"):
        lines.append(f"As this release states it: {protection['statement']}")
    c = release_charge(conn, release["release_id"])
    if c is None:
        lines.append(f"Not charged yet; the mechanism states epsilon {g.get('epsilon')} per {g.get('privacy_unit')}.")
    elif c["unit_epsilon"] is None:
        lines.append(f"This release is charged no epsilon ({c['account']}: {c['conversion']}).")
    else:
        lines.append(f"This release spends {c['account']} epsilon {c['unit_epsilon']:g} per {c['unit']} "
                     f"({c['conversion']}); the mechanism's own figure is epsilon {c['epsilon']:g} per "
                     f"{c['privacy_unit']}.")
    lines += [a.describe() for a in accounts(conn, release["dataset"]).values()]
    return lines


def decide(conn: sa.Connection, release_id: int, decision: str, comment: str | None) -> str:
    """Record a steward's decision ('approved' or 'rejected') as the login of ``conn`` (the CLI) and move the
    release; returns the login. The database checks the status, four-eyes (the login against the requester) and
    that a rejection says why, and writes the append-only approval."""
    with refusals():
        conn.execute(sa.text("SELECT governance.decide(:r, :d, :c)"),
                     {"r": release_id, "d": decision, "c": comment or ""})
        return conn.execute(sa.text("SELECT session_user")).scalar_one()


def decide_by_code(engine: sa.Engine, release_id: int, decision: str, comment: str | None, code: str) -> str:
    """Record a decision answered in the Prefect UI form (the flow, as the pipeline role): the one-time ``code``
    the steward issued with ``trajpub steward code`` names the login; the same checks as :func:`decide`. Returns
    the login."""
    return present_code(engine, "SELECT * FROM governance.decide_by_code(:r, :d, :c, :k)",
                        {"r": release_id, "d": decision, "c": comment or "", "k": code})


def present_code(engine: sa.Engine, statement: str, params: dict) -> str:
    """Present a decision code with ``statement`` (sql/027) in a transaction of its own: the code is spent by this
    presentation whatever the answer, and that commits; a refusal is then raised as a one-sentence PolicyError.
    Returns the login that issued the code."""
    with engine.begin() as conn:
        decided_by, refused = conn.execute(sa.text(statement), params).one()
    if refused is not None:
        raise PolicyError(refused, "governance")
    return decided_by


def issue_decision_code(conn: sa.Connection, release_id: int, decision: str, comment: str | None = None) -> str:
    """A one-time code (valid one hour, for this release only) that carries the connected steward's login and
    ``decision`` ('approved', 'rejected' or 'picked') with its ``comment`` into the Prefect UI form: presented
    with another decision or comment it is refused (sql/035), so a swapped answer cannot change what was
    decided."""
    with refusals():
        return conn.execute(sa.text("SELECT governance.issue_decision_code(:r, :d, :c)"),
                            {"r": release_id, "d": decision, "c": comment or ""}).scalar_one()


def approval(conn: sa.Connection, release_id: int) -> dict | None:
    row = conn.execute(sa.text("SELECT decision, steward, comment, decided_at FROM governance.approvals "
                               "WHERE release_id = :r"), {"r": release_id}).mappings().first()
    return dict(row) if row else None


COMPUTING = ("planned", "validated", "protected", "audited")


def interrupted_releases(conn: sa.Connection, dataset: str | None = None) -> list[dict]:
    """Releases left computing by a flow process that is gone: their status is one of :data:`COMPUTING` and
    nobody holds their flow run's alive lock (:func:`tasks.db.alive_lock_key`, held by the flow from before it
    records the release until it ends)."""
    rows = conn.execute(sa.text(
        "SELECT release_id, dataset, status, flow_run_id FROM governance.releases WHERE status = ANY(:s)"
        " AND flow_run_id IS NOT NULL AND (CAST(:d AS text) IS NULL OR dataset = :d) ORDER BY release_id"),
        {"s": list(COMPUTING), "d": dataset}).mappings().all()
    return [dict(r) for r in rows if not lock_is_held(conn, alive_lock_key(str(r["flow_run_id"])))]


def mark_interrupted(conn: sa.Connection, release: dict, detail: str = "") -> None:
    """Record that a release's flow process ended during ``release['status']``: status failed, lineage FAIL.
    Its reserved budget is given back only if its mechanism never started."""
    reason = (f"interrupted while '{release['status']}': the flow process (flow run {release['flow_run_id']}) "
              f"ended without recording an outcome{'; ' + detail if detail else ''}")
    transition(conn, release["release_id"], "failed", reason)
    release_reservation(conn, release["release_id"], reason)
    lineage.emit(conn, release["release_id"], "FAIL", run_id=str(release["flow_run_id"]),
                 dataset=release["dataset"], error=reason)


def transitions(conn: sa.Connection, release_id: int) -> list[dict]:
    """The release's status history, oldest first."""
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT at, from_status, to_status, detail FROM governance.release_transitions WHERE release_id = :r"
        " ORDER BY at"), {"r": release_id}).mappings()]


def stored_report(conn: sa.Connection, release_id: int) -> str | None:
    """The stored HTML review report of a release, None before its audit."""
    return conn.execute(sa.text("SELECT html FROM governance.review_reports WHERE release_id = :r"),
                        {"r": release_id}).scalar()


def review_page(conn: sa.Connection, release_id: int) -> str:
    """The stored HTML review report of a release; refuses a release that has none (not audited)."""
    page = conn.execute(sa.text("SELECT html FROM governance.review_reports WHERE release_id = :r"),
                        {"r": release_id}).scalar()
    if page is None:
        raise TrajpubError(f"release {release_id} has no review report (it has not been audited)",
                           "governance.review_reports")
    return page


def approved_releases(conn: sa.Connection, dataset: str | None = None) -> list[int]:
    """The releases approved and not yet published (of ``dataset``, or of all)."""
    return list(conn.execute(sa.text(
        "SELECT release_id FROM governance.releases WHERE status = 'approved' AND"
        " (CAST(:d AS text) IS NULL OR dataset = :d) ORDER BY release_id"), {"d": dataset}).scalars())


def datasets(conn: sa.Connection, dataset: str | None = None) -> list[str]:
    """The loaded datasets (``dataset`` alone when given; refused when it has not been loaded)."""
    found = list(conn.execute(sa.text(
        "SELECT dataset FROM governance.datasets WHERE (CAST(:d AS text) IS NULL OR dataset = :d) ORDER BY dataset"),
        {"d": dataset}).scalars())
    if dataset and not found:
        raise TrajpubError(f"dataset '{dataset}' has not been loaded", "governance.datasets")
    return found


def set_privacy_unit(conn: sa.Connection, dataset: str, unit: Unit) -> None:
    """A steward's change of the dataset's unit of protection (object or record, its period and w), only before
    its first charge (a ledger is kept in one unit; the database refuses it too, sql/026 and sql/031); ``conn``
    is the steward's."""
    accounts(conn, dataset, lock=True)  # a charge locks the same row: no charge can slip between
    charged = conn.execute(sa.text("SELECT count(*) FROM governance.budget_ledger WHERE dataset = :d"),
                           {"d": dataset}).scalar()
    if charged:
        raise TrajpubError(f"dataset '{dataset}' already has {charged} ledger entries in its unit; the unit "
                           "cannot change under them", "budget unit")
    with refusals():
        conn.execute(sa.text("UPDATE governance.datasets SET privacy_unit = :u, budget_period = :p, budget_w = :w,"
                             " week_start = :ws WHERE dataset = :d"),
                     {"u": unit.subject, "p": unit.period, "w": unit.w, "ws": unit.week_start, "d": dataset})


def set_dataset_policy(conn: sa.Connection, dataset: str, **values: Any) -> None:
    """A steward's change of a dataset's policy columns (the ε caps of :data:`CAP_COLUMNS` and
    :data:`LIFETIME_CAP_COLUMNS`, ``delta_cap``,
    ``four_eyes``, ``staging_retention_days``); ``conn`` is the steward's (the pipeline cannot update them)."""
    allowed = {*CAP_COLUMNS.values(), *LIFETIME_CAP_COLUMNS.values(), "delta_cap", "four_eyes",
               "staging_retention_days"}
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise TrajpubError(f"unknown dataset policy column(s) {', '.join(unknown)}", "governance.datasets")
    assignments = ", ".join(f"{column} = :{column}" for column in values)
    n = conn.execute(sa.text(f"UPDATE governance.datasets SET {assignments} WHERE dataset = :dataset"),
                     {**values, "dataset": dataset}).rowcount
    if not n:
        raise TrajpubError(f"dataset '{dataset}' has not been loaded", "governance.datasets")
