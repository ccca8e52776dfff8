"""Every view is defined in one place, the repeatable ``sql/views.sql`` (docs/design.md, "Data model"): the
numbered migrations that once re-created a view whole stay as they were applied, and no later one defines a view."""

from __future__ import annotations

import re

from tasks import db
from trajpub import config

CREATE_VIEW = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+(\w+\.\w+)", re.IGNORECASE)
LAST_MIGRATION_WITH_A_VIEW = 32  # the numbered migrations up to here predate the views file


def test_every_view_of_the_numbered_migrations_is_defined_in_the_views_file():
    in_migrations = {name for _, _, sql in db.migrations() for name in CREATE_VIEW.findall(sql)}
    in_file = CREATE_VIEW.findall((config.SQL_DIR / db.VIEWS_FILE).read_text())
    assert "published.release_lineage" in in_migrations
    assert len(in_file) == len(set(in_file)) and in_migrations <= set(in_file)


def test_no_later_numbered_migration_defines_a_view():
    later = {name: CREATE_VIEW.findall(sql) for version, name, sql in db.migrations()
             if version > LAST_MIGRATION_WITH_A_VIEW and CREATE_VIEW.findall(sql)}
    assert not later, f"edit sql/{db.VIEWS_FILE} instead of re-creating a view in a migration: {later}"
