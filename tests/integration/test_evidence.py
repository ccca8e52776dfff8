"""Evidence the database checks (sql/036): the pipeline login alone cannot forge a release that awaits approval,
and a release awaits approval only with an intact chain charge -> seal -> the auditor's attested audit, report and
gate decision; `trajpub verify` names the first break of a published release's chain."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tasks import chains, governance, publish
from tasks.db import auditor_engine, steward_engine
from tests.integration.conftest import new_release, record_audit, to_protected
from tests.integration.test_roles import refused
from trajpub.errors import PolicyError

pytestmark = pytest.mark.integration


def protected(engine: sa.Engine, dataset: str, charged: bool = True) -> int:
    """A release as the pipeline leaves it for the audit: charged (unless not), validated, a candidate staged and
    sealed by the pipeline's login, protected."""
    rid = new_release(engine, dataset)
    to_protected(engine, rid, charged=charged)
    return rid


def audited(engine: sa.Engine, dataset: str, charged: bool = True, blocked: bool = False) -> int:
    """A release whose audit the auditor recorded and attested, then moved to audited by the pipeline."""
    rid = protected(engine, dataset, charged)
    with auditor_engine().begin() as conn:
        record_audit(conn, rid, blocked)
        governance.attest_audit(conn, rid)
    with engine.begin() as conn:
        governance.transition(conn, rid, "audited")
    return rid


def await_approval(engine: sa.Engine, rid: int) -> None:
    with engine.begin() as conn:
        governance.transition(conn, rid, "awaiting_approval")


def test_the_pipeline_login_alone_cannot_forge_the_audits_evidence(engine, bare_dataset):
    """The outside probe's forgery, as the pipeline in SQL: its own charge, validation and sealed candidate; then
    audit results, a review report, a gate decision and an attestation, written or copied from another release:
    every one refused, and the release cannot await approval."""
    genuine = audited(engine, bare_dataset)
    rid = protected(engine, bare_dataset)
    for statement, why in (
            (("INSERT INTO governance.audit_results (release_id, attack, threshold, passed, outcome, error, evidence)"
             " VALUES (:r, 'a1', 0.2, true, 'not applicable', 'forged', '{}')"), "permission denied"),
            (("INSERT INTO governance.review_reports (release_id, html) SELECT :r, html FROM governance.review_reports"
             " WHERE release_id = :g"), "permission denied"),
            (("UPDATE governance.releases SET summary = summary || (SELECT jsonb_build_object('gate', summary -> 'gate')"
             " FROM governance.releases WHERE release_id = :g) WHERE release_id = :r"), "by the auditor only"),
            ("SELECT governance.record_gate(:r, '{}', '{\"blocked\": false}')", "permission denied"),
            ("SELECT governance.attest_audit(:r)", "permission denied"),
            (("INSERT INTO governance.audit_attestations (release_id, seal_hash, audits_hash, report_hash, gate_hash,"
             " attested_by) SELECT :r, seal_hash, audits_hash, report_hash, gate_hash, attested_by"
             " FROM governance.audit_attestations WHERE release_id = :g"), "permission denied")):
        refused(engine, statement, why, r=rid, g=genuine)
    with pytest.raises(PolicyError, match="cannot become audited: its staged candidate has no audit result"), \
            engine.begin() as conn:
        governance.transition(conn, rid, "audited")
    with engine.connect() as conn:
        assert governance.get_release(conn, rid)["status"] == "protected"
        assert governance.evidence_break(conn, rid) == "the auditor has not attested its audit"


@pytest.mark.parametrize(("break_it", "why"), [
    (None, "the ledger holds no charge for it"),
    ("UPDATE governance.audit_results SET passed = false, evidence = '{\"edited\": 1}' WHERE release_id = :r",
     "its audit results changed after the auditor attested them"),
    ("UPDATE governance.review_reports SET html = '<p>all clear</p>' WHERE release_id = :r",
     "its review report changed after the auditor attested it"),
    (("UPDATE governance.releases SET summary = jsonb_set(summary, '{gate,reasons}', '[\"edited\"]')"
     " WHERE release_id = :r"), "its gate decision changed after the auditor attested it"),
])
def test_a_release_awaits_approval_only_with_an_intact_chain(engine, owner, bare_dataset, break_it, why):
    """Each link broken after the auditor's attestation (by the database's owner, who can write anything), or a
    charge never made: the move to awaiting_approval is refused naming the break; the intact chain moves."""
    rid = audited(engine, bare_dataset, charged=break_it is not None)
    if break_it:
        with owner.begin() as conn:
            conn.execute(sa.text(break_it), {"r": rid})
    with pytest.raises(PolicyError, match=f"cannot await approval: {why}"):
        await_approval(engine, rid)
    intact = audited(engine, bare_dataset)
    await_approval(engine, intact)
    blocked = audited(engine, bare_dataset, blocked=True)
    with pytest.raises(PolicyError, match="cannot await approval: the attested gate blocked it"):
        await_approval(engine, blocked)


def test_verify_names_the_first_break_of_a_published_release(engine, owner, bare_dataset, stewards):
    rid = audited(engine, bare_dataset)
    await_approval(engine, rid)
    with steward_engine("ada").begin() as conn:
        governance.decide(conn, rid, "approved", None)
    publish.publish(engine, rid, None)
    def rewrite(html: str) -> list[str]:
        with owner.begin() as conn:
            conn.execute(sa.text("UPDATE governance.review_reports SET html = :h WHERE release_id = :r"),
                         {"h": html, "r": rid})
        with engine.begin() as conn:
            return [p for p in chains.release_breaks(conn) if p.startswith(f"release {rid}:")]

    # rewritten, then put back at once: the suite's other `trajpub verify` checks share this database
    assert rewrite("<p>rewritten</p>") == [f"release {rid}: its review report changed after the auditor attested it"]
    assert rewrite("<p>test</p>") == []
