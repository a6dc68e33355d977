"""`GET /sessions/{id}/turns/{turn}/stream`: a turn's events as Server-Sent Events.

The wire contract is docs/api.md, "Event stream". Catch-up comes from storage (the events
page, seq > cursor), then the stream waits on the in-process hub (`turnkeep.api.hub`): a
commit notice makes it read the new events (one read per commit, never per delta), a live
delta is written at once. Only where the process runs the turns (`turnkeep serve`); the
Lambda host answers 501 (an HTTP API cannot stream a response).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from turnkeep.api.context import ApiContext, Ctx, SessionId, TurnId, User
from turnkeep.api.errors import ApiError, not_found
from turnkeep.api.hub import LiveHub, Watch
from turnkeep.api.models import Event, EventsPage, error_responses
from turnkeep.api.sessions import Cursor
from turnkeep.events import TurnNotFound, turn_events, turn_values, turn_view
from turnkeep.harness.live import Committed, LiveDelta
from turnkeep.harness.state import user_entry_id

logger = logging.getLogger("turnkeep.api")

router = APIRouter(prefix="/sessions/{session_id}/turns", tags=["turns"])

PAGE = 500
"""Events read from storage at a time."""


@router.get(
    "/{turn_id}/stream",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"text/event-stream": {}},
            "description": "the turn's events as Server-Sent Events (docs/api.md)",
        },
        **error_responses(400, 401, 404, 405, 422, 501, 503),
    },
)
async def stream(
    *,
    ctx: Ctx,
    user: User,
    session_id: SessionId,
    turn_id: TurnId,
    cursor: Cursor = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    """Catch-up after `cursor` (or `Last-Event-ID`), then live events until the turn ends."""
    hub = ctx.runtime.deps.live
    if not isinstance(hub, LiveHub):
        raise ApiError(
            501,
            "stream_unavailable",
            "this deployment cannot stream a response over HTTP: subscribe to the turn on the "
            "WebSocket API, or poll GET /sessions/{id}/turns/{turn}/events",
        )
    start = cursor if cursor is not None else _last_event_id(last_event_id)
    turn = _Turn(ctx, user, session_id, turn_id)
    # Watch first, then read: nothing committed after the read can be missed.
    watch = hub.watch(session_id, turn_id, asyncio.get_running_loop())
    try:
        first = await run_in_threadpool(turn.page, start)
    except BaseException:
        hub.unwatch(watch)
        raise
    return StreamingResponse(
        _events(turn, hub, watch, first),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _last_event_id(header: str | None) -> int | None:
    if header is None or header == "":
        return None
    if not header.isascii() or not header.isdigit() or len(header) > 19:
        raise ApiError(
            422,
            "validation_error",
            "Last-Event-ID: must be an event id (a non-negative integer)",
            field="Last-Event-ID",
        )
    return int(header)


@dataclass(frozen=True, slots=True)
class _Turn:
    """The streamed turn and who watches it (every read checks ownership, as every route)."""

    ctx: ApiContext
    user: str
    session_id: str
    turn_id: str

    def page(self, after: int | None) -> EventsPage:
        """The turn's events after `after` (404 when the session or turn is not the user's)."""
        with self.ctx.storage(self.session_id) as storage:
            envelope = self.ctx.owned_ahead(
                self.user,
                storage,
                values=turn_values(self.turn_id),
                entries=[user_entry_id(self.turn_id)],
            )
            try:
                return turn_events(storage, envelope, self.turn_id, after, PAGE)
            except TurnNotFound:
                raise not_found("turn") from None

    def end(self) -> dict[str, Any]:
        """The `end` event's data: the turn's outcome."""
        with self.ctx.storage(self.session_id) as storage:
            envelope = self.ctx.owned_ahead(self.user, storage, values=turn_values(self.turn_id))
            view = turn_view(storage, envelope, self.turn_id).model_dump(mode="json")
        keys = ("turn_id", "status", "error", "error_code", "rounds", "usage", "output")
        return {key: view[key] for key in keys}


def sse(kind: str, data: object, event_id: int | None = None) -> str:
    """One Server-Sent Event (`data` as one line of JSON)."""
    head = f"event: {kind}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return f"{head}data: {json.dumps(data, separators=(',', ':'), ensure_ascii=False)}\n\n"


def event_data(event: Event) -> dict[str, Any]:
    """An event as the events page shows it."""
    return event.model_dump(mode="json", exclude_none=True)


async def _events(turn: _Turn, hub: LiveHub, watch: Watch, page: EventsPage) -> AsyncIterator[str]:
    settings = turn.ctx.settings
    turn_id = turn.turn_id
    # The status first (a turn waiting for an approval says so at once), then each change.
    status: str = page.status
    settled: set[str] = set()  # responses whose entry was sent: their deltas are stale
    held: list[LiveDelta | Committed] = []  # queued behind a commit whose events come first
    last_sent = time.monotonic()
    try:
        yield sse("status", {"turn_id": turn_id, "status": status})
        while True:
            while True:  # everything storage holds after the cursor
                for event in page.events:
                    if event.kind == "entry" and event.entry_id is not None:
                        settled.add(event.entry_id)
                    yield sse(event.kind, event_data(event), event.seq)
                if page.status != status:
                    status = page.status
                    yield sse("status", {"turn_id": turn_id, "status": status})
                if page.finished:
                    end = await run_in_threadpool(turn.end)
                    yield sse("end", end)
                    return
                last_sent = time.monotonic()
                if len(page.events) < PAGE:
                    break
                page = await run_in_threadpool(turn.page, page.next_cursor)
            read = False
            # Without a commit notice for a while, read anyway: another process may drive it.
            poll_at = time.monotonic() + settings.stream_poll_seconds
            while not read:
                now = time.monotonic()
                ping_at = last_sent + settings.stream_heartbeat_seconds
                if now >= ping_at:
                    yield ": ping\n\n"
                    last_sent = now
                    continue
                if held:
                    items, held = held, []
                else:
                    if now >= poll_at:
                        break
                    try:
                        message = await asyncio.wait_for(
                            watch.queue.get(), timeout=min(poll_at, ping_at) - now
                        )
                    except TimeoutError:
                        continue
                    items = [message, *_drain(watch)]
                for index, item in enumerate(items):
                    if isinstance(item, Committed):
                        # Events follow cause: what the commit made visible (a tool's result)
                        # is read and sent before any delta queued behind it (the reply).
                        read = True
                        held = items[index + 1 :]
                        break
                    if item.response_id not in settled:
                        yield sse("delta", _delta(item))
                        last_sent = time.monotonic()
            page = await run_in_threadpool(turn.page, page.next_cursor)
    except ApiError as exc:
        # The session went away (deleted) while streaming: say so and end.
        yield sse("error", {"code": exc.code, "message": exc.message})
    except Exception:
        logger.exception("the stream of turn %s failed", turn.turn_id)
        yield sse(
            "error",
            {"code": "unavailable", "message": "the stream failed; resume with the last id"},
        )
    finally:
        hub.unwatch(watch)


def _drain(watch: Watch) -> list[LiveDelta | Committed]:
    items: list[LiveDelta | Committed] = []
    while not watch.queue.empty():
        items.append(watch.queue.get_nowait())
    return items


def _delta(delta: LiveDelta) -> dict[str, Any]:
    return {"response_id": delta.response_id, "offset": delta.offset, "text": delta.text}
