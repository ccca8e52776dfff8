"""The steward console (``trajpub console up``) in a real browser (headless Debian Chromium, Playwright): a steward
signs in with their own database login, reads the review report inline, approves (the release is published),
rejects, withdraws; a wrong password is refused; under four-eyes the requester's approval is refused by the
database and a second steward's goes through; a POST forged without the session or without its CSRF token is
refused (plain httpx); and the console cannot do what the steward's login cannot (the database's own refusals,
as for ``trajpub approve``). Releases reach awaiting_approval through the status machine with real evidence
(:func:`tests.integration.conftest.to_awaiting_approval`), with no flow run waiting: an approval publishes in a
flow run of its own, as ``trajpub approve`` does then."""

from __future__ import annotations

import contextlib
import html
import ipaddress
import json
import os
import re
import socket
import ssl
import stat
import subprocess
import uuid

import httpx
import pytest
import sqlalchemy as sa
from playwright.sync_api import Page, expect

from tasks import governance
from tests.integration.browser import chromium_page
from tests.integration.conftest import (
    TRAJPUB,
    new_release,
    release_status,
    to_awaiting_approval,
    to_protected,
)
from trajpub import config

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def console_command(port: int, action: str, **environment: str) -> subprocess.CompletedProcess:
    return subprocess.run([TRAJPUB, "console", action], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "TRAJPUB_TEST_MODE": "1", "TRAJPUB_CONSOLE_PORT": str(port),
                               **environment})


@pytest.fixture(scope="module")
def console_url(stewards):
    """The console started as an operator starts it (``trajpub console up``, on a port of its own), stopped with
    ``trajpub console down`` after the module."""
    port = free_port()
    started = console_command(port, "up")
    assert started.returncode == 0, started.stderr
    url = f"http://127.0.0.1:{port}"
    assert f"steward console up at {url}" in started.stdout
    again = console_command(port, "up")
    assert again.returncode == 0 and "already up" in again.stdout, again.stdout + again.stderr
    yield url
    stopped = console_command(port, "down")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/health", timeout=5)


def password(login: str) -> str:
    return json.loads(config.CREDENTIALS_FILE.read_text())[login]


