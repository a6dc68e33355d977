"""A stand-in for API Gateway on 127.0.0.1, in front of the real Lambda handlers: the HTTP API
(a JWT check like its JWT authorizer, then `functions/api/app.py` with a payload-2.0 event), the
WebSocket API (`$connect` runs the real REQUEST authorizer of `functions/live/app.py`, every
message and the close run its `routes` handler with API Gateway's event shapes) and the
management API (`POST /live/@connections/{id}`, what boto3's `apigatewaymanagementapi` client
of the steps and of `subscribe` sends, written onto that socket). The issuer's JWKS is served
here too, so tokens are verified for real.

`$connect` follows API Gateway's rule for a REQUEST authorizer: its identity sources, read from
template.yaml's `WebSocketAuthorizer`, must all be present, or the handshake is refused 401
without the authorizer being called (`identity_sources`, `missing_identity`).

Handlers run one at a time through the `LambdaHost` (as the steps do under moto)."""

from __future__ import annotations

import asyncio
import copy
import functools
import http.server
import json
import mimetypes
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

from tests.support.aws_template import load_template
from tests.support.lambda_host import ROOT, FakeContext, LambdaHost, load_function_module
from tests.support.state_machine import deploy
from turnkeep.api.console import PAGE_HEADERS, asset
from turnkeep.aws_lambda import container
from turnkeep.live.authorizer import JwksCache, JwtVerifier, Unauthorized

AUDIENCE = "turnkeep-app-client"
STAGE = "live"
CONNECTIONS = f"/{STAGE}/@connections/"
MAX_PAYLOAD_BYTES = 128 * 1024
"""API Gateway's WebSocket message payload limit: a larger `PostToConnection` body is refused."""
_POST_ERRORS = {410: "GoneException", 413: "PayloadTooLargeException"}


def payload_too_large(data: bytes) -> bool:
    """Whether API Gateway refuses `data` as a message (its 128 KiB payload limit)."""
    return len(data) > MAX_PAYLOAD_BYTES


def post_answer(status: int) -> tuple[bytes, dict[str, str]]:
    """The management API's answer body and headers for a `PostToConnection` status, with the
    error type boto3 reads (`x-amzn-ErrorType`)."""
    error = _POST_ERRORS.get(status)
    if error is None:
        return b"", {}
    return json.dumps({"message": error}).encode(), {"x-amzn-ErrorType": error}


