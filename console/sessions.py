"""The console's sessions, kept in the server's memory: the signed cookie carries only a random session id; the
steward's database engine (opened with the password they typed, which is kept nowhere else) and the session's
CSRF token stay on the server. A session ends when the steward signs out, after 30 idle minutes or after
8 hours; its engine is then disposed of."""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import make_url

IDLE_S = 30 * 60
MAX_AGE_S = 8 * 3600
#: How long a refused sign-in is held before it is answered: guessing passwords is slow.
REFUSED_DELAY_S = 1.0


class SignInRefused(Exception):
    """A sign-in the console refuses, in one sentence for the page."""


@dataclass
class Session:
    """A browser's session: before sign-in only its CSRF token (the sign-in form carries it), after it the
    steward's login and engine. ``notes`` are the messages the next page shows once (kind, text)."""

    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    created: float = field(default_factory=time.monotonic)
    seen: float = field(default_factory=time.monotonic)
    login: str | None = None
    engine: sa.Engine | None = None
    notes: list[tuple[str, str]] = field(default_factory=list)

    def csrf_ok(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf.encode(), str(token).encode())

    def expired(self, now: float) -> bool:
        return now - self.seen > IDLE_S or now - self.created > MAX_AGE_S

    def close(self) -> None:
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None


class Sessions:
    """Sessions by id; thread-safe (the console's pages run in a thread pool)."""

    def __init__(self) -> None:
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()

    def new(self, **values) -> tuple[str, Session]:
        sid, session = secrets.token_urlsafe(32), Session(**values)
        with self._lock:
            self._expire()
            self._by_id[sid] = session
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        with self._lock:
            self._expire()
            session = self._by_id.get(sid)
            if session is not None:
                session.seen = time.monotonic()
            return session

    def drop(self, sid: str | None) -> None:
        with self._lock:
            session = self._by_id.pop(sid, None) if sid else None
        if session is not None:
            session.close()

    def _expire(self) -> None:
        now = time.monotonic()
        for sid in [sid for sid, s in self._by_id.items() if s.expired(now)]:
            self._by_id.pop(sid).close()


def steward_engine(base_url: str, login: str, password: str) -> tuple[sa.Engine, str]:
    """An engine for the trajpub database as ``login`` with ``password`` (the server, port and database of
    ``base_url``, the pipeline's URL), checked by connecting: the login must authenticate, be a member of
    ``trajpub_steward`` and not a superuser (the console acts as a steward, nothing more). Returns the engine and
    the login as the database names it."""
    if not login or len(login) > 63 or not password or "\x00" in login + password:
        raise SignInRefused("enter your steward login and your password")
    url = make_url(base_url).set(username=login, password=password)
    engine = sa.create_engine(url, pool_pre_ping=True, pool_size=2, max_overflow=2)
    try:
        with engine.connect() as conn:
            who, steward, superuser = conn.execute(sa.text(
                "SELECT session_user, pg_has_role(session_user, 'trajpub_steward', 'MEMBER'), rolsuper"
                " FROM pg_roles WHERE rolname = session_user")).one()
    except sa.exc.OperationalError as exc:
        engine.dispose()
        if "authentication failed" not in str(exc.orig):
            raise SignInRefused("the database does not answer; ask the operator to start it (trajpub db up)") from None
        time.sleep(REFUSED_DELAY_S)
        raise SignInRefused("the login or the password is wrong") from None
    if not steward or superuser:
        engine.dispose()
        raise SignInRefused(f"the login {who} is not a steward's (a member of trajpub_steward, not a superuser): "
                            "the console is for stewards")
    return engine, who