def new_dataset(owner, prefix: str) -> str:
    """A dataset with governance rows and no points (its cap set by the owner, as in ``bare_dataset``)."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with owner.begin() as conn:
        conn.execute(sa.text("INSERT INTO raw.datasets (dataset) VALUES (:d)"), {"d": name})
        conn.execute(sa.text("INSERT INTO governance.datasets (dataset, epsilon_cap) VALUES (:d, 100)"), {"d": name})
    return name


@pytest.fixture(scope="module")
def dataset(owner, stewards) -> str:
    """The module's dataset, with four-eyes on: a steward other than a release's requester decides it."""
    name = new_dataset(owner, "console")
    with stewards["ada"].begin() as conn:  # a steward's setting (`trajpub four-eyes DATASET on`)
        governance.set_dataset_policy(conn, name, four_eyes=True)
    return name


def awaiting(engine, dataset: str, requested_by: str = "requester") -> int:
    rid = new_release(engine, dataset, requested_by=requested_by)
    to_awaiting_approval(engine, rid)
    return rid


def approval(engine, rid: int) -> dict | None:
    with engine.connect() as conn:
        return governance.approval(conn, rid)


def sign_in(page: Page, url: str, login: str, secret: str) -> None:
    page.goto(f"{url}/login")
    page.get_by_label("Steward login").fill(login)
    page.get_by_label("Password").fill(secret)
    page.get_by_role("button", name="Sign in").click()


def open_release(page: Page, rid: int) -> None:
    page.locator("#awaiting").get_by_role("link", name=f"release {rid}", exact=True).click()
    expect(page.locator("h1")).to_contain_text(f"Release {rid}")


def test_a_steward_signs_in_reads_the_review_approves_and_withdraws(console_url, engine, dataset):
    rid = awaiting(engine, dataset)
    with chromium_page() as page:
        sign_in(page, console_url, "bob", password("bob"))
        expect(page.locator("#who")).to_have_text("bob")
        open_release(page, rid)
        expect(page.locator("#status")).to_have_text("awaiting_approval")
        # the stored review report, inline in its sandboxed frame; the budget as the review states it
        expect(page.frame_locator("iframe.report").locator("body")).to_contain_text("test")
        expect(page.get_by_text("This release spends epsilon-DP epsilon 1 per object")).to_be_visible()
        page.get_by_label("Comment").fill("reviewed in the console")
        page.get_by_role("button", name="Approve and publish").click()
        expect(page.locator("#status")).to_have_text("published", timeout=90_000)
        expect(page.get_by_role("status").filter(has_text=f"release {rid} approved by bob")).to_be_visible()
        expect(page.locator("#approval")).to_contain_text("approved by bob")
        page.get_by_label("Why it is withdrawn").fill("published by mistake")
        page.get_by_role("button", name="Withdraw the release").click()
        expect(page.locator("#status")).to_have_text("withdrawn")
        page.get_by_role("button", name="Sign out").click()
        expect(page).to_have_url(f"{console_url}/login")
        page.goto(f"{console_url}/releases/{rid}")  # the session is gone
        expect(page).to_have_url(f"{console_url}/login")
    found = approval(engine, rid)
    assert (found["decision"], found["steward"], found["comment"]) == ("approved", "bob", "reviewed in the console")
    with engine.connect() as conn:
        steward, reason, tables = conn.execute(sa.text(
            "SELECT steward, reason, tables FROM governance.withdrawals WHERE release_id = :r"), {"r": rid}).one()
        published = conn.execute(sa.text("SELECT to_regclass(:t)"), {"t": f"published.{dataset}__r{rid}"}).scalar()
    assert (steward, reason) == ("bob", "published by mistake") and f"{dataset}__r{rid}" in " ".join(tables)
    assert release_status(engine, rid) == "withdrawn" and published is None


def test_a_rejection_needs_its_comment_and_records_the_steward(console_url, engine, dataset):
    rid = awaiting(engine, dataset)
    with chromium_page() as page:
        sign_in(page, console_url, "ada", password("ada"))
        open_release(page, rid)
        page.get_by_role("button", name="Reject").click()  # no comment: the database refuses, as for the CLI
        expect(page.get_by_role("alert")).to_contain_text("a rejection needs a comment saying why")
        expect(page.locator("#status")).to_have_text("awaiting_approval")
        page.get_by_label("Comment").fill("the cells are too coarse for the city's use")
        page.get_by_role("button", name="Reject").click()
        expect(page.locator("#status")).to_have_text("rejected")
    found = approval(engine, rid)
    assert (found["decision"], found["steward"]) == ("rejected", "ada")
    assert found["comment"] == "the cells are too coarse for the city's use"


def test_a_wrong_password_is_refused(console_url, engine, dataset):
    with chromium_page() as page:
        sign_in(page, console_url, "bob", "not-" + password("bob"))
        expect(page.get_by_role("alert")).to_have_text("the login or the password is wrong")
        expect(page.locator("#who")).to_have_count(0)
        page.goto(f"{console_url}/")  # still signed out: the releases page sends the browser to sign in
        expect(page).to_have_url(f"{console_url}/login")
        sign_in(page, console_url, "nobody_" + uuid.uuid4().hex[:6], "whatever")
        expect(page.get_by_role("alert")).to_have_text("the login or the password is wrong")


def test_under_four_eyes_the_requester_cannot_approve_and_a_second_steward_can(console_url, engine, dataset):
    rid = awaiting(engine, dataset, requested_by="alice")
    with chromium_page() as page:
        sign_in(page, console_url, "alice", password("alice"))
        expect(page.locator("#awaiting tr", has_text=f"release {rid}")).to_contain_text("you requested it")
        open_release(page, rid)
        expect(page.locator(".note.warn")).to_contain_text("another steward must decide it")
        page.get_by_role("button", name="Approve and publish").click()
        expect(page.get_by_role("alert")).to_contain_text(
            f"four-eyes policy: alice requested release {rid} and cannot approve it")
        expect(page.locator("#status")).to_have_text("awaiting_approval")
    assert approval(engine, rid) is None and release_status(engine, rid) == "awaiting_approval"
    with chromium_page() as page:
        sign_in(page, console_url, "bob", password("bob"))
        open_release(page, rid)
        page.get_by_role("button", name="Approve and publish").click()
        expect(page.locator("#status")).to_have_text("published", timeout=90_000)
    assert approval(engine, rid)["steward"] == "bob" and release_status(engine, rid) == "published"


CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def signed_in_client(url: str, login: str) -> tuple[httpx.Client, str]:
    """A plain HTTP client signed in as ``login`` (closed by the caller) and the session's CSRF token."""
    client = httpx.Client(base_url=url, timeout=120)
    token = CSRF.search(client.get("/login").text).group(1)
    answer = client.post("/login", data={"csrf": token, "login": login, "password": password(login)})
    assert answer.status_code == 303, answer.text
    return client, CSRF.search(client.get("/").text).group(1)


