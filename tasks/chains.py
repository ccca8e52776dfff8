"""Tamper evidence for the append-only governance tables: their hash chains (made in the database on insert,
sql/015) and the check that finds a deleted, edited or smuggled-in row, or a chain rewritten since the last check.

Each row stores ``prev_hash`` (the digest of the row before it in the chain, ``chain_seq`` order; 64 zeros for
the first) and ``row_hash`` = SHA-256 of the row's columns as JSON text (jsonb, nulls left out, ``row_hash``
itself left out). ``governance.chain_heads`` holds each chain's last row. The check recomputes every digest here,
in Python, from the stored columns: it does not trust any function the database's owner could replace.

What it cannot see alone: an owner who rewrites a whole chain consistently (every digest from the edited row on,
and the head). The check therefore keeps each chain's head in a local file (:data:`ANCHOR_FILE`, the local
user's only) and reports a chain whose anchored row changed since the last clean check. Without that file a
rewritten chain would look intact, so a check that finds chains with rows and no anchor says so and writes
none, unless told to start a new anchor (``new_anchor``): a deleted anchor never turns into a fresh one.
"""

from __future__ import annotations

import hashlib
import json

import sqlalchemy as sa

from trajpub import config
from trajpub.errors import TrajpubError

# chained table -> the column that names a row to a person
CHAINS = {"budget_ledger": "entry_id", "approvals": "approval_id", "withdrawals": "release_id",
          "candidate_seals": "release_id", "audit_attestations": "release_id"}
GENESIS = "0" * 64
ANCHOR_FILE = config.STATE_DIR / "chain-anchor.json"


def digest(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _read_anchor(anchor_file) -> dict | None:
    """The heads the last clean check wrote (None when there is no anchor file)."""
    try:
        anchor = json.loads(anchor_file.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise TrajpubError(f"the anchor file cannot be read as the heads `trajpub verify` writes ({exc})",
                           f"file {anchor_file}") from None
    if not isinstance(anchor, dict):
        raise TrajpubError("the anchor file does not hold the heads `trajpub verify` writes", f"file {anchor_file}")
    return anchor


def verify(conn: sa.Connection, anchor_file=ANCHOR_FILE,
           new_anchor: bool = False) -> tuple[list[str], dict[str, int]]:
    """(problems, rows per chain). Each problem is one sentence naming the table and row. With no problem, the
    chains' heads are written to ``anchor_file`` for the next check. Refuses (TrajpubError) chains that have rows
    when ``anchor_file`` is missing, unless ``new_anchor``: the file of the last check was lost or removed, and
    a chain rewritten since would pass."""
    # the digests were made with times in UTC and floats printed exactly, whatever this session's settings
    conn.execute(sa.text("SET LOCAL timezone = 'UTC'"))
    conn.execute(sa.text("SET LOCAL extra_float_digits = 1"))
    heads = {t: (seq, h) for t, seq, h in conn.execute(sa.text(
        "SELECT table_name, chain_seq, row_hash FROM governance.chain_heads"))}
    anchor = _read_anchor(anchor_file)
    problems: list[str] = []
    sizes: dict[str, int] = {}
    last: dict[str, tuple[int, str]] = {}
    for table, key in CHAINS.items():
        rows = conn.execute(sa.text(
            f"SELECT {key}::text AS key, chain_seq, prev_hash, row_hash, "
            f"jsonb_strip_nulls(to_jsonb(t) - 'row_hash')::text AS payload FROM governance.{table} t "
            "ORDER BY chain_seq NULLS FIRST")).all()
        sizes[table] = len(rows)
        by_seq = {0: GENESIS}
        seq, prev = 1, GENESIS
        for r in rows:
            where = f"governance.{table} row {key} = {r.key}"
            if r.chain_seq is None:
                problems.append(f"{where} is outside the chain: it was inserted with the chain trigger off")
                continue
            if r.chain_seq != seq:
                problems.append(f"governance.{table}: chain row(s) {seq}..{r.chain_seq - 1} are missing (deleted), "
                                f"just before {where}")
            elif r.prev_hash != prev:
                problems.append(f"{where} does not follow chain row {seq - 1}: that row was edited and re-hashed")
            if digest(r.payload) != r.row_hash:
                problems.append(f"{where} was edited: its columns no longer match its digest")
            by_seq[r.chain_seq] = r.row_hash
            seq, prev = r.chain_seq + 1, r.row_hash
        last[table] = (seq - 1, prev)
        head = heads.get(table, (0, GENESIS))
        if head[0] >= seq:
            problems.append(f"governance.{table}: the last chain row(s) {seq}..{head[0]} are missing (deleted)")
        elif head != last[table]:
            problems.append(f"governance.{table}: the chain's head (row {head[0]}) does not match its last row")
        if anchor and table in anchor:
            a_seq, a_hash = anchor[table]
            if by_seq.get(a_seq) != a_hash:
                problems.append(f"governance.{table}: chain row {a_seq}, checked by the last `trajpub verify`, is "
                                "gone or different: the chain was rewritten since")
    if not problems and anchor is None and any(sizes.values()) and not new_anchor:
        raise TrajpubError(f"the chains' links hold ({sum(sizes.values())} rows), but the anchor of the last check "
                           "is missing, so a chain rewritten whole since then would pass: restore the file (or name "
                           "its copy with --anchor), or start a new anchor with --new-anchor",
                           f"file {anchor_file}")
    if not problems:
        anchor_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = anchor_file.with_suffix(".tmp")
        tmp.touch(mode=0o600)
        tmp.write_text(json.dumps(last))
        tmp.replace(anchor_file)
    return problems, sizes


def release_breaks(conn: sa.Connection) -> list[str]:
    """The first break in each published release's chain: charge -> seal -> attested audit, report and gate
    (``governance.evidence_break``, sql/036) -> a steward's approval -> the published table holding the sealed
    rows. One sentence per broken release. Releases published before attestations existed (sql/036) have none
    to check and are left out."""
    problems = []
    for r in conn.execute(sa.text(
            "SELECT r.release_id, r.published_table, governance.evidence_break(r.release_id, r.summary) AS why,"
            " s.n_rows, a.decision FROM governance.releases r"
            " LEFT JOIN governance.candidate_seals s USING (release_id)"
            " LEFT JOIN governance.approvals a USING (release_id)"
            " WHERE r.status = 'published' AND r.updated_at >= (SELECT applied_at FROM governance.schema_migrations"
            " WHERE version = 36) ORDER BY r.release_id")):
        why = r.why
        if why is None and r.decision != "approved":
            why = "no steward approved it"
        if why is None:
            table = ".".join(map(conn.dialect.identifier_preparer.quote, r.published_table.split(".", 1)))
            published = conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar()
            if published != r.n_rows:
                why = f"its published table holds {published} rows, not the {r.n_rows} sealed"
        if why is not None:
            problems.append(f"release {r.release_id}: {why}")
    return problems
