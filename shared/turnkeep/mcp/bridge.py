"""The bridge from turnkeep's synchronous steps to the `mcp` package's asynchronous client.

One private event loop per process runs on a daemon thread, started on first use. A caller
thread (a tool step, a model step building its registry, an API request checking an approval's
edit) submits a coroutine and waits on its own future, so a slow MCP server holds up only the
turn that waits for it: other sessions' steps in `turnkeep serve` run on their own threads, and
the loop serves every caller's MCP exchanges concurrently. Working from whatever thread the
caller is on (an event-loop thread included, where `anyio.run` would refuse) is why a private
loop is used rather than a new loop per call. A forked child starts a loop of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")

_GRACE_SECONDS = 5.0
"""How long past its own deadline a coroutine may take to unwind before the caller stops waiting."""

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid: int | None = None


def _running_loop() -> asyncio.AbstractEventLoop:
    import asyncio
    import os

    global _loop, _pid
    with _lock:
        if _loop is None or _pid != os.getpid() or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="turnkeep-mcp-loop", daemon=True
            )
            thread.start()
            _loop, _pid = loop, os.getpid()
        return _loop


def run(coroutine: Coroutine[Any, Any, T], deadline_seconds: float) -> T:
    """Run `coroutine` on the private loop and return its result (or raise its exception).

    The coroutine bounds itself (`deadline_seconds`, e.g. through `anyio.fail_after`); should it
    not unwind within a grace period after that, it is cancelled and TimeoutError raised here.
    """
    import asyncio

    future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, _running_loop())
    try:
        return future.result(timeout=deadline_seconds + _GRACE_SECONDS)
    except FutureTimeoutError:
        future.cancel()
        raise TimeoutError(f"no answer within {deadline_seconds:g} s") from None
