"""The review record of a release: everything a steward reads about it, from governance in one function
(:func:`read_review`), rendered three ways: the HTML report (:func:`tasks.report.render`), the approval form's
markdown (:func:`flows.review.review_markdown`) and ``trajpub release show`` (``flows/cli/release.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from tasks import governance
from trajpub.window import window_words


def _part(record: str, key: str, doc: str) -> property:
    """A read-only property: the mapping under ``key`` of the review's ``record`` (``release`` or ``summary``),
    empty when absent or null."""
    return property(lambda review: getattr(review, record).get(key) or {}, doc=doc)


@dataclass(frozen=True)
class Review:
    """``release``: the ``governance.releases`` row; ``budget``: :func:`tasks.governance.budget_lines`;
    ``audits``: the ``governance.audit_results`` rows, one per attack and adversary's cell size (an attack that
    failed or is not applicable has ``success_rate`` None, its ``outcome`` and its reason in ``error``; a measured
    one its risk's interval ``risk_ci_low``/``risk_ci_high`` and its three-way ``verdict``, None when not gated:
    :func:`tasks.report.attack_verdict` words it);
    ``validation``: the raw-point validation's ``n_rows``, ``n_quarantined`` and ``result`` (each expectation's
    count, :func:`tasks.validate`; None before it);
    ``transitions``: the status history, oldest first; ``approval``: the steward's recorded decision (None
    before it)."""

    release: dict
    budget: list[str]
    audits: list[dict]
    validation: dict | None = None
    transitions: tuple[dict, ...] = ()
    approval: dict | None = None

    @property
    def release_id(self) -> int:
        return self.release["release_id"]

    guarantee = _part("release", "guarantee", "The release's guarantee as recorded.")
    summary = _part("release", "summary", "The release's summary: what each stage recorded.")
    gate = _part("summary", "gate", "The gate's decision as the audit stored it: blocked, reasons, privacy and "
                                    "utility verdicts, per_utility.")
    utility = _part("summary", "utility", "The utility figures the audit measured.")
    mechanism_run = _part("summary", "mechanism",
                          "The mechanism's run figures (steward only: never in lineage or published).")

    planned_decide_on: str | None = None

    @property
    def decide_on(self) -> str | None:
        """What the gate compared with each threshold (:data:`audits.gate.DECIDE_ON`), as the stored policy says;
        ``point`` for a release audited before policies said (the gate then decided on the point estimate); for a
        release that never reached its gate, what the policy it was planned under decides on
        (``planned_decide_on``; None when not even that is recorded)."""
        if self.gate:
            return (self.gate.get("policy") or {}).get("decide_on", "point")
        return self.planned_decide_on

    @property
    def snapshot(self) -> str:
        """The snapshot in words: its points and digest, or that none was taken (a release that ended before
        reading data)."""
        n = self.release.get("snapshot_points")
        if n is None:
            return "no snapshot taken (the release ended before it read any data)"
        return f"snapshot of {n:,} points, sha256 {self.release.get('snapshot_hash')}"

    @property
    def quarantine_reasons(self) -> list[tuple[str, int]]:
        """Why raw points were quarantined: each failed expectation's words and how many points failed it, the
        most first (a point may fail several)."""
        found = ((self.validation or {}).get("result") or {}).get("expectations", [])
        counts = [(e.get("says") or e.get("expectation"), int(e.get("unexpected_count") or 0)) for e in found]
        return sorted(((says, n) for says, n in counts if n > 0), key=lambda x: -x[1])

    def quarantine_words(self) -> list[str]:
        """:attr:`quarantine_reasons` as lines: count and share of the validated points."""
        total = (self.validation or {}).get("n_rows") or 0
        return [f"{says}: {n:,} points" + (f" ({n / total:.1%})" if total else "")
                for says, n in self.quarantine_reasons]

    @property
    def set_aside(self) -> list[tuple[str, str, str]]:
        """The adversary's cell sizes an attack could not measure and the gate set aside (attack, size in m,
        why: too few objects there), as the audit recorded them with the attack's measured results."""
        seen: dict[tuple[str, str], str] = {}
        for a in self.audits:
            for size, why in ((a.get("evidence") or {}).get("unmeasured_resolutions") or {}).items():
                seen.setdefault((a["attack"], str(size)), why)
        return [(attack, size, why) for (attack, size), why in sorted(seen.items())]

    @property
    def measurable_links(self) -> list[dict]:
        """The measured attacks whose risk's interval lies above 0 though the gate passed them: the release links
        measurably more than chance (or, against controls, than people it never saw), under the threshold. One row
        per attack, its resolution with the highest lower end."""
        best: dict[str, dict] = {}
        measured = [a for a in self.audits if a.get("risk_ci_low") is not None and a["risk_ci_low"] > 0
                    and a.get("passed")]
        for a in measured:
            if a["attack"] not in best or a["risk_ci_low"] > best[a["attack"]]["risk_ci_low"]:
                best[a["attack"]] = a
        return [best[name] for name in sorted(best)]

    @property
    def window(self) -> str:
        """The snapshot's window in words, with how a relative window was resolved (:mod:`trajpub.window`)."""
        return window_words(self.release.get("window_start"), self.release.get("window_end"),
                            (self.release.get("spec") or {}).get("window"))

    @property
    def policy_label(self) -> str:
        """The gate policy the release was gated by: its name and registered version (:mod:`tasks.policies`)."""
        p = self.summary.get("gate_policy") or {}
        return f"{p['name']} v{p['version']}" if p else "(not recorded)"


def read_review(conn: sa.Connection, release_id: int) -> Review:
    """The review record of ``release_id`` as governance holds it now (refuses an unknown release)."""
    rel = governance.get_release(conn, release_id)
    audits = [dict(r) for r in conn.execute(sa.text(
        "SELECT attack, resolution_m, success_rate, ci_low, ci_high, baseline, risk, risk_ci_low, risk_ci_high,"
        " threshold, verdict, passed, outcome, error, evidence FROM governance.audit_results WHERE release_id = :r"
        " ORDER BY attack, resolution_m"),
        {"r": release_id}).mappings()]
    validation = conn.execute(sa.text("SELECT n_rows, n_quarantined, result FROM governance.validation_results "
                                      "WHERE release_id = :r"), {"r": release_id}).mappings().first()
    return Review(release=rel, budget=governance.budget_lines(conn, rel), audits=audits,
                  validation=dict(validation) if validation else None,
                  transitions=tuple(governance.transitions(conn, release_id)),
                  approval=governance.approval(conn, release_id), planned_decide_on=_planned_decide_on(conn, rel))


def _planned_decide_on(conn: sa.Connection, rel: dict) -> str | None:
    """What the registered policy a release was planned under decides on (None when it names none)."""
    from tasks import policies
    from trajpub.errors import PolicyError

    p = (rel.get("summary") or {}).get("gate_policy") or {}
    if not p:
        return None
    try:
        return policies.load(conn, p["name"], p.get("version")).policy.decide_on
    except PolicyError:
        return None
