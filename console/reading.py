"""What the console's pages show, read as the signed-in steward's login: the releases awaiting a decision and
the published ones, one release's review record (:func:`tasks.review.read_review`, the record the HTML report,
the approval form and ``trajpub release show`` render) with its lineage, and the budget of every dataset."""

from __future__ import annotations

import sqlalchemy as sa

from tasks import governance


def releases(conn: sa.Connection, status: str, login: str, limit: int = 200) -> list[dict]:
    """The releases in ``status``, newest first, each with its dataset's four-eyes setting and whether
    ``login`` requested it (under four-eyes another steward must then decide)."""
    rows = conn.execute(sa.text(
        "SELECT r.release_id, r.dataset, r.mechanism, r.requested_by, r.updated_at, r.published_table,"
        " d.four_eyes FROM governance.releases r JOIN governance.datasets d USING (dataset)"
        " WHERE r.status = :s ORDER BY r.release_id DESC LIMIT :n"), {"s": status, "n": limit}).mappings()
    return [{**row, "own": row["four_eyes"] and row["requested_by"] == login} for row in rows]


def release(conn: sa.Connection, release_id: int) -> dict:
    """One release as the review page shows it: the review record, whether a stored report exists, the
    dataset's four-eyes setting and the lineage events (type, time, inputs, outputs)."""
    from tasks import lineage
    from tasks.review import read_review

    review = read_review(conn, release_id)
    has_report = conn.execute(sa.text("SELECT EXISTS (SELECT 1 FROM governance.review_reports WHERE release_id = :r)"),
                              {"r": release_id}).scalar_one()
    four_eyes = conn.execute(sa.text("SELECT four_eyes FROM governance.datasets WHERE dataset = :d"),
                             {"d": review.release["dataset"]}).scalar()
    events = [{"type": e["event_type"], "time": e["event_time"],
               "inputs": [i["name"] for i in e["event"].get("inputs", [])],
               "outputs": [o["name"] for o in e["event"].get("outputs", [])]}
              for e in lineage.events(conn, release_id)]
    return {"review": review, "has_report": has_report, "four_eyes": four_eyes, "lineage": events}


def budgets(conn: sa.Connection, dataset: str | None = None, n_periods: int = 8) -> list[dict]:
    """Every dataset's budget (``dataset``'s alone when given; refused when it has not been loaded) as ``trajpub
    budget show`` words it: its unit of protection, each account (spent, cap, left), and under a per-period unit
    what each of the last ``n_periods`` periods used (:func:`tasks.forecast.past_periods`)."""
    from tasks.forecast import past_periods

    out = []
    for name in governance.datasets(conn, dataset):
        unit = governance.unit_of(conn, name)
        out.append({"dataset": name, "unit": unit.describe(),
                    "accounts": [a.describe() for a in governance.accounts(conn, name).values()],
                    "periods": past_periods(conn, name, n_periods) if unit.period else []})
    return out
