"""The console's Starlette application: its routes (:mod:`console.pages`), the signed session cookie (HttpOnly,
SameSite=Strict, Secure under TLS) and the security headers of every answer."""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from console import pages
from console.sessions import MAX_AGE_S, Sessions
from console.settings import Settings, session_secret
from trajpub import config
from trajpub.errors import TrajpubError

config.apply_environment()  # before Prefect is imported (a decision resumes a flow run through its API)

HERE = Path(__file__).resolve().parent
COOKIE = "trajpub_console"
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1"]
#: The console's own pages: nothing but its stylesheet and its forms; no script runs anywhere.
PAGE_POLICY = ("default-src 'none'; style-src 'self'; img-src 'self'; frame-src 'self'; form-action 'self'; "
               "frame-ancestors 'none'; base-uri 'none'")
#: A stored review report, shown in a frame of the release's page: sandboxed (no script, an origin of its own),
#: its inline style and inlined PNG plots only.
REPORT_POLICY = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'"


async def security_headers(request, call_next):
    response = await call_next(request)
    report = request.url.path.endswith("/report")
    response.headers.setdefault("Content-Security-Policy", REPORT_POLICY if report else PAGE_POLICY)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "SAMEORIGIN" if report else "DENY"
    if not request.url.path.startswith("/static/"):
        response.headers["Cache-Control"] = "no-store"
    return response


def when(moment) -> str:
    """A timestamp as the pages show it, to the minute with its zone."""
    return moment.strftime("%Y-%m-%d %H:%M %Z").strip() if moment is not None else "-"


async def unavailable(request, exc: TrajpubError) -> Response:
    """A page that could not be read (the database down, say): its one sentence, no traceback."""
    return PlainTextResponse(str(exc), status_code=503)


def create_app(settings: Settings | None = None) -> Starlette:
    """The console for ``settings`` (from the environment when not given)."""
    settings = settings or Settings.from_environment()
    routes = [
        Route("/health", pages.health),
        Route("/login", pages.login_form, methods=["GET"]),
        Route("/login", pages.login, methods=["POST"]),
        Route("/logout", pages.logout, methods=["POST"]),
        Route("/", pages.home),
        Route("/releases/{release_id:int}", pages.release),
        Route("/releases/{release_id:int}/report", pages.report),
        Route("/releases/{release_id:int}/decision", pages.decision, methods=["POST"]),
        Route("/releases/{release_id:int}/withdraw", pages.withdraw, methods=["POST"]),
        Route("/budget", pages.budget),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [
        # on loopback, only this machine's names: a page elsewhere whose name was re-pointed at 127.0.0.1 (DNS
        # rebinding) is not answered
        Middleware(TrustedHostMiddleware, allowed_hosts=LOOPBACK_NAMES if settings.loopback else ["*"]),
        Middleware(SessionMiddleware, secret_key=session_secret(), session_cookie=COOKIE, max_age=MAX_AGE_S,
                   same_site="strict", https_only=settings.tls),
        Middleware(BaseHTTPMiddleware, dispatch=security_headers),
    ]
    app = Starlette(routes=routes, middleware=middleware, exception_handlers={TrajpubError: unavailable})
    app.state.sessions = Sessions()
    app.state.templates = Jinja2Templates(directory=HERE / "templates")
    app.state.templates.env.filters["when"] = when
    app.state.settings = settings
    return app