@dataclass
class Gateway:
    """The running stand-in: `url` (HTTP API), `ws_url` (WebSocket API), `endpoint` (the
    management API, TURNKEEP_WS_ENDPOINT), `issuer` (TURNKEEP_JWT_ISSUER) and what it saw."""

    http: http.server.ThreadingHTTPServer
    host: LambdaHost = field(default_factory=LambdaHost)
    """The deployment's host (set once deployed): the handlers run one at a time with it."""
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    api: ModuleType | None = None
    live: ModuleType | None = None
    ws: Server | None = None
    sockets: dict[str, ServerConnection] = field(default_factory=dict)
    users: dict[str, str] = field(default_factory=dict)
    sent: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Every message posted to each connection, in order."""
    paths: list[str] = field(default_factory=list)
    """The path of every HTTP API request."""
    refused: int = 0
    """Handshakes the authorizer refused."""
    unidentified: int = 0
    """Handshakes refused before the authorizer ran (an identity source missing)."""
    too_large: int = 0
    """Posts refused as over MAX_PAYLOAD_BYTES."""
    close_after: int | None = None
    """Close each socket (1011) after this many posted messages (a connection that breaks)."""
    console: bool = False
    """Serve the web console's files at `/` and `/console/…` beside the API, unauthenticated
    (a static site on the API's origin: the page needs no CORS)."""
    without_live_route: bool = False
    """Answer `/live…` 404 as an API older than that route does (the Lambda is not called)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    @property
    def issuer(self) -> str:
        return self.url

    @property
    def endpoint(self) -> str:
        return f"{self.url}/{STAGE}"

    @property
    def ws_url(self) -> str:
        assert self.ws is not None
        return f"ws://127.0.0.1:{self.ws.socket.getsockname()[1]}/{STAGE}"

    def token(self, sub: str, key: RSAKey | None = None, **claims: Any) -> str:
        """A token of this issuer (signed by `key` when given: one the JWKS does not hold)."""
        signer = key or self.key
        body = {"iss": self.issuer, "aud": AUDIENCE, "sub": sub, "exp": time.time() + 600}
        body.update(claims)
        return jwt.encode({"alg": "RS256", "kid": signer.kid}, body, signer)

    @functools.cached_property
    def verifier(self) -> JwtVerifier:
        """The HTTP API's JWT authorizer (its JWKS fetched once)."""
        return JwtVerifier(self.issuer, AUDIENCE, JwksCache(f"{self.issuer}/jwks"))

    # -- HTTP API ---------------------------------------------------------------------------

    def http_api(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Any:
        """The API Lambda's answer to one request, or API Gateway's own 401."""
        verifier = self.verifier
        lowered = {k.lower(): v for k, v in headers.items()}
        scheme, _, token = lowered.get("authorization", "").partition(" ")
        try:
            if scheme.lower() != "bearer":
                raise Unauthorized
            sub = verifier.subject(token.strip())
        except Unauthorized:
            return {"statusCode": 401, "headers": {}, "body": '{"message":"Unauthorized"}'}
        path, _, query = target.partition("?")
        self.paths.append(path)
        if self.without_live_route and (path == "/live" or path.startswith("/live/")):
            body = '{"error": {"code": "not_found", "message": "route not found"}}'
            return {
                "statusCode": 404,
                "headers": {"content-type": "application/json"},
                "body": body,
            }
        event = copy.deepcopy(_sample())
        event["rawPath"] = event["requestContext"]["http"]["path"] = path
        event["rawQueryString"] = query
        event["requestContext"]["http"]["method"] = method
        event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = sub
        event["headers"] = {k.lower(): v for k, v in headers.items() if k.lower() != "host"}
        event["body"] = body.decode("utf-8") if body else None
        assert self.api is not None
        loop = asyncio.new_event_loop()  # Mangum runs the app on the thread's loop
        asyncio.set_event_loop(loop)
        try:
            with self.host.acting_as("ApiFunction"):
                return self.api.handler(event, FakeContext(function_name="ApiFunction"))
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    # -- WebSocket API ----------------------------------------------------------------------

    def connect(self, connection: ServerConnection, request: Request) -> Response | None:
        """`$connect`: the real authorizer decides; a refusal is API Gateway's 401."""
        parts = urlsplit(request.path)
        if parts.path != f"/{STAGE}":
            return connection.respond(403, "Forbidden\n")
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        headers = dict(request.headers.raw_items())
        if missing_identity(identity_sources(), headers, query):
            self.unidentified += 1
            return connection.respond(401, "Unauthorized\n")
        event = {
            "type": "REQUEST",
            "methodArn": f"arn:aws:execute-api:us-east-1:123456789012:wsapi01/{STAGE}/$connect",
            "headers": headers,
            "queryStringParameters": query or None,
            "requestContext": {"routeKey": "$connect", "connectionId": _id(connection)},
        }
        assert self.live is not None
        try:
            with self.host.acting_as("LiveAuthorizerFunction"):
                policy = self.live.authorize_connect(event, FakeContext("LiveAuthorizerFunction"))
        except Unauthorized:
            self.refused += 1
            return connection.respond(401, "Unauthorized\n")
        self.users[_id(connection)] = policy["context"]["sub"]
        return None

    def session(self, connection: ServerConnection) -> None:
        """One connection: each message to its route (`$request.body.action`), then
        `$disconnect`."""
        cid = _id(connection)
        self.sockets[cid] = connection
        try:
            for raw in connection:
                text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
                try:
                    action = json.loads(text).get("action")
                except (ValueError, AttributeError):
                    action = None
                self.route("subscribe" if action == "subscribe" else "$default", cid, text)
        finally:
            self.sockets.pop(cid, None)
            self.route("$disconnect", cid, None)

    def route(self, route: str, cid: str, body: str | None) -> None:
        """Run `routes` for one event of connection `cid` as API Gateway invokes it."""
        context = {
            "routeKey": route,
            "connectionId": cid,
            "stage": STAGE,
            "authorizer": {"principalId": self.users[cid], "sub": self.users[cid]},
        }
        event = {"requestContext": context, "body": body, "isBase64Encoded": False}
        assert self.live is not None
        with self.host.acting_as("LiveFunction"):
            answer = self.live.routes(event, FakeContext("LiveFunction"))
        assert answer == {"statusCode": 200}

    def post(self, cid: str, data: bytes) -> int:
        """`PostToConnection`: 200 once written, 410 (GoneException) for a closed connection,
        413 (PayloadTooLargeException) for a message over API Gateway's limit (not written)."""
        if payload_too_large(data):
            self.too_large += 1
            return 413
        connection = self.sockets.get(cid)
        if connection is None:
            return 410
        got = self.sent.setdefault(cid, [])
        got.append(json.loads(data))
        try:
            connection.send(data.decode("utf-8"))
            if self.close_after is not None and len(got) >= self.close_after:
                connection.close(1011, "going away")
        except ConnectionClosed:  # the socket went: as API Gateway says
            return 410
        return 200

    def messages(self) -> list[dict[str, Any]]:
        """Every message posted to any connection, in order of connection."""
        return [m for got in self.sent.values() for m in got]


@functools.cache
def identity_sources() -> tuple[str, ...]:
    """The `IdentitySource` of template.yaml's WebSocket authorizer (none when left out)."""
    authorizer = load_template()["Resources"]["WebSocketAuthorizer"]["Properties"]
    return tuple(authorizer.get("IdentitySource") or ())


def missing_identity(
    sources: tuple[str, ...], headers: dict[str, str], query: dict[str, str]
) -> list[str]:
    """The identity sources a `$connect` request lacks: API Gateway answers 401 without calling
    the authorizer when any is missing (header names case-insensitive, query names not)."""
    lowered = {name.lower() for name in headers}
    missing = []
    for source in sources:
        if source.startswith("route.request.header."):
            present = source.removeprefix("route.request.header.").lower() in lowered
        elif source.startswith("route.request.querystring."):
            present = bool(query.get(source.removeprefix("route.request.querystring.")))
        else:
            raise AssertionError(f"identity source not modelled by the stand-in: {source}")
        if not present:
            missing.append(source)
    return missing


def _id(connection: ServerConnection) -> str:
    return uuid.UUID(str(connection.id)).hex


def _sample() -> dict[str, Any]:
    text = (ROOT / "events" / "api" / "start_turn.json").read_text(encoding="utf-8")
    event: dict[str, Any] = json.loads(text)
    return event


def _console_file(target: str) -> Path | None:
    """The console file of `GET target` (`/` is the page), as a static site would serve it."""
    path = target.partition("?")[0]
    if path == "/":
        return asset("index.html")
    return asset(path.removeprefix("/console/")) if path.startswith("/console/") else None


def _handler(gateway_ref: list[Gateway]) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {"Content-Type": "application/json"}).items():
                if name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _any(self) -> None:
            gateway = gateway_ref[0]
            body = self._body()
            page = _console_file(self.path) if gateway.console and self.command == "GET" else None
            if page is not None:
                kind = mimetypes.guess_type(page.name)[0] or "application/octet-stream"
                self._answer(200, page.read_bytes(), {**PAGE_HEADERS, "Content-Type": kind})
            elif self.path == "/jwks":
                keys = KeySet([gateway.key]).as_dict(private=False)
                self._answer(200, json.dumps(keys).encode())
            elif self.path.startswith(CONNECTIONS) and self.command == "POST":
                cid = unquote(self.path[len(CONNECTIONS) :])
                status = gateway.post(cid, body)
                self._answer(status, *post_answer(status))
            else:
                answer = gateway.http_api(self.command, self.path, dict(self.headers), body)
                text = answer.get("body") or ""
                self._answer(
                    int(answer["statusCode"]), text.encode("utf-8"), answer.get("headers") or {}
                )

        do_GET = do_POST = do_PUT = do_DELETE = _any

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def running_gateway() -> Iterator[Gateway]:
    """Both APIs listening (their URLs are needed for the environment before the functions are
    loaded: TURNKEEP_WS_ENDPOINT, TURNKEEP_LIVE_URL); call `start_websocket` once `api`/`live`
    are loaded, before the first request."""
    ref: list[Gateway] = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(ref))
    server.daemon_threads = True
    gateway = Gateway(server)
    ref.append(gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    gateway.ws = serve(
        gateway.session, "127.0.0.1", 0, process_request=gateway.connect, compression=None
    )
    threading.Thread(target=gateway.ws.serve_forever, daemon=True).start()
    try:
        yield gateway
    finally:
        gateway.ws.shutdown()
        server.shutdown()
        server.server_close()


def start_websocket(gateway: Gateway, api: ModuleType, live: ModuleType) -> None:
    """Put the loaded function modules behind both APIs."""
    gateway.api, gateway.live = api, live


@contextmanager
def deployed_gateway(
    monkeypatch: pytest.MonkeyPatch, *, containers: bool = False, **env: str
) -> Iterator[Gateway]:
    """The stack of template.yaml (STANDARD) under moto behind the stand-in, the functions'
    environment as the template sets it (the API function told the WebSocket URL,
    TURNKEEP_LIVE_URL), plus `env`. `containers`: each function runs beside the others, as
    deployed (Powertools metrics off: see `LambdaHost.containers`)."""
    if containers:
        env = {**env, "POWERTOOLS_METRICS_DISABLED": "true"}
    with running_gateway() as running:
        wired = {
            "TURNKEEP_WS_ENDPOINT": running.endpoint,
            "TURNKEEP_JWT_ISSUER": running.issuer,
            "TURNKEEP_JWT_AUDIENCE": AUDIENCE,
            "TURNKEEP_JWKS_URL": f"{running.url}/jwks",
            "TURNKEEP_LIVE_URL": running.ws_url,
        }
        with deploy(monkeypatch, "STANDARD", **wired, **env) as deployed:
            monkeypatch.setenv("TURNKEEP_STATE_MACHINE_ARN", deployed.state_machine_arn)
            container.reset_runtime()
            running.host = deployed.host
            running.host.containers = containers
            start_websocket(running, load_function_module("api"), load_function_module("live"))
            yield running
