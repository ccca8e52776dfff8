"""No production module is over 600 lines: a module that grows past that is split into modules named for what
they are (docs/design.md, "Architecture")."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("flows", "tasks", "mechanisms", "audits", "trajpub", "expectations", "console")
MAX_LINES = 600


def test_no_production_module_is_over_600_lines():
    modules = [path for folder in PRODUCTION for path in sorted((ROOT / folder).rglob("*.py"))]
    assert len(modules) > 100  # the folders were found
    too_long = {path.relative_to(ROOT).as_posix(): n for path in modules
                if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines (split them by what they do): {too_long}"
