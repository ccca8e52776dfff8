"""Where the console listens and how: loopback and port 4300 by default, TLS when a certificate is given, and the
secret that signs its session cookie (generated once into the state folder, readable by the local user only)."""

from __future__ import annotations

import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from trajpub import config
from trajpub.errors import TrajpubError

DEFAULT_PORT = config.CONSOLE_PORT
SECRET_FILE = config.STATE_DIR / "console-secret"
LOG_FILE = config.STATE_DIR / "console.log"


@dataclass(frozen=True)
class Settings:
    """``TRAJPUB_CONSOLE_HOST`` (default 127.0.0.1), ``TRAJPUB_CONSOLE_PORT`` (default 4300), and
    ``TRAJPUB_CONSOLE_TLS_CERT`` with ``TRAJPUB_CONSOLE_TLS_KEY`` (PEM files; both or neither). A console that
    listens beyond loopback must have TLS: a steward's password crosses the network when they sign in."""

    host: str
    port: int
    tls_cert: Path | None
    tls_key: Path | None

    @classmethod
    def from_environment(cls) -> Settings:
        host = os.environ.get("TRAJPUB_CONSOLE_HOST", "127.0.0.1")
        port_text = os.environ.get("TRAJPUB_CONSOLE_PORT", str(DEFAULT_PORT))
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise TrajpubError(f"TRAJPUB_CONSOLE_PORT must be a port number, not {port_text!r}",
                               "TRAJPUB_CONSOLE_PORT")
        cert, key = (os.environ.get(f"TRAJPUB_CONSOLE_TLS_{name}") or None for name in ("CERT", "KEY"))
        if bool(cert) != bool(key):
            raise TrajpubError("TLS needs both a certificate and its key: set TRAJPUB_CONSOLE_TLS_CERT and "
                               "TRAJPUB_CONSOLE_TLS_KEY, or neither", "TRAJPUB_CONSOLE_TLS_CERT")
        for path in (cert, key):
            if path and not Path(path).is_file():
                raise TrajpubError(f"the TLS file {path} does not exist", "TRAJPUB_CONSOLE_TLS_CERT/KEY")
        settings = cls(host, int(port_text), Path(cert) if cert else None, Path(key) if key else None)
        if not settings.tls and not settings.loopback:
            raise TrajpubError(f"the console listens on {host}, beyond loopback, only with TLS (a steward's password "
                               "crosses the network): set TRAJPUB_CONSOLE_TLS_CERT and TRAJPUB_CONSOLE_TLS_KEY",
                               "TRAJPUB_CONSOLE_HOST")
        return settings

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def url(self) -> str:
        """The address a browser on this machine opens (a console on every interface answers on loopback too)."""
        return config.browser_url(self.host, self.port, self.tls)

    @property
    def pid_file(self) -> Path:
        """The background server's process id, one file per port (``trajpub console down`` stops that one)."""
        return config.STATE_DIR / f"console-{self.port}.pid"


def session_secret() -> str:
    """The key that signs the session cookie, generated once into :data:`SECRET_FILE` (0600)."""
    try:
        secret = SECRET_FILE.read_text().strip()
        if secret:
            return secret
    except FileNotFoundError:
        pass
    config.STATE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = SECRET_FILE.with_suffix(f".tmp{os.getpid()}")
    tmp.touch(mode=0o600)
    tmp.chmod(0o600)
    tmp.write_text(secrets.token_urlsafe(48))
    tmp.replace(SECRET_FILE)
    return SECRET_FILE.read_text().strip()
