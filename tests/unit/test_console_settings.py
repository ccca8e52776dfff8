"""The steward console's settings and its answers that need no database: loopback unless TLS, the cookie's flags
(Secure under TLS), the signing key's mode, and POSTs refused without the session's CSRF token."""

from __future__ import annotations

import stat

import pytest
from starlette.testclient import TestClient

from console import settings as console_settings
from console.settings import Settings
from trajpub.errors import TrajpubError


@pytest.fixture
def secret_file(tmp_path, monkeypatch):
    path = tmp_path / "console-secret"
    monkeypatch.setattr(console_settings, "SECRET_FILE", path)
    return path


@pytest.fixture
def pem_files(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("certificate")
    key.write_text("key")
    return cert, key


def environment(monkeypatch, **values: str) -> None:
    for name in ("HOST", "PORT", "TLS_CERT", "TLS_KEY"):
        monkeypatch.delenv(f"TRAJPUB_CONSOLE_{name}", raising=False)
    for name, value in values.items():
        monkeypatch.setenv(f"TRAJPUB_CONSOLE_{name.upper()}", value)


def test_the_default_is_loopback_on_port_4300_without_tls(monkeypatch):
    environment(monkeypatch)
    found = Settings.from_environment()
    assert (found.host, found.port, found.tls, found.url) == ("127.0.0.1", 4300, False, "http://127.0.0.1:4300")


@pytest.mark.parametrize(("values", "says"), [
    ({"host": "0.0.0.0"}, "beyond loopback, only with TLS"),
    ({"host": "192.0.2.7"}, "beyond loopback, only with TLS"),
    ({"port": "http"}, "must be a port number"),
    ({"port": "70000"}, "must be a port number"),
    ({"tls_cert": "CERT"}, "both a certificate and its key"),
    ({"tls_cert": "/nonexistent/cert.pem", "tls_key": "/nonexistent/key.pem"}, "does not exist"),
])
def test_settings_a_console_cannot_start_with_are_refused_in_one_sentence(monkeypatch, pem_files, values, says):
    values = {k: str(pem_files[0]) if v == "CERT" else v for k, v in values.items()}
    environment(monkeypatch, **values)
    with pytest.raises(TrajpubError, match=says):
        Settings.from_environment()


def test_beyond_loopback_with_tls_the_console_starts_and_its_cookie_is_secure(monkeypatch, pem_files, secret_file):
    from console.app import create_app

    environment(monkeypatch, host="0.0.0.0", tls_cert=str(pem_files[0]), tls_key=str(pem_files[1]))
    found = Settings.from_environment()
    assert found.tls and found.url == "https://127.0.0.1:4300"
    with TestClient(create_app(found), base_url="https://testserver") as client:
        cookie = client.get("/login").headers["set-cookie"].lower()
    assert "secure" in cookie and "httponly" in cookie and "samesite=strict" in cookie
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600 and len(secret_file.read_text()) >= 48


def test_a_post_without_the_sessions_csrf_token_is_refused(monkeypatch, secret_file):
    from console.app import create_app

    environment(monkeypatch)
    with TestClient(create_app(Settings.from_environment()), base_url="http://127.0.0.1:4300") as client:
        assert client.post("/login", data={"login": "ada", "password": "x"}).status_code == 403  # no session
        client.get("/login")  # a session, whose token this POST does not carry
        assert client.post("/login", data={"login": "ada", "password": "x", "csrf": "guess"}).status_code == 403
        assert client.post("/releases/1/decision", data={"decision": "approve"}).status_code == 403
        answer = client.get("/", follow_redirects=False)  # not signed in: to the sign-in page
        assert answer.status_code == 303 and answer.headers["location"] == "/login"


def test_on_loopback_a_request_for_another_host_name_is_not_answered(monkeypatch, secret_file):
    """A page whose name was re-pointed at 127.0.0.1 (DNS rebinding) reaches the port but not the console."""
    from console.app import create_app

    environment(monkeypatch)
    app = create_app(Settings.from_environment())
    with TestClient(app, base_url="http://attacker.example:4300") as client:
        assert client.get("/login").status_code == 400
    with TestClient(app, base_url="http://localhost:4300") as client:
        assert client.get("/login").status_code == 200
