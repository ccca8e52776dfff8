"""The console's pages and actions. Every page but the sign-in asks for a signed-in steward; every POST for the
session's CSRF token (a hidden field of each form). A decision and a withdrawal run :mod:`flows.decisions` as the
steward's own login, the functions ``trajpub approve|reject|withdraw`` run: what the login may not do, the
database refuses here too, and the page says why in one sentence."""

from __future__ import annotations

import logging
from collections.abc import Callable

import sqlalchemy as sa
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from console import reading
from console.sessions import Session, SignInRefused, steward_engine
from trajpub.errors import TrajpubError, one_line

log = logging.getLogger("trajpub.console")
#: How long a decision waits for the release's flow run to publish before the page answers (it goes on).
DECISION_WAIT_S = 120.0
DECISIONS = ("approve", "reject")


def _session(request: Request) -> Session | None:
    return request.app.state.sessions.get(request.session.get("sid"))


def _render(request: Request, name: str, session: Session | None, status_code: int = 200, **context) -> Response:
    notes = []
    if session is not None:
        notes, session.notes = session.notes, []
    return request.app.state.templates.TemplateResponse(
        request, name, {"session": session, "notes": notes, **context}, status_code=status_code)


def _signed_in(request: Request) -> Session | None:
    session = _session(request)
    return session if session is not None and session.login else None


def _to_sign_in() -> Response:
    return RedirectResponse("/login", status_code=303)


async def _posted(request: Request, signed_in: bool = True) -> tuple[Session, FormData]:
    """The form of a POST and its session; 403 without a session, without its CSRF token, or (``signed_in``)
    before sign-in."""
    form = await request.form()
    session = _session(request)
    if session is None or not session.csrf_ok(form.get("csrf")):
        raise HTTPException(403, "refused: this form was not sent from a page of this console session")
    if signed_in and not session.login:
        raise HTTPException(403, "refused: sign in first")
    return session, form


def _read(session: Session, body: Callable[[sa.Connection], object]):
    """``body(conn)`` on a connection of the steward's login; a database error becomes a TrajpubError."""
    try:
        with session.engine.connect() as conn:
            return body(conn)
    except sa.exc.OperationalError:
        raise TrajpubError("the database does not answer; ask the operator to start it (trajpub db up)",
                           "database") from None


def _act(session: Session, what: str, action: Callable[[Callable[[str], None]], None]) -> None:
    """Run ``action(say)`` and keep what it says, or why it was refused, for the next page."""
    def say(text: str) -> None:
        session.notes.append(("info", text))

    try:
        action(say)
        log.info("%s: %s", session.login, what)
    except TrajpubError as exc:
        session.notes.append(("error", str(exc)))
    except sa.exc.OperationalError:
        session.notes.append(("error", "the database does not answer; ask the operator to start it"))
    except sa.exc.DBAPIError as exc:
        session.notes.append(("error", f"the database refused: {one_line(exc)}"))
    else:
        return
    log.info("%s: %s refused: %s", session.login, what, session.notes[-1][1])


def health(request: Request) -> Response:
    return PlainTextResponse("trajpub console")


def login_form(request: Request) -> Response:
    session = _session(request)
    if session is not None and session.login:
        return RedirectResponse("/", status_code=303)
    if session is None:
        sid, session = request.app.state.sessions.new()
        request.session["sid"] = sid
    return _render(request, "login.html", session)


async def login(request: Request) -> Response:
    """Sign in with the steward's own database login and password: the password opens the session's engine and
    is kept nowhere else; the session id changes (no session fixation)."""
    from tasks.db import database_url

    session, form = await _posted(request, signed_in=False)
    name = str(form.get("login", "")).strip()
    try:
        engine, who = await run_in_threadpool(lambda: steward_engine(database_url(), name,
                                                                     str(form.get("password", ""))))
    except SignInRefused as exc:
        log.info("sign-in as %r refused: %s", name[:63], exc)
        session.notes.append(("error", str(exc)))
        return _render(request, "login.html", session, status_code=401, login=name)
    request.app.state.sessions.drop(request.session.get("sid"))
    sid, _ = request.app.state.sessions.new(login=who, engine=engine)
    request.session["sid"] = sid
    log.info("%s signed in", who)
    return RedirectResponse("/", status_code=303)


