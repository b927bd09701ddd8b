"""The web console: one page and its static files, served by the API app itself.

The page is plain HTML, CSS and JavaScript shipped as package data (no build step, nothing
fetched from elsewhere) and talks to the same API as everyone else, with the admin token kept in
the tab's ``sessionStorage``: taken from the URL's fragment (``/console#token=...``, the link
``carrier run`` prints) or typed in. The page itself holds no data, so it is served without
auth; every request it makes is authenticated like any other.

    app = create_app(manager, settings)   # the console is among ROUTERS: GET / and /console
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from carrier.api.errors import ApiError

__all__ = ["ASSETS", "CSP", "router"]

CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
"""The page's Content-Security-Policy: its own files only; no inline script or style."""

ASSETS: dict[str, str] = {
    "console.css": "text/css; charset=utf-8",
    "editor.css": "text/css; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "sse.js": "text/javascript; charset=utf-8",
    "problems.js": "text/javascript; charset=utf-8",
    "persona_rows.js": "text/javascript; charset=utf-8",
    "persona_clients.js": "text/javascript; charset=utf-8",
    "persona.js": "text/javascript; charset=utf-8",
    "editor.js": "text/javascript; charset=utf-8",
    "chat.js": "text/javascript; charset=utf-8",
    "revisions.js": "text/javascript; charset=utf-8",
    "health.js": "text/javascript; charset=utf-8",
    "charts.js": "text/javascript; charset=utf-8",
    "overview.js": "text/javascript; charset=utf-8",
    "views.js": "text/javascript; charset=utf-8",
    "main.js": "text/javascript; charset=utf-8",
    "knowledge.js": "text/javascript; charset=utf-8",
    "access.js": "text/javascript; charset=utf-8",
    "logs.js": "text/javascript; charset=utf-8",
    "conversations.js": "text/javascript; charset=utf-8",
    "turn_trace.js": "text/javascript; charset=utf-8",
    "instagram.js": "text/javascript; charset=utf-8",
    "jobs.js": "text/javascript; charset=utf-8",
}
"""The files under ``/console/assets/``, with their media types (nothing else is served)."""

_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    # Served from the package: a new version of Carrier may change them, so revalidate.
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)


@cache
def _read(name: str) -> bytes:
    return resources.files(__name__).joinpath("static", name).read_bytes()


@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("/console", status_code=307)


@router.get("/console")
async def page() -> Response:
    """The console page."""
    return Response(_read("index.html"), media_type="text/html; charset=utf-8", headers=_HEADERS)


@router.get("/console/assets/{name}")
async def asset(name: str) -> Response:
    """One of :data:`ASSETS`; 404 for anything else (no paths, no listing)."""
    media = ASSETS.get(name)
    if media is None:
        raise ApiError(404, "not_found", f"no console asset named {name!r}")
    return Response(_read(name), media_type=media, headers=_HEADERS)
