"""The web console: static HTML/CSS/ES modules shipped in the package, served by `turnkeep serve`.

`console_router()` answers `GET /` (the page) and `GET /console/<file>` (its assets) without
authentication: the page holds no data; it calls the API with the token the person enters
(kept in the browser's `sessionStorage`, sent as `Authorization`, never in a URL). The same
files work against a deployed stack whose HTTP API allows the console's origin (the template's
`CorsAllowOrigin`). Layout of the page's code: docs/console.md.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response

from turnkeep.api.errors import not_found

STATIC_DIR = Path(__file__).with_name("static")

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}

# The page loads only its own files; it may call any http(s) API and follow turns on any
# WebSocket API (the base URL is the person's choice, GET /live names the socket), and
# nothing may frame it.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "connect-src 'self' http: https: ws: wss:; frame-ancestors 'none'; base-uri 'none'; "
        "form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def asset(name: str) -> Path | None:
    """The shipped file `name` (a relative path inside the static folder), or None."""
    candidate = (STATIC_DIR / name).resolve()
    root = STATIC_DIR.resolve()
    if root not in candidate.parents or not candidate.is_file():
        return None
    if candidate.suffix not in _TYPES:
        return None
    return candidate


def _file(path: Path) -> Response:
    return FileResponse(path, media_type=_TYPES[path.suffix], headers=PAGE_HEADERS)


def console_router() -> APIRouter:
    """`GET /` and `GET /console/{name}`: the console's page and assets (not in the schema)."""
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    def page() -> Response:
        return _file(STATIC_DIR / "index.html")

    @router.get("/console/{name:path}")
    def static_asset(name: str) -> Response:
        found = asset(name)
        if found is None:
            raise not_found("console file")
        return _file(found)

    return router
