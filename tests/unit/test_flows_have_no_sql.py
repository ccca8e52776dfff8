"""Flows only call tasks (docs/design.md, "Architecture"): no SQL and no connection of their own in
``flows/``; every read and write of governance goes through a task and :func:`tasks.db.transaction`. And no
module of the flows and their tasks is over 600 lines."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE)\b|\.begin\(|\.connect\(|\bsa\.text\(|(?<![\w.])text\(")
PRODUCTION = ("flows", "tasks")


def test_no_module_of_flows_holds_sql_or_opens_a_connection():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in sorted((ROOT / "flows").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if SQL.search(line)]
    assert not found, "\n".join(found)


def test_no_module_of_the_flows_and_tasks_is_over_600_lines():
    long = [f"{path.relative_to(ROOT)}: {n} lines"
            for folder in PRODUCTION for path in sorted((ROOT / folder).rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > 600]
    assert not long, "\n".join(long)
