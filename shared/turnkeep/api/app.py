"""`create_app(runtime, launcher, authenticator)`: the turnkeep HTTP API as a FastAPI app."""

from __future__ import annotations

from fastapi import FastAPI

from turnkeep.api import agent, approvals, live, sessions, stream, turns, usage
from turnkeep.api.auth import Authenticator
from turnkeep.api.context import ApiContext
from turnkeep.api.errors import install_error_handlers
from turnkeep.api.launch import Launcher
from turnkeep.api.settings import ApiSettings
from turnkeep.runtime.build import Runtime

DESCRIPTION = """Durable AI-agent turns. Every error is `{"error": {"code", "message", "field"?}}`.
The caller is the `sub` claim of the API Gateway JWT authorizer (locally: `Bearer dev-<user>`).
Turn events are paged by the session's global sequence: see docs/api.md."""


def create_app(
    runtime: Runtime,
    launcher: Launcher,
    authenticator: Authenticator,
    *,
    settings: ApiSettings | None = None,
    console: bool = False,
) -> FastAPI:
    """The API over `runtime` (harness deps + envelope store); turns are run by `launcher`.

    `console`: also serve the web console at `/` (`turnkeep serve` does; the Lambda does not).
    """
    api_settings = settings or ApiSettings()
    app = FastAPI(
        title="turnkeep",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_url="/openapi.json",
        docs_url="/docs" if authenticator.local else None,
        redoc_url=None,
        # Starlette's slash redirect builds an absolute Location from the request's Host
        # header (an open redirect behind a spoofed Host): a trailing slash is a plain 404.
        redirect_slashes=False,
    )
    app.state.turnkeep = ApiContext(runtime, launcher, authenticator, api_settings)
    install_error_handlers(app, max_body_bytes=api_settings.max_body_bytes)
    app.include_router(sessions.router)
    app.include_router(turns.router)
    app.include_router(stream.router)  # SSE; 501 where no in-process hub runs the turns
    app.include_router(approvals.router)
    app.include_router(agent.router)
    app.include_router(usage.router)  # the caller's spend (docs/usage.md)
    app.include_router(live.router)  # where turns are followed live; WebSocket tickets
    if console:
        from turnkeep.api.console import console_router

        app.include_router(console_router())
    return app
