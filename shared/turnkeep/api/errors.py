"""The API's error shape and the mapping of domain errors to HTTP statuses.

Every error answer is ``{"error": {"code": ..., "message": ..., "field"?: ...}}``. Bad input is
always a 4xx naming what was wrong; a 500 means a genuine bug (logged with its traceback).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnkeep.api.headers import duplicated_singleton
from turnkeep.attachments import BEDROCK_LIMITS, AttachmentError
from turnkeep.envelope import (
    EnvelopeClosedError,
    EnvelopeConflictError,
    EnvelopeExistsError,
    EnvelopeNotFoundError,
    EnvelopeUnavailableError,
    MetaValidationError,
)
from turnkeep.envelope.keys import brief_key
from turnkeep.harness import (
    FencedWriteError,
    OperationNotFoundError,
    SessionNotFoundError,
    StepInputError,
    TurnConflictError,
)
from turnkeep.storage import (
    GuardFailedError,
    StorageClosedError,
    StorageConflictError,
    StorageUnavailableError,
    StorageValidationError,
)

logger = logging.getLogger("turnkeep.api")


class ApiError(Exception):
    """An error the API answers with `status` and a JSON error body."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = dict(headers or {})


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The JSON body of an error answer."""
    error: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        error["field"] = field
    return {"error": error}


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    field: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A JSON error response."""
    return JSONResponse(error_body(code, message, field), status_code=status, headers=headers)


def not_found(what: str) -> ApiError:
    """404 for a session or turn that is absent or not the caller's (never says which)."""
    return ApiError(404, "not_found", f"{what} not found")


# Domain errors -> (status, code). Order matters: the first matching class wins.
_DOMAIN: tuple[tuple[type[Exception], int, str], ...] = (
    (TurnConflictError, 409, "turn_running"),
    (SessionNotFoundError, 404, "not_found"),
    (OperationNotFoundError, 404, "not_found"),
    (StepInputError, 422, "invalid_input"),
    (FencedWriteError, 409, "turn_ended"),
    (MetaValidationError, 422, "invalid_meta"),
    (EnvelopeNotFoundError, 404, "not_found"),
    (EnvelopeExistsError, 409, "session_exists"),
    (EnvelopeConflictError, 409, "conflict"),
    (EnvelopeUnavailableError, 503, "unavailable"),
    (EnvelopeClosedError, 503, "unavailable"),
    (StorageValidationError, 422, "invalid_input"),
    (GuardFailedError, 409, "conflict"),
    (StorageConflictError, 409, "conflict"),
    (StorageUnavailableError, 503, "unavailable"),
    (StorageClosedError, 503, "unavailable"),
)


def domain_status(exc: Exception) -> tuple[int, str] | None:
    """The (status, code) a domain error maps to, or None for an unexpected exception."""
    for kind, status, code in _DOMAIN:
        if isinstance(exc, kind):
            return status, code
    return None


# Loc elements pydantic adds for the members of a union (`str | int | float | bool`).
_UNION_TAGS = frozenset({"str", "int", "float", "bool", "none", "list", "dict"})


def _field_of(loc: Sequence[Any]) -> str:
    # ("body", "text") -> "text"; ("query", "cursor") -> "cursor"; ("body",) -> "body"
    parts = [brief_key(str(p)) for p in (loc[1:] if len(loc) > 1 else loc)]
    while len(parts) > 1 and parts[-1] in _UNION_TAGS:
        parts.pop()
    return ".".join(parts)


def _validation_message(errors: Sequence[Any]) -> tuple[str, str]:
    """(first offending field, one readable line per field); never echoes the input."""
    # The offending input may be huge (an oversize message) or sensitive: only loc and msg.
    by_field: dict[str, list[str]] = {}
    for err in errors:
        if not isinstance(err, dict):
            continue
        loc = tuple(err.get("loc", ()))
        if err.get("type") == "json_invalid":
            field, msg = "body", f"invalid JSON at position {loc[-1] if len(loc) > 1 else '?'}"
        else:
            field, msg = _field_of(loc) or "request", str(err.get("msg"))
        by_field.setdefault(field, []).append(msg)
    if not by_field:
        return "request", "invalid request"
    lines = []
    for field, msgs in list(by_field.items())[:5]:
        if len(msgs) > 1:  # a union: every member refused the value
            lines.append(f"{field}: wrong type ({'; '.join(dict.fromkeys(msgs))})")
        else:
            lines.append(f"{field}: {msgs[0]}")
    more = f" (+{len(by_field) - 5} more fields)" if len(by_field) > 5 else ""
    return next(iter(by_field)), "; ".join(lines) + more


_HTTP_CODES = {
    400: "invalid_body",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
}


_ROUTING_STATUSES = frozenset({404, 405})


