"""The WebSocket API's routes on AWS (docs/api.md, "WebSocket API"): `subscribe`, `$default`,
`$disconnect`. `$connect` is authorized by `turnkeep.live.authorizer` and needs no function.

`subscribe` `{"action": "subscribe", "session_id", "turn_id", "cursor"}`: the caller must own the
session (else the same `not_found` as the HTTP API). The subscription is recorded first, then
the catch-up is read from storage and sent, so an event committed meanwhile is either in the
catch-up or pushed by the step that made it: no gap. A turn that had already ended gets its
catch-up and `end`, and no subscription. Bad input gets an `error` message and changes nothing.
A client gone before its answer was sent (`GoneException`) is answered no further and its
subscription is removed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from turnkeep.envelope import Envelope
from turnkeep.events.models import CURSOR_MAX, EventsPage
from turnkeep.events.nested import CURSOR_PATTERN, TurnCursor
from turnkeep.harness.deps import HarnessDeps
from turnkeep.harness.state import (
    frames_scope,
    load_record,
    load_state,
    response_id,
    user_entry_id,
)
from turnkeep.live.connections import Connections
from turnkeep.live.push import end_message, event_message, message
from turnkeep.session_ids import SESSION_ID_PATTERN
from turnkeep.storage import Storage
from turnkeep.turn_rules import OP_ID_PATTERN

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES: Final = 4096
"""A client message longer than this is refused (a subscribe is ~300 bytes)."""
PAGE: Final = 500


class Subscribe(BaseModel):
    """The one message a client sends."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["subscribe"]
    session_id: str = Field(pattern=SESSION_ID_PATTERN)
    turn_id: str = Field(pattern=OP_ID_PATTERN)
    cursor: (
        Annotated[StrictInt, Field(ge=0, le=CURSOR_MAX)]
        | Annotated[str, Field(pattern=CURSOR_PATTERN)]
    ) = 0
    """The last `id` seen: a seq, or with sub-agents' child turns the events page's
    `<seq>:<child>=<seq>,...` (docs/api.md, "Sub-agent events")."""


@dataclass(frozen=True)
class Route:
    """One WebSocket message's context: the connection, its user and its route."""

    connection_id: str
    user_id: str
    route_key: str
    body: str


def route_of(event: Mapping[str, Any]) -> Route:
    """The connection, user (the authorizer's `sub`) and route of a WebSocket event."""
    context = event.get("requestContext") or {}
    authorizer = context.get("authorizer") or {}
    user = authorizer.get("sub") or authorizer.get("principalId") or ""
    body = event.get("body")
    return Route(
        str(context.get("connectionId", "")),
        str(user),
        str(context.get("routeKey", "")),
        body if isinstance(body, str) else "",
    )


def error(code: str, text: str) -> bytes:
    """An error message: nothing was changed."""
    return message("error", {"code": code, "message": text})


