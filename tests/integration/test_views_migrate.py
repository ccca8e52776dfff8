"""The repeatable views file, ``sql/views.sql`` (docs/design.md, "Data model"): ``migrate`` runs it after the
numbered migrations when it changed, records its digest, leaves the views as they were (columns, definition,
grants), and a file the server refuses is refused in one sentence with nothing of it applied."""

from __future__ import annotations

import hashlib
import shutil

import pytest
import sqlalchemy as sa

from tasks import db
from trajpub import config
from trajpub.errors import TrajpubError

VIEW = "published.release_lineage"


def recorded(owner) -> str | None:
    with owner.connect() as conn:
        return conn.execute(sa.text("SELECT sha256 FROM governance.repeatable_migrations WHERE name = :n"),
                            {"n": db.VIEWS_FILE}).scalar()


def view_state(owner) -> tuple:
    """The view's definition, columns and grants."""
    with owner.connect() as conn:
        return conn.execute(sa.text(
            "SELECT pg_get_viewdef(c.oid), "
            "       (SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute"
            "         WHERE attrelid = c.oid AND attnum > 0), c.relacl::text[]"
            "  FROM pg_class c WHERE c.oid = to_regclass(:v)"), {"v": VIEW}).one()


def test_views_file_runs_again_only_when_it_changed_and_keeps_the_views_as_they_were(engine, owner):
    digest = hashlib.sha256((config.SQL_DIR / db.VIEWS_FILE).read_bytes()).hexdigest()
    assert recorded(owner) == digest
    assert db.migrate(owner) == []  # unchanged: nothing runs
    before = view_state(owner)
    with owner.begin() as conn:  # as if the file had been edited since it was last applied
        conn.execute(sa.text("UPDATE governance.repeatable_migrations SET sha256 = 'older' WHERE name = :n"),
                     {"n": db.VIEWS_FILE})
    assert db.migrate(owner) == [db.VIEWS_FILE]
    assert recorded(owner) == digest
    assert view_state(owner) == before
    assert {"trajpub_consumer=r/postgres", "trajpub_pipeline=r/postgres"} <= set(before[2])
    with engine.connect() as conn:  # the pipeline role, as a consumer would, still reads it
        conn.execute(sa.text(f"SELECT count(*) FROM {VIEW}")).scalar_one()


def test_a_views_file_the_server_refuses_applies_nothing(engine, owner, tmp_path, monkeypatch):
    for path in config.SQL_DIR.glob("*.sql"):
        shutil.copy(path, tmp_path)
    sql = (tmp_path / db.VIEWS_FILE).read_text()
    (tmp_path / db.VIEWS_FILE).write_text(sql + "\nSELECT no_such_column FROM governance.releases;\n")
    monkeypatch.setattr(config, "SQL_DIR", tmp_path)
    before, digest = view_state(owner), recorded(owner)
    with pytest.raises(TrajpubError, match="the file failed and nothing of it was applied") as refused:
        db.migrate(owner)
    assert refused.value.where == f"file sql/{db.VIEWS_FILE}" and "no_such_column" in refused.value.message
    assert view_state(owner) == before and recorded(owner) == digest  # the drop and create were rolled back