def test_a_forged_post_is_refused_without_the_session_or_its_csrf_token(console_url, engine, dataset):
    rid = awaiting(engine, dataset)
    decision = f"/releases/{rid}/decision"
    # no session at all (another site's form, a script): refused before anything is read
    assert httpx.post(f"{console_url}{decision}", data={"decision": "approve"}).status_code == 403
    # a session from before sign-in (say, planted by an attacker) is dropped when the steward signs in
    planted = httpx.Client(base_url=console_url)
    with contextlib.closing(planted):
        planted_token = CSRF.search(planted.get("/login").text).group(1)
        planted_cookie = planted.cookies.get("trajpub_console")
    client = httpx.Client(base_url=console_url)
    assert client.post("/login", data={"csrf": planted_token, "login": "bob", "password": password("bob")},
                       headers={"cookie": f"trajpub_console={planted_cookie}"}).status_code == 303
    assert client.cookies.get("trajpub_console") != planted_cookie
    token = CSRF.search(client.get("/").text).group(1)
    assert httpx.post(f"{console_url}{decision}", data={"decision": "approve", "csrf": planted_token},
                      cookies={"trajpub_console": planted_cookie}).status_code == 403
    with contextlib.closing(client):
        assert client.post(decision, data={"decision": "approve"}).status_code == 403  # no token
        assert client.post(decision, data={"decision": "approve", "csrf": "x" + token}).status_code == 403
        # the session cookie alone, replayed by another client with a token it guessed
        cookie = client.cookies.get("trajpub_console")
        forged = httpx.post(f"{console_url}{decision}", data={"decision": "approve", "csrf": "guess"},
                            cookies={"trajpub_console": cookie})
        assert forged.status_code == 403
        # a cookie not signed by this console's secret is no session
        unsigned = httpx.post(f"{console_url}{decision}", data={"decision": "approve", "csrf": token},
                              cookies={"trajpub_console": cookie.rsplit(".", 1)[0] + ".forged"})
        assert unsigned.status_code == 403
        assert release_status(engine, rid) == "awaiting_approval" and approval(engine, rid) is None
        # the session's own token: the same request goes through
        done = client.post(decision, data={"decision": "reject", "csrf": token, "comment": "too early"})
        assert done.status_code == 303 and release_status(engine, rid) == "rejected"


def test_the_cookie_is_httponly_and_samesite_strict_and_the_secret_is_private(console_url):
    answer = httpx.get(f"{console_url}/login")
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "secure" not in cookie  # no TLS here
    assert "script-src" not in answer.headers["content-security-policy"]  # default-src 'none': no script
    assert answer.headers["x-frame-options"] == "DENY"
    assert stat.S_IMODE((config.STATE_DIR / "console-secret").stat().st_mode) == 0o600


def test_the_console_cannot_do_what_the_stewards_login_cannot(console_url, engine, dataset):
    """The console's refusals are the database's (and ``tasks.publish``'s), the CLI's, each in one sentence; and
    only a steward's login signs in, not the pipeline's or the superuser's, though their passwords are right."""
    decided, pending = awaiting(engine, dataset), awaiting(engine, dataset)
    client, token = signed_in_client(console_url, "ada")
    with contextlib.closing(client):
        def act(path: str, **data) -> str:
            answer = client.post(path, data={"csrf": token, **data}, follow_redirects=True)
            assert answer.status_code == 200
            return html.unescape(" ".join(re.findall(r'role="alert">([^<]*)<', answer.text)))

        assert act(f"/releases/{decided}/decision", decision="reject", comment="no") == ""
        assert act(f"/releases/{decided}/decision", decision="approve") == (
            f"release {decided} was already rejected by ada (governance)")
        assert act(f"/releases/{pending}/withdraw", reason="not published") == (
            f"release {pending} is 'awaiting_approval': only a published release can be withdrawn "
            "(governance.releases)")
    assert release_status(engine, decided) == "rejected" and release_status(engine, pending) == "awaiting_approval"
    assert approval(engine, decided)["decision"] == "rejected"
    for login in (config.PIPELINE, config.OWNER):
        with httpx.Client(base_url=console_url) as client:
            token = CSRF.search(client.get("/login").text).group(1)
            refused = client.post("/login", data={"csrf": token, "login": login, "password": password(login)})
            assert refused.status_code == 401 and f"the login {login} is not a steward" in html.unescape(refused.text)
            assert client.get("/").status_code == 303


