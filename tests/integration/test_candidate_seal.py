"""The audited candidate is the published one: staging seals the candidate (row count and content digest,
sql/034), and publication recomputes the digest from the staged rows and refuses a candidate that changed in
between, publishing nothing and recording why (docs/design.md, "Sealed candidates")."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tasks import governance, outcomes
from tests.integration.conftest import new_release, to_awaiting_approval

pytestmark = pytest.mark.integration


def approved(engine, stewards, dataset: str) -> int:
    rid = new_release(engine, dataset)
    to_awaiting_approval(engine, rid)
    with stewards["ada"].begin() as conn:
        governance.decide(conn, rid, "approved", "reviewed")
    return rid


def seal(engine, rid: int) -> tuple[int, str]:
    with engine.connect() as conn:
        return tuple(conn.execute(sa.text("SELECT n_rows, content_hash FROM governance.candidate_seals "
                                          "WHERE release_id = :r"), {"r": rid}).one())


def published_table_exists(engine, dataset: str, rid: int) -> bool:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT to_regclass(:t)"), {"t": f"published.{dataset}__r{rid}"}).scalar() \
            is not None


@pytest.mark.parametrize("tamper", [
    ("UPDATE staging.candidate_points SET geom = ST_SetSRID(ST_MakePoint(116.0, 40.0), 4326)"
     " WHERE release_id = :r AND seq = 0"),
    "UPDATE staging.candidate_points SET t = t + interval '1 minute' WHERE release_id = :r",
    "DELETE FROM staging.candidate_points WHERE release_id = :r AND seq = 1",
], ids=["moved point", "shifted times", "deleted row (triggers off)"])
def test_a_candidate_changed_after_its_audit_is_not_published(engine, owner, stewards, bare_dataset, tamper):
    rid = approved(engine, stewards, bare_dataset)
    n_rows, digest = seal(engine, rid)
    assert n_rows > 1 and len(digest) == 64
    with owner.begin() as conn:  # the database's owner edits the staged rows between audit and publication
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))  # the staging triggers off too
        assert conn.execute(sa.text(tamper), {"r": rid}).rowcount >= 1
    outcome = outcomes.publish_or_fail(rid, None)
    assert outcome["status"] == "failed"
    assert "its staged candidate changed after it was staged and audited" in outcome["reason"]
    assert not published_table_exists(engine, bare_dataset, rid)
    rel = outcomes.release(rid)
    assert rel["status"] == "failed" and "changed after it was staged" in rel["failure_reason"]
    assert rel["published_table"] is None


def test_the_sealed_candidate_publishes_and_its_seal_is_fixed(engine, owner, stewards, bare_dataset):
    rid = approved(engine, stewards, bare_dataset)
    n_rows, digest = seal(engine, rid)
    with engine.connect() as conn:  # the digest is the staged rows' own, computed again the same
        assert conn.execute(sa.text("SELECT governance.candidate_digest(:r)"), {"r": rid}).scalar_one() == {
            "rows": n_rows, "hash": digest}
    with pytest.raises(sa.exc.DBAPIError, match="append-only"), owner.begin() as conn:
        conn.execute(sa.text("UPDATE governance.candidate_seals SET content_hash = 'x' WHERE release_id = :r"),
                         {"r": rid})
    assert outcomes.publish_or_fail(rid, None)["status"] == "published"
    assert published_table_exists(engine, bare_dataset, rid)
