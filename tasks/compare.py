"""A comparison's governance: its candidates checked as releases, the budget of all of them charged
honestly, the snapshot validated once and shared, the steward's pick, the others discarded.

Budget: every candidate is a release of its own and is charged its epsilon in the dataset's unit at plan, before
any data is read, exactly as a single release is (:func:`tasks.governance.charge_budget`): running k candidates on
the same data and keeping one composes sequentially, so the comparison costs the sum of its candidates' charges per
account (Dwork and Roth 2014, Thm 3.16). Picking the best of them afterwards is post-processing of released
outputs and costs nothing more. No private selection (Liu and Talwar, STOC 2019; Papernot and Steinke, ICLR 2022)
is claimed: those would charge about 3x one candidate's epsilon instead of the sum, but require the candidates'
scores to be computed privately, and the gate's scores read the raw data.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

import sqlalchemy as sa

from mechanisms import registry
from tasks import governance, protect, public_inputs
from tasks.db import transaction
from tasks.forecast import Replay
from trajpub.comparison import Comparison, parse_comparison
from trajpub.errors import ParameterError, PolicyError, TrajpubError
from trajpub.guarantee import Charge
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.periods import touched, worst_run
from trajpub.spec import ReleaseSpec


@dataclass(frozen=True)
class Planned:
    """One candidate, checked: its label, release spec, mechanism and parsed parameters; after :func:`resolve`, its
    public inputs and the parameters they complete."""

    label: str
    spec: ReleaseSpec
    mechanism: Mechanism
    params: object
    inputs: PublicInputs | None = None


def parse(data: dict | Comparison) -> tuple[Comparison, list[Planned]]:
    """The comparison (``data``: a comparison spec's mapping, or the comparison already parsed) and each
    candidate's release spec and parameters, all checked before anything is planned: an error names the candidate
    (``candidates: glove k=1``) and what is wrong with it."""
    comparison = data if isinstance(data, Comparison) else parse_comparison(data)
    if comparison.shared.get("window") is not None:
        raise ParameterError("a comparison's candidates share one fixed snapshot: give window_start and window_end, "
                             "not a relative window", "window")
    planned = []
    for candidate in comparison.candidates:
        try:
            spec, params = protect.parse_spec(comparison.release_spec(candidate))
        except ParameterError as exc:
            raise ParameterError(exc.message, f"candidate {candidate.label}"
                                 + (f", {exc.where}" if exc.where else "")) from None
        planned.append(Planned(candidate.label, spec, registry.mechanism(spec.mechanism), params))
    return comparison, planned


def resolve(engine: sa.Engine, planned: list[Planned]) -> list[Planned]:
    """Each candidate with the road network and POIs it names read (:func:`tasks.public_inputs.resolve`, as a
    release reads them before its plan): a missing one refuses the comparison before anything is charged."""
    out = []
    for p in planned:
        try:
            params, inputs = public_inputs.resolve(engine, p.mechanism, p.params, p.spec.grid, p.spec)
        except ParameterError as exc:
            raise ParameterError(exc.message, f"candidate {p.label}" + (f", {exc.where}" if exc.where else "")) \
                from None
        out.append(replace(p, params=params, inputs=inputs))
    return out


@dataclass(frozen=True)
class Bill:
    """What a comparison (or a backfill, ``flows/deploy.py``) costs: each item's charge, and per account the total
    with what is left. ``item``: what the items are called (candidate, window). ``peaks``: under a per-period
    unit, per account the most that any run of the unit's periods the items touch would hold after them (ledger
    included) and where that run starts: the figure the cap bounds."""

    charges: list[tuple[str, Charge]]
    totals: dict[str, tuple[float, float]]  # account -> (epsilon, delta) summed over its items
    accounts: dict[str, governance.Account]
    item: str = "candidate"
    peaks: dict[str, tuple[float, datetime]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """The bill as a steward reads it before confirming."""
        out = [f"- {label}: " + (f"{c.account} epsilon {c.epsilon:g} per {c.unit}" + (f", delta {c.delta:g}"
                                                                                    if c.delta else "")
                                 if c.epsilon is not None else "no epsilon (not DP; counted, not capped)")
               for label, c in self.charges]
        for account, (eps, delta) in self.totals.items():
            acc = self.accounts[account]
            n = f"{sum(1 for _, c in self.charges if c.account == account)} {self.item}(s)"
            if acc.unit in ("object", "record") or acc.cap is None:
                out.append(f"TOTAL {account}: epsilon {eps:g} per {acc.unit}" + (f", delta {delta:g}" if delta else "")
                           + f" for {n}; " + (f"{acc.left:g} of the cap {acc.cap:g} is left before them, "
                                              f"{acc.left - eps:g} after" if acc.cap is not None else "not capped"))
                continue
            most, start = self.peaks[account]
            period = acc.unit.removeprefix("object-")
            one = acc.cap_words == f"per {acc.unit}"  # per period, or w-event over runs of periods
            span, where = ((period, f"the {period} from {start:%Y-%m-%d}") if one else
                           (f"run of {period}s the cap spans", f"the run from {start:%Y-%m-%d}"))
            out.append(f"TOTAL {account}: epsilon {eps:g} per object over {n}" + (f", delta {delta:g}" if delta else "")
                       + f" (each charged to the {period}s its window touches); the most any {span} holds after "
                       f"them is epsilon {most:g} ({where}, the ledger included), within the cap {acc.cap:g} "
                       f"{acc.cap_words}")
        return out


def bill(conn: sa.Connection, planned: list[Planned], item: str = "candidate") -> Bill:
    """Every (resolved) item's charge in the dataset's unit and the totals per account; refuses (one sentence) an
    item the ledger would refuse on its own, and items that together pass an account's epsilon cap (the ledger's
    rule replayed item by item on each item's window, :class:`tasks.forecast.Replay`: per period or lifetime) or
    delta cap. ``item``: what the items are (a comparison's candidates on one window, a backfill's windows).
    Reads no data."""
    dataset = planned[0].spec.dataset
    charges = []
    for p in planned:
        try:
            charges.append((p.label, governance.check_budget(conn, dataset, p.mechanism.guarantee(p.params),
                                                             (p.spec.window_start, p.spec.window_end))))
        except PolicyError as exc:
            raise PolicyError(f"{item} {p.label}: {exc.message}", exc.where) from None
    accounts = governance.accounts(conn, dataset)
    totals: dict[str, tuple[float, float]] = {}
    peaks: dict[str, tuple[float, datetime]] = {}
    for _, c in charges:
        if c.epsilon is not None:
            eps, delta = totals.get(c.account, (0.0, 0.0))
            totals[c.account] = (eps + c.epsilon, delta + c.delta)
    for account, (eps, delta) in totals.items():
        acc = accounts[account]
        if acc.cap is not None:  # each item in order, on its own window, after the items before it
            replay = Replay.read(conn, dataset, account)
            for p, (label, c) in zip(planned, charges, strict=True):
                if c.account != account:
                    continue
                window = (p.spec.window_start, p.spec.window_end)
                if why := replay.refusal(*window, c.epsilon):
                    raise PolicyError(f"the {item}s together need {account} epsilon {eps:g} per {acc.unit} (each is "
                                      f"charged: their releases of the same objects compose), and {item} {label} "
                                      f"would find {why}; ask for fewer or cheaper {item}s", "governance.budget_ledger")
                replay.charge(*window, c.epsilon)
            if (unit := replay.unit).period is not None:  # the figure the per-period cap bounds, after every item
                runs = [worst_run(replay.spent, *touched(p.spec.window_start, p.spec.window_end, unit.period, unit.tz,
                                                          unit.week_start), unit)
                        for p, (_, c) in zip(planned, charges, strict=True) if c.account == account]
                start, most = max(runs, key=lambda r: r[1])
                peaks[account] = (most, start)
        if delta > 0 and acc.delta_spent + delta > acc.delta_cap * (1 + 1e-12):
            raise PolicyError(f"the {item}s together need delta {delta:g} per {acc.unit} but dataset "
                              f"'{dataset}' has only {max(acc.delta_cap - acc.delta_spent, 0):g} of its delta cap "
                              f"{acc.delta_cap:g} left", "governance.budget_ledger")
    return Bill(charges, totals, accounts, item, peaks)


def share_validation(conn: sa.Connection, validated: int, release_id: int) -> None:
    """Record the snapshot ``validated`` was validated on as ``release_id``'s too (the same snapshot, suite and
    result; its quarantined points stay under ``validated``), and move ``release_id`` to validated."""
    conn.execute(sa.text(
        "UPDATE governance.releases r SET snapshot_hash = v.snapshot_hash, snapshot_points = v.snapshot_points,"
        " updated_at = now() FROM governance.releases v WHERE v.release_id = :v AND r.release_id = :r"),
        {"v": validated, "r": release_id})
    snapshot = governance.get_release(conn, validated)["summary"].get("snapshot")
    governance.merge_summary(conn, release_id, {"snapshot": snapshot, "validated_with": validated})
    conn.execute(sa.text(
        "INSERT INTO governance.validation_results (release_id, suite, success, n_rows, n_quarantined, result)"
        " SELECT :r, suite, success, n_rows, n_quarantined, result FROM governance.validation_results"
        " WHERE release_id = :v"), {"v": validated, "r": release_id})
    governance.transition(conn, release_id, "validated", f"the comparison's snapshot, validated as release "
                                                         f"{validated} (its quarantine is there)")


def candidates(conn: sa.Connection, release_id: int) -> list[int]:
    """The release ids of the comparison ``release_id`` belongs to (planned by the same flow run), in order."""
    return [r[0] for r in conn.execute(sa.text(
        "SELECT release_id FROM governance.releases WHERE flow_run_id = (SELECT flow_run_id FROM"
        " governance.releases WHERE release_id = :r) ORDER BY release_id"), {"r": release_id})] or [release_id]


def of_flow_run(conn: sa.Connection, flow_run_id: str) -> list[dict]:
    """``release_id`` and ``status`` of each candidate a comparison's flow run planned, in order."""
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT release_id, status FROM governance.releases WHERE flow_run_id = :f ORDER BY release_id"),
        {"f": str(flow_run_id)}).mappings()]


