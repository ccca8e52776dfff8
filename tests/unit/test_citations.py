"""Nothing in the repository cites a document outside it.

The design notes and paper specifications the project was built from are not part of the repository, so a
comment that cites them ("spec §5.4", "seed 003", "DESIGN.md", "oracle 12", "[REC]") points nowhere for a
maintainer. Code cites the paper (authors, year, section, equation) or ``docs/design.md``. Where the bundled
data lives outside the clone is said in the documentation only (README, "Data"); code, specs and SQL name the
sample, and ``trajpub.config`` finds its folder.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: (what it is, pattern): each names a way of citing a document that is not in the repository.
FORBIDDEN = [
    ("a seed paper or spec by number", re.compile(r"\bseeds?[-_ ]0{1,2}[0-4]\b", re.IGNORECASE)),
    ("the spec files' folder", re.compile(r"\bspecs/seed")),
    ("the design notes outside the repository", re.compile(r"\b(?:DESIGN|STACK)\.md\b")),
    ("a shared folder other than the bundled data", re.compile(r"shared/(?!data\b)\w+")),
    ("a section of a spec", re.compile(r"\bspec(?:'s)?\s+(?:section|§)", re.IGNORECASE)),
    ("a numbered section of a spec", re.compile(r"\bspec\s+\d+\.\d", re.IGNORECASE)),
    ("a spec's gap or attack label", re.compile(r"\bspec\s+[AG]\d", re.IGNORECASE)),
    ("our spec", re.compile(r"\b(?:our|survey) spec\b", re.IGNORECASE)),
    ("a spec's test oracle", re.compile(r"\boracles?\s+\d", re.IGNORECASE)),
    ("a spec's provenance tag", re.compile(r"\[(?:REC|CODE|DERIVED|PAPER|EXTERNAL|R)\]")),
    ("an issue of the tracker by number", re.compile(r"\bissues? #?\d+", re.IGNORECASE)),
]

#: Files whose text cannot change: migrations applied before issue numbers were refused (the migration runner
#: pins each applied file's sha256, so their comments stay as they were) and the OpenLineage standard's own
#: schema, vendored verbatim.
FROZEN = {
    "sql/013_gate_policies.sql", "sql/014_unit_of_protection.sql", "sql/015_roles_enforced_and_tamper_evident.sql",
    "sql/019_lineage_audits_per_resolution.sql", "sql/020_dataset_drop_and_time_order.sql",
    "sql/021_comparison_pick.sql", "sql/022_points_bulk_load.sql", "sql/024_attack_not_applicable.sql",
    "tests/openlineage_spec/OpenLineage.json",
}

#: In everything but the documentation (``.md``): a path out of the repository.
FORBIDDEN_IN_CODE = [("a path outside the repository", re.compile(r"\.\./shared\b"))]

#: This file spells the patterns out.
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name and name != SELF and name not in FROZEN]


def citations_outside_the_repository(paths: list[Path]) -> list[str]:
    """``file:line: what`` for every line that matches a forbidden pattern."""
    findings = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary (figures) or deleted in the work tree
        patterns = FORBIDDEN if path.suffix == ".md" else FORBIDDEN + FORBIDDEN_IN_CODE
        for number, line in enumerate(text.splitlines(), start=1):
            for what, pattern in patterns:
                if pattern.search(line):
                    findings.append(f"{path.relative_to(ROOT).as_posix()}:{number}: {what}: {line.strip()[:100]}")
    return findings


def test_the_scan_finds_each_kind_of_citation():
    # Each pattern must be able to fail on a line of its kind; data paths and release specs stay allowed.
    cited = [
        "# survey seed 002, attack A3",
        "# Spec ``specs/seed-004-prefixtree.md``",
        "# DESIGN.md, 'Audits and the gate'",
        "# ../shared/specs/x.md",
        "# the empirical epsilon (spec section 5.4)",
        "# our survey's spec 6.4",
        "# the dummies (spec A10)",
        "# the survey spec",
        "# Oracle 15: symmetric",
        "# one participation per client [REC]",
        "# the gate's validity (issue 25, item 3)",
    ]
    allowed = [
        "# data: ../shared/data/tdrive_sample_odd_taxis.csv.gz",
        "# the release spec's bbox; docs/design.md, FASTPub; random seed 0",
    ]
    for line in cited:
        assert any(pattern.search(line) for _, pattern in FORBIDDEN), line
    for line in allowed:
        assert not any(pattern.search(line) for _, pattern in FORBIDDEN), line
    kinds = {what for what, pattern in FORBIDDEN if any(pattern.search(line) for line in cited)}
    assert kinds == {what for what, _ in FORBIDDEN}
    [(_, outside)] = FORBIDDEN_IN_CODE  # a code comment naming the data's folder outside the clone
    assert outside.search(allowed[0]) and not outside.search("# the bundled sample tdrive_sample_odd_taxis.csv.gz")


def test_nothing_cites_a_file_outside_the_repository():
    findings = citations_outside_the_repository(tracked_text_files())
    assert not findings, ("cite the paper (authors, year, section, equation) or docs/design.md instead:\n"
                          + "\n".join(findings))
