"""The in-process hub of `turnkeep serve`: steps publish, event streams watch.

The local orchestrator runs the steps on threads of the server process; each step hands the
hub its live text and its commits (`turnkeep.harness.live.LiveSink`), and the hub wakes the
asyncio tasks streaming that turn (`GET .../stream`), which then read the new events from
storage once per commit, never per delta.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from contextlib import suppress

from turnkeep.harness.live import Committed, LiveDelta

logger = logging.getLogger(__name__)

MAX_QUEUED = 10_000
"""Messages a watcher may have unread before later deltas are dropped (a stalled client; the
frames and entries it reads from storage still carry every character)."""

HubMessage = LiveDelta | Committed


class Watch:
    """One watcher's inbox, filled by step threads, read by one asyncio task."""

    def __init__(self, key: tuple[str, str], loop: asyncio.AbstractEventLoop) -> None:
        self.key = key
        self.keys: set[tuple[str, str]] = {key}
        """Every turn it watches: `key`, and the child turns `LiveHub.watch_also` added."""
        self.queue: asyncio.Queue[HubMessage] = asyncio.Queue()
        self._loop = loop
        self.joined: set[str] = set()
        """Responses this watch had a delta of (its first one carries the text so far)."""

    def put(self, message: HubMessage) -> None:
        """Hand `message` to the watcher's task (from any thread)."""
        if isinstance(message, LiveDelta) and self.queue.qsize() >= MAX_QUEUED:
            return
        with suppress(RuntimeError):  # the watcher's loop is closed: the stream is gone
            self._loop.call_soon_threadsafe(self.queue.put_nowait, message)


class LiveHub:
    """Routes each turn's live messages to the watches of that turn (a `LiveSink`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: dict[tuple[str, str], set[Watch]] = {}

    def watch(self, session_id: str, op_id: str, loop: asyncio.AbstractEventLoop) -> Watch:
        """A new watch of turn `op_id`; `unwatch` it when the stream ends."""
        watch = Watch((session_id, op_id), loop)
        with self._lock:
            self._watches.setdefault(watch.key, set()).add(watch)
        return watch

    def watch_also(self, watch: Watch, session_id: str, op_id: str) -> bool:
        """Deliver turn `op_id`'s messages to `watch` too (a sub-agent's child turn of the
        watched turn: docs/api.md, "Sub-agent events"); False when it already did."""
        key = (session_id, op_id)
        with self._lock:
            if key in watch.keys:
                return False
            watch.keys.add(key)
            self._watches.setdefault(key, set()).add(watch)
        return True

    def unwatch(self, watch: Watch) -> None:
        """Stop delivering to `watch`."""
        with self._lock:
            for key in watch.keys:
                watches = self._watches.get(key)
                if watches is not None:
                    watches.discard(watch)
                    if not watches:
                        del self._watches[key]

    def watchers(self, session_id: str, op_id: str) -> int:
        """How many streams watch turn `op_id` now."""
        with self._lock:
            return len(self._watches.get((session_id, op_id), ()))

    def delta(
        self, session_id: str, op_id: str, delta: LiveDelta, so_far: Callable[[], str]
    ) -> None:
        """Hand a text piece to the turn's watches; a watch's first piece of a response is
        its whole text so far (from offset 0), so a stream that joined mid-reply, after the
        last persisted frame, has no hole."""
        with self._lock:
            watches = list(self._watches.get((session_id, op_id), ()))
        whole: LiveDelta | None = None
        for watch in watches:
            if delta.response_id in watch.joined:
                watch.put(delta)
                continue
            watch.joined.add(delta.response_id)
            if whole is None:
                whole = LiveDelta(delta.response_id, 0, so_far())
            watch.put(whole)

    def committed(self, event: Committed) -> None:
        """Wake the turn's watches: storage holds new events."""
        self._send((event.session_id, event.op_id), event)

    def drain(self) -> None:
        """Nothing is queued here: the watches' own tasks read their inboxes."""

    def _send(self, key: tuple[str, str], message: HubMessage) -> None:
        with self._lock:
            watches = list(self._watches.get(key, ()))
        for watch in watches:
            watch.put(message)