def test_a_comparisons_candidate_is_picked_not_approved_in_the_console(console_url, engine, dataset):
    """A candidate of a comparison is decided by a pick, which rejects the other candidates (``trajpub release
    pick``): the console shows no decision form for it and refuses an approval sent anyway."""
    rid = awaiting(engine, dataset)
    with engine.begin() as conn:
        governance.update_release(conn, rid, flow_run_id=str(uuid.uuid4()))
        governance.merge_summary(conn, rid, {"comparison": {"name": "weekly-candidates"}})
    client, token = signed_in_client(console_url, "ada")
    with contextlib.closing(client):
        page = client.get(f"/releases/{rid}").text
        assert "the console does not pick" in page and "Approve and publish" not in page
        answer = client.post(f"/releases/{rid}/decision", data={"csrf": token, "decision": "approve"},
                             follow_redirects=True)
    assert f"release {rid} is a candidate of the comparison weekly-candidates" in html.unescape(answer.text)
    assert release_status(engine, rid) == "awaiting_approval" and approval(engine, rid) is None


def self_signed(folder) -> tuple[str, str]:
    """A certificate for 127.0.0.1 signed by its own key (PEM files): what an operator's TLS files stand for."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "console.pem", folder / "console.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


def test_with_tls_files_the_console_serves_https_and_its_cookie_is_secure(tmp_path):
    cert, key = self_signed(tmp_path)
    port = free_port()
    tls = {"TRAJPUB_CONSOLE_TLS_CERT": cert, "TRAJPUB_CONSOLE_TLS_KEY": key}
    started = console_command(port, "up", **tls)
    try:
        assert started.returncode == 0 and f"up at https://127.0.0.1:{port}" in started.stdout, started.stderr
        trusted = ssl.create_default_context(cafile=cert)
        answer = httpx.get(f"https://127.0.0.1:{port}/login", verify=trusted)
        cookie = answer.headers["set-cookie"].lower()
        assert answer.status_code == 200 and "secure" in cookie and "samesite=strict" in cookie
        with pytest.raises(httpx.TransportError):  # no plain HTTP beside it
            httpx.get(f"http://127.0.0.1:{port}/login", timeout=5)
    finally:
        assert "stopped" in console_command(port, "down", **tls).stdout


def test_the_budget_page_states_each_account_and_the_past_periods(console_url, engine, owner, stewards):
    """Under a per-week unit the budget page lists what each past week used, as ``trajpub budget show --periods``
    words it (:func:`tasks.forecast.past_periods`), beside every account's line."""
    from tasks.forecast import past_periods
    from trajpub.periods import Unit

    name = new_dataset(owner, "console_week")
    with stewards["ada"].begin() as conn:  # `trajpub budget unit NAME object --period week`
        governance.set_privacy_unit(conn, name, Unit("object", "week"))
    with engine.begin() as conn:
        rid = governance.create_release(conn, {"dataset": name, "mechanism": "prefix_tree", "requested_by": "requester",
                                               "window_start": "2024-01-03T00:00:00Z",
                                               "window_end": "2024-01-10T00:00:00Z"}, {}, {})
    to_protected(engine, rid)  # charged epsilon 1 per object to the two weeks its window touches
    with engine.connect() as conn:
        periods = past_periods(conn, name, 8)
        accounts = [a.describe() for a in governance.accounts(conn, name).values()]
    assert len(periods) > 3
    client, _ = signed_in_client(console_url, "bob")
    with contextlib.closing(client):
        page = html.unescape(client.get("/budget", params={"dataset": name}).text)
        assert f'id="budget-{name}"' in html.unescape(client.get("/budget").text)  # among every dataset's
        assert client.get("/budget", params={"dataset": "no_such_dataset"}).status_code == 404
    section = page[page.index(f'id="budget-{name}"'):]
    section = section[:section.index("</section>")]
    assert all(line in section for line in periods + accounts), section
