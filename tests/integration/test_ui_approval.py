"""The steward approves a paused release in the REAL Prefect UI (headless Chromium), as a person would: log in
with the API authentication string, open the flow run page, press Resume, read the review description (with the
link to the full HTML report), fill the StewardDecision form, submit; the release is then published in
governance and the flow run completes.

Notes on the Prefect UI (3.9) found while writing this test:
- the form's labels are not associated with their controls (``<label for=ID>`` but the control has no id), so
  ``get_by_label`` finds nothing: fields are located by their visible label text inside the form property;
- a mouse click on a Prefect select (the Decision field, but also e.g. the log "Level" filter) opens its option
  list and closes it again within the same click in headless Chromium; the keyboard (focus, ArrowDown) opens it
  reliably, so the test uses the keyboard to open the list and then clicks the option;
- a ``file://`` link is refused from the http page ("Not allowed to load local resource"): the review links the
  report's Prefect artifact instead, which the test opens in a tab of the same browser.
"""

from __future__ import annotations

import contextlib
import re
import stat
from urllib.parse import urljoin, urlparse

import psutil
import pytest
import sqlalchemy as sa
from playwright.sync_api import Locator, Page, expect

from tasks import report
from tests.integration.browser import chromium_page
from tests.integration.conftest import (
    base_spec,
    cli,
    release_status,
    start_release,
    wait_for_status,
    wait_until,
)
from trajpub import config

pytestmark = pytest.mark.integration

UI_URL = config.prefect_api_url().rstrip("/").removesuffix("/api")
STEWARD = "alice"  # a steward login (the session fixture `stewards` adds it)
COMMENT = "reviewed the report; approved in the Prefect UI"


