"""The WebSocket API seen from `turnkeep chat --url` (contract: docs/api.md, "WebSocket API"):
open a connection with the bearer token in the `Authorization` header (the `$connect` authorizer
reads it there, so the token stays out of URLs and access logs), send the turn's `subscribe`,
read `{"event", "id", "data"}` messages (`follow_on_socket`), the whole turn long, a wait for an
approval included.

`websockets` is imported lazily: only a chat given a WebSocket URL needs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

    from turnkeep.cli.event_renderer import TurnEventRenderer
    from turnkeep.cli.remote import NoStream, RemoteChat

WS_URL_ENV: Final = "TURNKEEP_WS_URL"
"""The WebSocket URL of `chat --url` when `--ws-url` is not given (the stack's `WebSocketUrl`);
without either, the chat asks the API (`GET /live`)."""
OPEN_TIMEOUT_S: Final = 10.0
"""How long the handshake may take before the chat polls instead: a cold `$connect` runs the
authorizer's and the connect handler's Lambdas one after the other, several seconds each."""
QUIET_S: Final = 0.3
"""A socket silent this long after an approval request has sent what precedes the wait."""
MAX_MESSAGE_BYTES: Final = 256 * 1024
"""API Gateway sends at most 128 KB per message; anything larger is not its answer."""


class SocketUnavailable(Exception):
    """The WebSocket could not be opened, or broke: the caller polls the events page."""


@dataclass(frozen=True, slots=True)
class SocketMessage:
    """One message of the WebSocket API: its `event` kind, `id` (the seq, or None) and `data`."""

    kind: str
    id: int | None
    data: Mapping[str, Any]


def check_ws_url(url: str, source: str = "--ws-url") -> str:
    """`url` unchanged; ValueError naming it (and `source`, where it came from) unless it is
    ws(s)://host without a fragment."""
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.netloc:
        raise ValueError(f"{source} must be a wss:// or ws:// URL with a host, got {url!r}")
    if parts.fragment:
        raise ValueError(f"{source} must not carry a fragment, got {url!r}")
    return url


@contextmanager
def open_socket(url: str, authorization: str | None) -> Iterator[ClientConnection]:
    """A connection to the WebSocket API at `url`, closed on exit; `SocketUnavailable` saying
    why when it cannot be opened."""
    try:
        from websockets.exceptions import InvalidHandshake, InvalidStatus
        from websockets.sync.client import connect
    except ImportError:  # pragma: no cover - depends on the installation
        raise SocketUnavailable(
            "the WebSocket client needs websockets: pip install 'turnkeep[api]'"
        ) from None
    headers = {"Authorization": authorization} if authorization else None
    with ExitStack() as stack:
        try:
            connection = stack.enter_context(
                connect(
                    url,
                    additional_headers=headers,
                    open_timeout=OPEN_TIMEOUT_S,
                    max_size=MAX_MESSAGE_BYTES,
                    compression=None,  # API Gateway does not negotiate permessage-deflate
                )
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            # API Gateway: 401 from the authorizer; 403 for a stage or path it does not serve.
            why = {
                401: " (the token was refused)",
                403: " (forbidden: is it the stack's WebSocketUrl?)",
            }.get(status, "")
            raise SocketUnavailable(f"the handshake was answered {status}{why}") from None
        except (InvalidHandshake, OSError, TimeoutError) as exc:
            raise SocketUnavailable(f"{type(exc).__name__}: {exc}") from None
        yield connection


def subscribe(
    connection: ClientConnection, session_id: str, turn_id: str, cursor: int | str
) -> None:
    """Send the one message a client sends: follow `turn_id` after `cursor`."""
    from websockets.exceptions import ConnectionClosed

    body = {"action": "subscribe", "session_id": session_id, "turn_id": turn_id, "cursor": cursor}
    try:
        connection.send(json.dumps(body))
    except ConnectionClosed as exc:
        raise SocketUnavailable(_closed(exc)) from None


def receive(connection: ClientConnection, timeout: float) -> SocketMessage | None:
    """The next message (None when none came within `timeout` seconds); `SocketUnavailable`
    when the connection closed or sent something that is not a message of the API."""
    from websockets.exceptions import ConnectionClosed

    try:
        raw = connection.recv(timeout=timeout)
    except TimeoutError:
        return None
    except ConnectionClosed as exc:
        raise SocketUnavailable(_closed(exc)) from None
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("event"), str):
        raise SocketUnavailable("the server sent a message that is not {event, id, data}")
    seq = body.get("id")
    data = body.get("data")
    return SocketMessage(
        body["event"],
        seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
        data if isinstance(data, dict) else {},
    )


def _closed(exc: Exception) -> str:
    from websockets.exceptions import ConnectionClosed

    if isinstance(exc, ConnectionClosed) and exc.rcvd is not None:
        reason = f" {exc.rcvd.reason}" if exc.rcvd.reason else ""
        return f"the connection was closed ({exc.rcvd.code}{reason})"
    return "the connection was lost"


def follow_on_socket(
    chat: RemoteChat, url: str, turn_id: str, renderer: TurnEventRenderer, deadline: float
) -> str | NoStream | None:
    """Follow `turn_id` of `chat` on the WebSocket API at `url` until it ends: its final status
    (None if not seen to end), or `NoStream` when the caller must poll (from
    `renderer.last_seq`: what the socket showed is not shown again). A call that waits for an
    approval is asked about and the turn followed on, on the same socket."""
    from turnkeep.cli.remote import NoStream

    if chat.session_id is None:
        raise RuntimeError("open_session() first")
    with ExitStack() as opened:
        try:
            connection = opened.enter_context(
                open_socket(url, chat.client.headers.get("Authorization"))
            )
        except SocketUnavailable as exc:
            # Not tried again in this chat (a refused token or a wrong URL stays so): later
            # turns are followed as without a WebSocket URL.
            chat.ws_url = None
            renderer.finish()
            chat.output.notice(f"[the WebSocket at {url} cannot be opened: {exc}; polling]")
            return NoStream()
        try:
            subscribe(connection, chat.session_id, turn_id, renderer.resume_cursor())
            while True:
                remaining = deadline - chat.clock()
                if remaining <= 0:
                    chat.gave_up(turn_id, renderer)
                    return None
                # With a request undecided, a quiet socket means the catch-up or the round's
                # pushes are all here (a catch-up's decided requests are known by then).
                quiet = renderer.undecided and remaining > QUIET_S
                message = receive(connection, QUIET_S if quiet else remaining)
                if message is None:
                    if renderer.undecided:
                        ended = chat.ask_approvals(turn_id, renderer)
                        if ended is not None:
                            return ended.status
                        deadline = chat.clock() + chat.turn_wall_s  # the person's time
                    continue
                if message.kind == "error":
                    return _socket_error(chat, turn_id, renderer, message.data)
                ended = chat.on_live(turn_id, renderer, message.kind, message.id, message.data)
                if ended is not None:
                    return ended.status
        except SocketUnavailable as exc:
            renderer.finish()
            chat.output.notice(
                f"[the WebSocket broke ({exc}); polling from event {renderer.last_seq}]"
            )
            return NoStream()


def _socket_error(
    chat: RemoteChat, turn_id: str, renderer: TurnEventRenderer, data: Mapping[str, Any]
) -> NoStream | None:
    """An `error` message: `not_found` ends following (as the HTTP 404 does); any other
    (`event_too_large` and the like) leaves the rest to the events page."""
    from turnkeep.cli.remote import NoStream

    code, text = data.get("code"), data.get("message")
    renderer.finish()
    if code == "not_found":
        chat.output.notice(f"[stopped following turn {turn_id}: WebSocket {code}: {text}]")
        return None
    chat.output.notice(
        f"[the WebSocket answered {code}: {text}; polling from event {renderer.last_seq}]"
    )
    return NoStream()
