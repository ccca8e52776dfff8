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
    ``validation``: the raw-point validation's ``n_rows`` and ``n_quarantined`` (None before it);
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

    @property
    def decide_on(self) -> str:
        """What the gate compared with each threshold (:data:`audits.gate.DECIDE_ON`), as the stored policy says;
        ``point`` for a release audited before policies said (the gate then decided on the point estimate)."""
        return (self.gate.get("policy") or {}).get("decide_on", "point")

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
    validation = conn.execute(sa.text("SELECT n_rows, n_quarantined FROM governance.validation_results "
                                      "WHERE release_id = :r"), {"r": release_id}).mappings().first()
    return Review(release=rel, budget=governance.budget_lines(conn, rel), audits=audits,
                  validation=dict(validation) if validation else None,
                  transitions=tuple(governance.transitions(conn, release_id)),
                  approval=governance.approval(conn, release_id))