def flow_run_state(flow_run_id: str) -> str | None:
    """The flow run's state type in the Prefect API (e.g. 'PAUSED', 'COMPLETED')."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        state = client.read_flow_run(flow_run_id).state
    return state.type.value if state else None


def form_property(dialog: Locator, label: str) -> Locator:
    """The form property (label, description, control) whose label reads ``label``, e.g. "Steward" or
    "Comment (Optional)"; exactly one must exist."""
    prop = dialog.locator(".p-label").filter(has=dialog.page.get_by_text(label, exact=True))
    expect(prop, f"the StewardDecision form has no field labelled {label!r}").to_have_count(1)
    return prop


def submit_resume(dialog: Locator, flow_run_id: str, attempts: int = 3) -> None:
    """Press the resume form's Submit until the server has accepted the resume: the dialog closes, or the run has
    left PAUSED (the UI is slow to close it). When the server does not take the answer the UI keeps the dialog
    open with nothing resumed (with the SQLite store of before, "database is locked" under the test workers' load,
    a fresh clone's server log showed it); as docs/operations.md tells a steward, a person presses Submit again;
    so does this, up to ``attempts`` times, and only while the run is still paused."""
    for _ in range(attempts):
        dialog.get_by_role("button", name="Submit", exact=True).click()
        with contextlib.suppress(AssertionError):
            expect(dialog).to_be_hidden(timeout=20_000)
            return
        if flow_run_state(flow_run_id) != "PAUSED":
            return
    raise AssertionError(f"the Prefect server did not accept the resume of flow run {flow_run_id} "
                         f"in {attempts} submissions")


def log_in(page: Page, path: str) -> None:
    """Open ``path`` of the UI as a person would: the server's API needs its authentication string, which the UI
    asks for on its login page (where a page such as ``/runs`` sends a browser without it; a flow run's page shows
    "Authentication failed" instead, so the test starts at the login page); the string (``trajpub server up``
    wrote it to a file only the local user reads) is typed there, and the UI goes on to ``path``."""
    page.goto(f"{UI_URL}/runs")
    expect(page).to_have_url(re.compile(r"/login\?redirect="), timeout=30_000)
    page.goto(f"{UI_URL}/login?redirect={path}")
    page.get_by_placeholder("admin:pass").fill(config.local_prefect_auth())
    page.get_by_role("button", name="Login").click()
    expect(page).to_have_url(f"{UI_URL}{path}", timeout=30_000)


def kill_tree(proc) -> None:
    """Stop the release process and its Dask children if the test ends while it still runs."""
    if proc.poll() is None:
        for child in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        proc.kill()
        proc.wait(timeout=30)


def check_report_link(page: Page, href: str, rid: int) -> None:
    """The review's link to the full report opens from the UI (an http page cannot open a
    ``file://`` link): followed in a tab of the same browser, it shows the report with its plots drawn. The report
    file itself is 0600 in a 0700 folder."""
    assert href and urlparse(href).scheme in ("", "http"), href
    tab = page.context.new_page()
    try:
        tab.goto(urljoin(page.url, href))
        expect(tab.get_by_role("heading", name=f"Release {rid}: adatrace on")).to_be_visible(timeout=60_000)
        expect(tab.get_by_role("heading", name="Linkage attacks")).to_be_visible()
        plots = tab.locator("img[alt^='Density']")
        expect(plots.first).to_be_visible()
        assert plots.first.evaluate("img => img.naturalWidth") > 0  # the inlined PNG is drawn, not a broken image
    finally:
        tab.close()
    path = report.report_path(rid)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_steward_approves_a_paused_release_in_the_prefect_ui(engine, loaded_tdrive, tmp_path):
    dataset = loaded_tdrive("ui")
    run = start_release(base_spec(dataset, approval_timeout_s=300), tmp_path)
    try:
        assert wait_for_status(engine, run, {"awaiting_approval"}) == "awaiting_approval"
        rid = run.release_id
        with engine.connect() as conn:
            flow_run_id = conn.execute(sa.text("SELECT flow_run_id FROM governance.releases WHERE release_id = :r"),
                                       {"r": rid}).scalar()
        assert flow_run_id, f"release {rid} has no flow run id"
        # awaiting_approval is recorded just before the flow pauses: wait for the pause itself
        wait_until(lambda: flow_run_state(flow_run_id) == "PAUSED", 60, f"flow run {flow_run_id} to pause")

        with chromium_page() as page:
            page.set_viewport_size({"width": 1400, "height": 1000})
            log_in(page, f"/runs/flow-run/{flow_run_id}")
            badge = page.locator(".state-badge").first
            expect(badge).to_have_text("Paused")

            page.get_by_role("button", name="Resume").click()
            dialog = page.get_by_role("dialog")
            expect(dialog.get_by_text("Resume Flow Run", exact=True)).to_be_visible()

            # the review description: title, the report link, the guarantee, the CLI alternative
            expect(dialog.get_by_role("heading", name=f"Release {rid}: adatrace on {dataset}")).to_be_visible()
            expect(dialog.get_by_text("Full review report", exact=True)).to_be_visible()
            link = dialog.get_by_role("link", name="open the full review report", exact=True)
            expect(link).to_be_visible()
            check_report_link(page, link.get_attribute("href"), rid)
            expect(dialog.get_by_role("heading", name="Guarantee")).to_be_visible()
            expect(dialog.get_by_text(f"trajpub approve {rid} --steward NAME")).to_be_visible()

            # the StewardDecision form: release id prefilled, decision approve/reject, decision code, comment
            release_field = form_property(dialog, "Release Id (Optional)").locator("input")
            expect(release_field).to_have_value(str(rid))
            decision = form_property(dialog, "Decision").locator("button.p-select-button__control")
            code_field = form_property(dialog, "Decision Code (Optional)").locator("textarea")
            comment = form_property(dialog, "Comment (Optional)").locator("textarea")
            for control in (decision, code_field, comment):
                expect(control).to_be_visible()

            decision.focus()
            page.keyboard.press("ArrowDown")  # opens the option list (a mouse click closes it again at once)
            options = page.get_by_role("option")
            expect(options).to_have_text(["approve", "reject"])
            options.filter(has_text=re.compile(r"^approve$")).click()
            expect(decision).to_have_text("approve")
            # the steward's login comes with the one-time code they issue as themselves
            issued = cli("steward", "code", str(rid), "--steward", STEWARD, "--decision", "approve", "--comment", COMMENT)
            assert issued.returncode == 0, issued.stderr
            code_field.fill(issued.stdout.strip())
            comment.fill(COMMENT)

            submit_resume(dialog, flow_run_id)
            # the page follows the run: it resumes, publishes and completes
            expect(badge).to_have_text("Completed", timeout=180_000)

        wait_until(lambda: release_status(engine, rid) == "published", 120, f"release {rid} to be published")
        with engine.connect() as conn:
            approval = conn.execute(sa.text("SELECT decision, steward, comment FROM governance.approvals "
                                            "WHERE release_id = :r"), {"r": rid}).one()
            table = conn.execute(sa.text("SELECT published_table FROM governance.releases WHERE release_id = :r"),
                                 {"r": rid}).scalar()
        assert tuple(approval) == ("approved", STEWARD, COMMENT)
        assert table == f"published.{dataset}__r{rid}"
        assert run.proc.wait(timeout=120) == 0, run.output()[-4000:]
        assert flow_run_state(flow_run_id) == "COMPLETED"
        assert '"status": "published"' in run.output()
    finally:
        kill_tree(run.proc)