def pick(conn: sa.Connection, release_id: int, comment: str | None) -> str:
    """Record the steward's pick (sql/021) as the login of ``conn`` (the CLI): ``release_id`` approved and named
    the pick in its comparison record, the comparison's other candidates that await approval rejected, as one
    decision of one login; returns the login."""
    with governance.refusals():
        conn.execute(sa.text("SELECT governance.pick(:r, :c)"), {"r": release_id, "c": comment or ""})
    return conn.execute(sa.text("SELECT session_user")).scalar_one()


def pick_by_code(engine: sa.Engine, release_id: int, comment: str | None, code: str) -> str:
    """The pick answered in the Prefect UI form (the flow, as the pipeline role): the one-time ``code`` issued for
    ``release_id`` names the steward, and is spent by this presentation whatever the answer
    (:func:`tasks.governance.present_code`)."""
    return governance.present_code(engine, "SELECT * FROM governance.pick_by_code(:r, :c, :k)",
                                   {"r": release_id, "c": comment or "", "k": code})


def outcome(conn: sa.Connection, release_id: int, label: str) -> dict:
    """What the comparison's review reads of one candidate: status, label, gate decision, attack results,
    utility, charge, report artifact."""
    rel = governance.get_release(conn, release_id)
    s = rel["summary"] or {}
    charge = governance.release_charge(conn, release_id)
    attacks = [dict(a) for a in conn.execute(sa.text(
        "SELECT attack, resolution_m, risk, risk_ci_low, risk_ci_high, threshold, verdict, passed"
        " FROM governance.audit_results WHERE release_id = :r AND error IS NULL"), {"r": release_id}).mappings()]
    return {"release_id": release_id, "label": label,
            "mechanism": rel["mechanism"], "status": rel["status"], "failure": rel["failure_reason"],
            "gate": s.get("gate", {}), "attacks": attacks, "utility": s.get("utility", {}),
            "epsilon": None if charge is None or charge["unit_epsilon"] is None else float(charge["unit_epsilon"]),
            "account": None if charge is None else charge["account"], "report_artifact": s.get("report_artifact")}


def discard_staging(name: str, release_id: int) -> str:
    """Purge the staging of a candidate of comparison ``name`` that was not picked (it must have ended: rejected
    as not picked, blocked, failed); returns its status."""
    def purge(conn) -> str:
        status = governance.get_release(conn, release_id)["status"]
        if status not in governance.FINAL:
            raise TrajpubError(f"release {release_id} of comparison {name} is still '{status}'", "discard")
        governance.purge_staging(conn, release_id)
        return status

    return transaction(purge, f"discard the staging of release {release_id}")
