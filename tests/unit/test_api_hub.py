"""The local hub routes a turn's live messages to that turn's watches only; a watch's first
piece of a response is the response's whole text so far, so one that joined mid-reply has no
hole."""

from __future__ import annotations

import asyncio

from turnkeep.api.hub import LiveHub
from turnkeep.harness.live import Committed, LiveDelta

Message = LiveDelta | Committed


def _drain(queue: asyncio.Queue[Message]) -> list[Message]:
    items: list[Message] = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


def test_a_watch_that_joins_mid_reply_first_gets_the_whole_text_then_the_pieces() -> None:
    async def run() -> tuple[list[Message], list[Message], int, int]:
        hub = LiveHub()
        loop = asyncio.get_running_loop()
        early = hub.watch("s", "op", loop)
        other_turn = hub.watch("s", "op-other", loop)
        text = ["Hello "]
        hub.delta("s", "op", LiveDelta("op:r0", 0, "Hello "), lambda: "".join(text))
        late = hub.watch("s", "op", loop)
        text.append("world")
        hub.delta("s", "op", LiveDelta("op:r0", 6, "world"), lambda: "".join(text))
        hub.committed(Committed("s", "op"))
        await asyncio.sleep(0)  # let the thread-safe callbacks land
        got = (_drain(early.queue), _drain(late.queue), other_turn.queue.qsize())
        for watch in (early, late, other_turn):
            hub.unwatch(watch)
        return (*got, hub.watchers("s", "op"))

    early, late, other, left = asyncio.run(run())

    assert early == [
        LiveDelta("op:r0", 0, "Hello "),
        LiveDelta("op:r0", 6, "world"),
        Committed("s", "op"),
    ]
    assert late == [LiveDelta("op:r0", 0, "Hello world"), Committed("s", "op")]
    assert other == 0
    assert left == 0