def _identity_error(request: Request) -> ApiError | None:
    """The 401 an unauthenticated request gets before any other judgement, else None."""
    authenticator = getattr(getattr(request.app.state, "turnkeep", None), "authenticator", None)
    if authenticator is None:
        return None
    try:
        authenticator.user_id(request)
    except ApiError as denied:
        return denied
    return None


def _no_route_message(path: str) -> str:
    """The 404 message of an unmatched path (the path itself is never echoed)."""
    if len(path) > 1 and path.endswith("/"):
        return "no route matches this path: API paths have no trailing slash (and never redirect)"
    return "no route matches this path"


def install_error_handlers(app: FastAPI, *, max_body_bytes: int) -> None:
    """Register the JSON error handlers and the catch-all for genuine bugs."""

    async def on_api_error(_request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, ApiError):  # registered for ApiError only
            raise exc
        return error_response(
            exc.status, exc.code, exc.message, field=exc.field, headers=exc.headers
        )

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, RequestValidationError):  # registered for it only
            raise exc
        # FastAPI parses the JSON body before it resolves dependencies: identity comes first.
        denied = _identity_error(request)
        if denied is not None:
            return await on_api_error(request, denied)
        field, message = _validation_message(exc.errors())
        return error_response(422, "validation_error", message, field=field)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, StarletteHTTPException):  # registered for it only
            raise exc
        if exc.status_code in _ROUTING_STATUSES:
            # No route (404) or no such method (405): say nothing about the API's routes to a
            # caller who is not authenticated.
            denied = _identity_error(request)
            if denied is not None:
                return await on_api_error(request, denied)
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":
            detail = _no_route_message(request.url.path)
        return error_response(exc.status_code, code, detail, headers=exc.headers)

    async def on_domain(_request: Request, exc: Exception) -> JSONResponse:
        mapped = domain_status(exc)
        if mapped is None:  # pragma: no cover - handlers are registered per mapped class
            raise exc
        status, code = mapped
        if status >= 500:
            logger.warning("store unavailable: %s: %s", type(exc).__name__, exc)
        return error_response(status, code, str(exc) or type(exc).__name__)

    async def on_attachment(_request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, AttachmentError):  # registered for it only
            raise exc
        return error_response(exc.status, exc.code, str(exc))

    app.add_exception_handler(AttachmentError, on_attachment)
    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    for kind, _status, _code in _DOMAIN:
        app.add_exception_handler(kind, on_domain)
    app.add_middleware(GuardMiddleware, max_body_bytes=max_body_bytes)


class _BodyTooLarge(StarletteHTTPException):
    """Raised from the guarded `receive` once a body without Content-Length exceeds the cap.

    An HTTPException, so FastAPI's body parser re-raises it (instead of a generic 400)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request body exceeds the limit of {max_bytes} bytes")


class GuardMiddleware:
    """Outermost guard: refuses oversize bodies (413) and turns an unhandled bug into a JSON 500.

    Also refuses a repeated singleton header (400 `duplicate_header`, `turnkeep.api.headers`).
    Starlette's own server-error handler re-raises after answering; this one answers and logs,
    so uvicorn and Mangum both return the JSON body.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int = 1_048_576) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        # An attachment's bytes (PUT …/attachments/{id}/content) may be the largest the
        # checks take; the route still refuses more than the declared size (docs/api.md).
        self.upload_bytes = max(max_body_bytes, BEDROCK_LIMITS.largest)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        duplicated = duplicated_singleton(scope.get("headers", ()))
        if duplicated is not None:
            await error_response(
                400,
                "duplicate_header",
                f"the {duplicated} header appears more than once; send it once",
                field=duplicated,
            )(scope, receive, send)
            return
        max_bytes = self.upload_bytes if _is_upload(scope) else self.max_body_bytes
        length = _content_length(scope)
        if length is not None and length > max_bytes:
            await error_response(
                413,
                "body_too_large",
                f"request body is {length} bytes; the limit is {max_bytes} bytes",
            )(scope, receive, send)
            return
        started = False
        received = 0

        async def counting_receive() -> Message:
            # A chunked body carries no Content-Length: count what actually arrives.
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    raise _BodyTooLarge(max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLarge as exc:
            if started:
                raise
            await error_response(413, "body_too_large", exc.detail)(scope, receive, send)
        except Exception:
            logger.exception("unhandled error in %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            await error_response(
                500, "internal_error", "internal error (logged); the request may be retried"
            )(scope, receive, send)


def _is_upload(scope: Scope) -> bool:
    path = str(scope.get("path", ""))
    return (
        scope.get("method") == "PUT"
        and path.startswith("/sessions/")
        and path.endswith("/content")
        and "/attachments/" in path
    )


def _content_length(scope: Scope) -> int | None:
    for name, raw in scope.get("headers") or ():
        if name == b"content-length":
            try:
                return int(raw)
            except ValueError:
                return None
    return None
