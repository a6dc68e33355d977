"""The local event stream keeps events in causal order: a live delta queued behind a commit
notice is sent after the events that commit made visible, never before them."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from turnkeep.api.hub import LiveHub
from turnkeep.api.stream import _events
from turnkeep.events import Event, EventsPage, MergedPage, TurnCursor
from turnkeep.harness.live import Committed, LiveDelta


def _page(status: str, events: list[Event], cursor: int, *, finished: bool = False) -> EventsPage:
    return EventsPage(
        turn_id="op", status=status, events=events, next_cursor=cursor, finished=finished
    )


class _Turn:
    """The streamed turn as `_events` reads it: its pages in order, then its end."""

    def __init__(self, pages: list[EventsPage]) -> None:
        self.turn_id = "op"
        self.ctx = SimpleNamespace(
            settings=SimpleNamespace(stream_poll_seconds=30.0, stream_heartbeat_seconds=30.0)
        )
        self.pages = pages

    def page(self, after: TurnCursor) -> MergedPage:
        return MergedPage(page=self.pages.pop(0), calls=[])

    def end(self) -> dict[str, Any]:
        return {"turn_id": "op", "status": "completed"}


def test_a_delta_queued_behind_a_commit_is_sent_after_the_events_of_that_commit() -> None:
    tool_result = Event(seq=7, kind="entry", entry_id="op:r0:results", role="tool", parts=[])
    turn = _Turn(
        [
            _page("running", [tool_result], 7),
            _page("completed", [], 7, finished=True),
        ]
    )

    async def run() -> list[str]:
        hub = LiveHub()
        watch = hub.watch("s", "op", asyncio.get_running_loop())
        # The tool results' commit, then the first piece of the reply that reads them, both
        # queued before the stream task runs (the step thread outran it).
        watch.queue.put_nowait(Committed("s", "op"))
        watch.queue.put_nowait(LiveDelta("op:r1", 0, "Tool echo returned"))
        watch.queue.put_nowait(Committed("s", "op"))
        sent = []
        async for chunk in _events(
            turn,  # type: ignore[arg-type]
            hub,
            watch,
            MergedPage(page=_page("running", [], 6), calls=[]),
            TurnCursor(seq=6),
        ):
            sent.append(chunk.split("\n", 1)[0])
        return sent

    sent = asyncio.run(run())

    kinds = [line for line in sent if line.startswith("event:")]
    assert kinds == ["event: status", "event: entry", "event: delta", "event: status", "event: end"]