async def logout(request: Request) -> Response:
    await _posted(request, signed_in=False)
    request.app.state.sessions.drop(request.session.get("sid"))
    request.session.clear()
    return _to_sign_in()


def home(request: Request) -> Response:
    if (session := _signed_in(request)) is None:
        return _to_sign_in()
    awaiting, published = _read(session, lambda conn: (
        reading.releases(conn, "awaiting_approval", session.login),
        reading.releases(conn, "published", session.login, limit=50)))
    return _render(request, "index.html", session, awaiting=awaiting, published=published)


def release(request: Request) -> Response:
    if (session := _signed_in(request)) is None:
        return _to_sign_in()
    release_id = request.path_params["release_id"]
    try:
        found = _read(session, lambda conn: reading.release(conn, release_id))
    except TrajpubError as exc:
        session.notes.append(("error", str(exc)))
        return _render(request, "missing.html", session, status_code=404)
    rel = found["review"].release
    own = bool(found["four_eyes"]) and rel["requested_by"] == session.login
    return _render(request, "release.html", session, own=own, **found)


def report(request: Request) -> Response:
    """The stored HTML review report, framed by the release's page (sandboxed: :data:`console.app.REPORT_POLICY`)."""
    if (session := _signed_in(request)) is None:
        return _to_sign_in()
    from tasks.governance import review_page

    try:
        return HTMLResponse(_read(session, lambda conn: review_page(conn, request.path_params["release_id"])))
    except TrajpubError as exc:
        return PlainTextResponse(str(exc), status_code=404)


async def decision(request: Request) -> Response:
    """Approve or reject as the steward's login (:func:`flows.decisions.decide`): the database records the login
    and checks the status, four-eyes and that a rejection says why; an approved release is then published."""
    from flows.decisions import decide

    session, form = await _posted(request)
    release_id, chosen = request.path_params["release_id"], form.get("decision")
    if chosen not in DECISIONS:
        raise HTTPException(400, "the decision is approve or reject")
    comment = str(form.get("comment", "")).strip() or None

    def act(say: Callable[[str], None]) -> None:
        if comparison := _read(session, lambda conn: comparison_of(conn, release_id)):
            raise TrajpubError(f"release {release_id} is a candidate of the comparison {comparison}: the steward "
                               f"picks one candidate, which rejects the others (trajpub release pick "
                               f"{release_id}); the console does not pick", "console")
        decide(session.engine, release_id, chosen, comment, DECISION_WAIT_S, say)

    await run_in_threadpool(_act, session, f"{chosen} release {release_id}", act)
    return RedirectResponse(f"/releases/{release_id}", status_code=303)


def comparison_of(conn: sa.Connection, release_id: int) -> str | None:
    """The name of the comparison ``release_id`` is a candidate of (None when it is a release of its own)."""
    from tasks.governance import get_release

    found = (get_release(conn, release_id).get("summary") or {}).get("comparison")
    return found.get("name", "(unnamed)") if found else None


async def withdraw(request: Request) -> Response:
    """Withdraw a published release as the steward's login (:func:`flows.decisions.withdraw`)."""
    from flows.decisions import withdraw as withdraw_release

    session, form = await _posted(request)
    release_id, reason = request.path_params["release_id"], str(form.get("reason", "")).strip()

    def act(say: Callable[[str], None]) -> None:
        dropped = withdraw_release(session.engine, release_id, reason)
        say(f"release {release_id} withdrawn; dropped {', '.join(dropped)}")

    await run_in_threadpool(_act, session, f"withdraw release {release_id}", act)
    return RedirectResponse(f"/releases/{release_id}", status_code=303)


def budget(request: Request) -> Response:
    if (session := _signed_in(request)) is None:
        return _to_sign_in()
    dataset = request.query_params.get("dataset") or None
    try:
        found = _read(session, lambda conn: reading.budgets(conn, dataset))
    except TrajpubError as exc:
        session.notes.append(("error", str(exc)))
        return _render(request, "missing.html", session, status_code=404)
    return _render(request, "budget.html", session, budgets=found, dataset=dataset)
