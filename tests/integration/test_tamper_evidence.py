"""The owner could switch off the append-only triggers and empty the ledger and approvals
without a trace. Now every row chains the SHA-256 of the one before, and ``trajpub verify`` says which row was
deleted or edited, even when the owner did it with triggers off. Each tampering here happens inside the owner's
transaction, which the check reads and which is then rolled back (the shared database stays intact)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tasks import chains, governance
from tests.integration.conftest import cli
from trajpub.errors import TrajpubError
from trajpub.guarantee import Guarantee, PrivacyMap

# serial: the tampering needs the fixture's charges to be the newest rows of the ledger's one chain, which a
# release charging in the other test worker would append to meanwhile
pytestmark = [pytest.mark.integration, pytest.mark.serial]


@pytest.fixture
def charged(engine, dataset_name) -> list[int]:
    """Three ledger entries of a fresh dataset (the newest rows of the ledger's chain)."""
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO raw.datasets (dataset) VALUES (:d)"), {"d": dataset_name})
        conn.execute(sa.text("INSERT INTO governance.datasets (dataset) VALUES (:d)"), {"d": dataset_name})
    entries = []
    for _ in range(3):
        with engine.begin() as conn:
            rid = governance.create_release(conn, {"dataset": dataset_name, "mechanism": "m", "requested_by": "x",
                                                   "window_start": None, "window_end": None}, {}, {})
            governance.charge_budget(conn, rid, dataset_name, "m", Guarantee(
                model="epsilon-DP", privacy_unit="one object", statement="test", proven=True, epsilon=1.0,
                privacy_map=PrivacyMap("epsilon-DP", "per_object")))
            entries.append(conn.execute(sa.text("SELECT entry_id FROM governance.budget_ledger WHERE "
                                                "release_id = :r"), {"r": rid}).scalar_one())
    return entries


def problems_after(owner: sa.Engine, tmp_path, *statements: str, bypass: str) -> list[str]:
    """Run ``statements`` as the owner with the triggers bypassed, check the chains in that transaction, roll
    back."""
    with owner.connect() as conn:
        tx = conn.begin()
        try:
            if bypass == "replica":
                conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
            else:
                conn.execute(sa.text("ALTER TABLE governance.budget_ledger DISABLE TRIGGER USER"))
            for sql in statements:
                conn.execute(sa.text(sql))
            problems, _ = chains.verify(conn, tmp_path / "anchor.json", new_anchor=True)
        finally:
            tx.rollback()
    return problems


def test_the_chains_are_intact_after_real_use(engine, charged, tmp_path):
    out = cli("verify", "--anchor", str(tmp_path / "cli-anchor.json"), "--new-anchor")
    assert out.returncode == 0 and out.stdout.startswith("intact: governance.budget_ledger"), out.stderr
    out = cli("verify", "--anchor", str(tmp_path / "cli-anchor.json"))  # against the anchor just written
    assert out.returncode == 0 and out.stdout.startswith("intact: governance.budget_ledger"), out.stderr
    with engine.begin() as conn:
        assert chains.verify(conn, tmp_path / "anchor.json", new_anchor=True)[0] == []


@pytest.mark.parametrize("bypass", ["replica", "disabled triggers"])
def test_a_deleted_or_edited_ledger_row_is_found_and_named(owner, charged, tmp_path, bypass):
    first, middle, last = charged
    deleted = problems_after(owner, tmp_path, f"DELETE FROM governance.budget_ledger WHERE entry_id = {middle}",
                             bypass=bypass)
    assert len(deleted) == 1 and "missing (deleted), just before governance.budget_ledger row entry_id = " \
        f"{last}" in deleted[0], deleted
    edited = problems_after(owner, tmp_path, f"UPDATE governance.budget_ledger SET epsilon = 0 WHERE entry_id = "
                                             f"{first}", bypass=bypass)
    assert edited == [(f"governance.budget_ledger row entry_id = {first} was edited: its columns no longer match "
                      "its digest")]
    tail = problems_after(owner, tmp_path, f"DELETE FROM governance.budget_ledger WHERE entry_id = {last}",
                          bypass=bypass)
    assert len(tail) == 1 and "the last chain row(s)" in tail[0] and "missing (deleted)" in tail[0], tail
    emptied = problems_after(owner, tmp_path, "DELETE FROM governance.budget_ledger", bypass=bypass)
    assert any("missing (deleted)" in p for p in emptied), emptied


def test_a_rewritten_chain_is_found_against_the_last_check(engine, owner, charged, tmp_path):
    """An owner who deletes a row and re-hashes the chain after it (and its head) leaves every link valid; the
    head anchored by the previous clean check no longer matches."""
    with engine.begin() as conn:
        assert chains.verify(conn, tmp_path / "anchor.json", new_anchor=True)[0] == []  # anchors the heads
    problems = rewritten_chain_problems(owner, charged, tmp_path / "anchor.json")
    assert len(problems) == 1 and "the chain was rewritten since" in problems[0], problems


def test_a_missing_anchor_is_not_a_clean_check(engine, owner, charged, tmp_path):
    """With the anchor file gone, a rewritten chain would look intact: the check says the anchor is missing, exits
    1 and writes no new anchor (so the rewrite is not adopted as the new truth)."""
    anchor = tmp_path / "gone.json"
    with pytest.raises(TrajpubError, match="the anchor of the last check is missing") as refusal:
        rewritten_chain_problems(owner, charged, anchor)
    assert refusal.value.where == f"file {anchor}" and not anchor.exists()
    out = cli("verify", "--anchor", str(anchor))
    assert out.returncode == 1 and "intact" not in out.stdout, out.stdout
    assert out.stderr.startswith("error: the chains' links hold") and "Traceback" not in out.stderr, out.stderr
    assert not anchor.exists()


def rewritten_chain_problems(owner: sa.Engine, charged: list[int], anchor) -> list[str]:
    """Delete the middle of ``charged`` and re-hash the chain after it and its head, as an owner covering their
    tracks would, then check against ``anchor`` in that transaction; roll back."""
    _, middle, last = charged
    rehash = ("UPDATE governance.budget_ledger b SET chain_seq = b.chain_seq - 1, prev_hash = p.row_hash FROM "
              "governance.budget_ledger p WHERE p.entry_id = :prev AND b.entry_id = :last")
    with owner.connect() as conn:
        tx = conn.begin()
        try:
            conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
            conn.execute(sa.text("SET LOCAL timezone = 'UTC'"))
            conn.execute(sa.text("SET LOCAL extra_float_digits = 1"))
            conn.execute(sa.text("DELETE FROM governance.budget_ledger WHERE entry_id = :m"), {"m": middle})
            conn.execute(sa.text(rehash), {"prev": charged[0], "last": last})
            conn.execute(sa.text("UPDATE governance.budget_ledger b SET row_hash = governance.row_digest(to_jsonb(b))"
                                 " WHERE entry_id = :l"), {"l": last})
            conn.execute(sa.text("UPDATE governance.chain_heads h SET chain_seq = b.chain_seq, row_hash = b.row_hash"
                                 " FROM governance.budget_ledger b WHERE h.table_name = 'budget_ledger' AND "
                                 "b.entry_id = :l"), {"l": last})
            return chains.verify(conn, anchor)[0]
        finally:
            tx.rollback()