class WebSocketRoutes:
    """Handles the routes with the container's deps, subscriptions and management client."""

    def __init__(self, deps: HarnessDeps, connections: Connections, management: Any) -> None:
        self.deps = deps
        self.connections = connections
        self.management = management

    def handle(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one WebSocket event (the status API Gateway expects)."""
        route = route_of(event)
        if route.route_key == "$disconnect":
            self.connections.disconnect(route.connection_id)
            return {"statusCode": 200}
        if route.route_key == "$connect":
            return {"statusCode": 200}
        try:
            self._message(route)
        except _Gone:
            # Nothing is left behind: its subscription (if one was recorded) is dropped too.
            self.connections.disconnect(route.connection_id)
        return {"statusCode": 200}

    def _send(self, connection: str, body: bytes) -> None:
        """Post one message; `_Gone` when the client has left (it closed during the answer)."""
        try:
            self.management.post_to_connection(ConnectionId=connection, Data=body)
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code == "GoneException":
                raise _Gone from None
            raise

    def _message(self, route: Route) -> None:
        conn = route.connection_id
        if not route.user_id:
            self._send(conn, error("unauthenticated", "the connection has no authorized user"))
            return
        if len(route.body.encode("utf-8", "replace")) > MAX_MESSAGE_BYTES:
            self._send(
                conn,
                error("message_too_large", f"a message is at most {MAX_MESSAGE_BYTES} bytes"),
            )
            return
        try:
            raw = json.loads(route.body)
        except ValueError:
            self._send(conn, error("invalid_json", "the message is not JSON"))
            return
        except RecursionError:
            # A few KB of brackets exhaust the parser's stack: refused like any bad frame.
            self._send(conn, error("invalid_json", "the message nests too deeply"))
            return
        action = raw.get("action") if isinstance(raw, dict) else None
        if route.route_key != "subscribe" or action != "subscribe":
            self._send(
                conn,
                error("unknown_action", 'the only message is {"action": "subscribe", ...}'),
            )
            return
        try:
            wanted = Subscribe.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "message"
            self._send(conn, error("invalid_message", f"{where}: {first['msg']}"))
            return
        self._subscribe(route, wanted)

    def _subscribe(self, route: Route, wanted: Subscribe) -> None:
        from turnkeep.events import CursorError, TurnNotFound, turn_values

        conn, sid, op = route.connection_id, wanted.session_id, wanted.turn_id
        envelope = self.deps.envelopes.get_for_owner(route.user_id, sid)
        if envelope is None:
            self._send(conn, error("not_found", "session not found"))
            return
        # Recorded and marked together before the catch-up is read: a step that reads the mark
        # after finds the subscription, and one that read it before has its next envelope commit
        # cancelled by the mark (turnkeep.live.marks), so what commits after the read is pushed.
        try:
            cursor = TurnCursor.parse(wanted.cursor)
        except CursorError as exc:
            self._send(conn, error("invalid_message", str(exc)))
            return
        if not self.connections.subscribe_marked(sid, op, conn, route.user_id, cursor.seq):
            self._send(conn, error("not_found", "session not found"))  # deleted meanwhile
            return
        deps = self.deps
        first = True
        storage = deps.open_storage(sid)
        try:
            # The turn's record, state and first entry in one read, then the streaming round's
            # frames scope with the head that may prove it unwritten (docs/aws-storage.md).
            values = turn_values(op)
            storage.prefetch(values, entries=[user_entry_id(op)])
            state = load_state(storage, op) if values else None
            if state is not None:
                storage.prefetch(scopes=[frames_scope(response_id(op, state.round))], head=True)
            while True:
                try:
                    page = self._page(storage, envelope, op, cursor, route.user_id)
                except TurnNotFound:
                    self._forget(sid, op, conn)
                    self._send(conn, error("not_found", "turn not found"))
                    return
                if first:
                    self._send(conn, message("status", {"turn_id": op, "status": page.status}))
                    first = False
                for item in page.events:
                    self._send(conn, event_message(item))
                cursor = TurnCursor.parse(page.next_cursor)
                if page.finished:
                    record = load_record(storage, op)
                    dumped = record.model_dump(mode="json") if record is not None else {}
                    self._send(conn, end_message(op, dumped))
                    self._forget(sid, op, conn)
                    return
                if len(page.events) < PAGE:
                    return
        finally:
            storage.close()

    def _page(
        self, storage: Storage, envelope: Envelope, op_id: str, cursor: TurnCursor, user_id: str
    ) -> EventsPage:
        """The turn's catch-up after `cursor`, its sub-agents' child turns' events nested in."""
        from turnkeep.events import nested_turn_events
        from turnkeep.harness.subagents import deps_for_session

        deps = self.deps

        @contextmanager
        def open_child(session_id: str) -> Iterator[tuple[Storage, Envelope | None] | None]:
            child = deps.envelopes.get(session_id)
            if child is None or child.owner_id != user_id:
                yield None
                return
            handle = deps.open_storage(session_id)
            try:
                yield handle, child
            finally:
                handle.close()

        agent = deps_for_session(deps, storage.session_id).agent
        merged = nested_turn_events(
            storage, envelope, op_id, cursor, PAGE, agent=agent, open_child=open_child
        )
        return merged.page

    def _forget(self, session_id: str, op_id: str, connection: str) -> None:
        """Drop the subscription and the mark of a turn that ended (or never was): no step of
        it runs any more to read either."""
        self.connections.unsubscribe(session_id, op_id, connection)
        self.connections.unmark(session_id, op_id)


class _Gone(Exception):
    """The connection is gone (API Gateway's `GoneException`): stop answering it."""
