"""A stand-in for API Gateway on 127.0.0.1, in front of the real Lambda handlers: the HTTP API
(a JWT check like its JWT authorizer, then `functions/api/app.py` with a payload-2.0 event), the
WebSocket API (`$connect` runs the real REQUEST authorizer of `functions/live/app.py`, every
message and the close run its `routes` handler with API Gateway's event shapes) and the
management API (`POST /live/@connections/{id}`, what boto3's `apigatewaymanagementapi` client
of the steps and of `subscribe` sends, written onto that socket). The issuer's JWKS is served
here too, so tokens are verified for real.

Handlers run one at a time through the `LambdaHost` (as the steps do under moto)."""

from __future__ import annotations

import asyncio
import copy
import functools
import http.server
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

from tests.support.lambda_host import ROOT, FakeContext, LambdaHost
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
    too_large: int = 0
    """Posts refused as over MAX_PAYLOAD_BYTES."""
    close_after: int | None = None
    """Close each socket (1011) after this many posted messages (a connection that breaks)."""

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
        event = {
            "type": "REQUEST",
            "methodArn": f"arn:aws:execute-api:us-east-1:123456789012:wsapi01/{STAGE}/$connect",
            "headers": dict(request.headers.raw_items()),
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


def _id(connection: ServerConnection) -> str:
    return uuid.UUID(str(connection.id)).hex


def _sample() -> dict[str, Any]:
    text = (ROOT / "events" / "api" / "start_turn.json").read_text(encoding="utf-8")
    event: dict[str, Any] = json.loads(text)
    return event


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
            if self.path == "/jwks":
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
    """The HTTP side listening (its URL is needed for the environment before the functions are
    loaded); call `start_websocket` once `api`/`live` are loaded."""
    ref: list[Gateway] = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(ref))
    server.daemon_threads = True
    gateway = Gateway(server)
    ref.append(gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield gateway
    finally:
        if gateway.ws is not None:
            gateway.ws.shutdown()
        server.shutdown()
        server.server_close()


def start_websocket(gateway: Gateway, api: ModuleType, live: ModuleType) -> None:
    """Serve the WebSocket API with the loaded function modules."""
    gateway.api, gateway.live = api, live
    gateway.ws = serve(
        gateway.session, "127.0.0.1", 0, process_request=gateway.connect, compression=None
    )
    threading.Thread(target=gateway.ws.serve_forever, daemon=True).start()
