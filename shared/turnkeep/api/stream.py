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
from turnkeep.api.errors import ApiError
from turnkeep.api.hub import LiveHub, Watch
from turnkeep.api.models import Event, error_responses
from turnkeep.api.turn_pages import TurnCursorQuery, merged_page, parse_cursor
from turnkeep.events import CursorError, MergedPage, NestedCall, TurnCursor, turn_values, turn_view
from turnkeep.harness.live import Committed, LiveDelta

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
    cursor: TurnCursorQuery = None,
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
    start = parse_cursor(cursor) if cursor is not None else _last_event_id(last_event_id)
    turn = _Turn(ctx, user, session_id, turn_id)
    # Watch first, then read: nothing committed after the read can be missed.
    watch = hub.watch(session_id, turn_id, asyncio.get_running_loop())
    try:
        first = await run_in_threadpool(turn.page, start)
    except BaseException:
        hub.unwatch(watch)
        raise
    return StreamingResponse(
        _events(turn, hub, watch, first, start),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _last_event_id(header: str | None) -> TurnCursor:
    if header is None or header == "":
        return TurnCursor()
    try:
        return TurnCursor.parse(header)
    except CursorError:
        raise ApiError(
            422,
            "validation_error",
            "Last-Event-ID: must be an event id (a non-negative integer, or one with the "
            "child turns' places: `<seq>:<child>=<seq>,...`)",
            field="Last-Event-ID",
        ) from None


@dataclass(frozen=True, slots=True)
class _Turn:
    """The streamed turn and who watches it (every read checks ownership, as every route)."""

    ctx: ApiContext
    user: str
    session_id: str
    turn_id: str

    def page(self, after: TurnCursor) -> MergedPage:
        """The turn's events after `after`, its child turns' merged in (404 when the session
        or turn is not the user's)."""
        return merged_page(
            self.ctx, self.user, self.session_id, self.turn_id, cursor=after, limit=PAGE
        )

    def end(self) -> dict[str, Any]:
        """The `end` event's data: the turn's outcome."""
        with self.ctx.storage(self.session_id) as storage:
            envelope = self.ctx.owned_ahead(self.user, storage, values=turn_values(self.turn_id))
            view = turn_view(storage, envelope, self.turn_id).model_dump(mode="json")
        keys = ("turn_id", "status", "error", "error_code", "rounds", "usage", "output")
        return {key: view[key] for key in keys}


def sse(kind: str, data: object, event_id: int | str | None = None) -> str:
    """One Server-Sent Event (`data` as one line of JSON)."""
    head = f"event: {kind}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return f"{head}data: {json.dumps(data, separators=(',', ':'), ensure_ascii=False)}\n\n"


def event_data(event: Event) -> dict[str, Any]:
    """An event as the events page shows it."""
    return event.model_dump(mode="json", exclude_none=True)


async def _events(
    turn: _Turn, hub: LiveHub, watch: Watch, merged: MergedPage, start: TurnCursor
) -> AsyncIterator[str]:
    settings = turn.ctx.settings
    turn_id = turn.turn_id
    page = merged.page
    # The status first (a turn waiting for an approval says so at once), then each change.
    status: str = page.status
    settled: set[str] = set()  # responses whose entry was sent: their deltas are stale
    held: list[LiveDelta | Committed] = []  # queued behind a commit whose events come first
    chains: dict[str, list[NestedCall]] = {}  # child op id -> the calls it runs under
    position = start  # what the page in hand was read after
    last_sent = time.monotonic()
    try:
        yield sse("status", {"turn_id": turn_id, "status": status})
        while True:
            while True:  # everything storage holds after the cursor
                at = _position_before(merged, position)
                for event in page.events:
                    if event.kind == "entry" and event.entry_id is not None:
                        settled.add(event.entry_id)
                    at = at.after(event)
                    yield sse(event.kind, event_data(event), at.token())
                if page.status != status:
                    status = page.status
                    yield sse("status", {"turn_id": turn_id, "status": status})
                if page.finished:
                    end = await run_in_threadpool(turn.end)
                    yield sse("end", end)
                    return
                last_sent = time.monotonic()
                position = TurnCursor.parse(page.next_cursor)
                # A child turn found now is watched from now on; what it committed before the
                # watch began is read at once rather than at the next poll.
                if not _watch_children(hub, watch, merged, chains) and len(page.events) < PAGE:
                    break
                merged = await run_in_threadpool(turn.page, position)
                page = merged.page
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
                        yield sse("delta", _delta(item, chains))
                        last_sent = time.monotonic()
            merged = await run_in_threadpool(turn.page, position)
            page = merged.page
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


def _position_before(merged: MergedPage, after: TurnCursor) -> TurnCursor:
    """The cursor the page was read after, kept to the child turns it still reads (each
    event's id is this moved past the events up to it)."""
    live = {chain[-1].op_id for chain in merged.calls}
    return TurnCursor(
        seq=after.seq,
        children=tuple(c for c in after.children if f"op-sub-{c[0]}" in live),
    )


def _watch_children(
    hub: LiveHub, watch: Watch, merged: MergedPage, chains: dict[str, list[NestedCall]]
) -> bool:
    """Watch the child turns the page read; True when one is new."""
    added = False
    for chain in merged.calls:
        chains[chain[-1].op_id] = chain
        added = hub.watch_also(watch, chain[-1].session_id, chain[-1].op_id) or added
    return added


def _drain(watch: Watch) -> list[LiveDelta | Committed]:
    items: list[LiveDelta | Committed] = []
    while not watch.queue.empty():
        items.append(watch.queue.get_nowait())
    return items


def _delta(delta: LiveDelta, chains: dict[str, list[NestedCall]]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "response_id": delta.response_id,
        "offset": delta.offset,
        "text": delta.text,
    }
    chain = chains.get(delta.response_id.rsplit(":r", 1)[0])
    if chain is not None:  # a child turn's reply: nested as its events are
        data["nested"] = [call.model_dump(mode="json") for call in chain]
    return data
