"""Flows only call tasks (docs/design.md, "Architecture"): no SQL and no connection of their own in
``flows/``; every read and write of governance goes through a task and :func:`tasks.db.transaction` (module
sizes: tests/unit/test_module_size.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE)\b|\.begin\(|\.connect\(|\bsa\.text\(|(?<![\w.])text\(")


def test_no_module_of_flows_holds_sql_or_opens_a_connection():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in sorted((ROOT / "flows").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if SQL.search(line)]
    assert not found, "\n".join(found)

