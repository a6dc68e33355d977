"""Concurrent writers on one envelope: a host PUT racing a working-notes update loses nothing.

Each iteration starts two threads behind a barrier. On SQLite and DynamoDB each thread has its
own store handle (its own connection / its own requests), so the race is between independent
writers, as between the API Lambda and a step Lambda. A write that reports success must be
visible afterwards; the notes tool must never claim a save that did not happen.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conformance.envelope_backends import BACKEND_NAMES, EnvelopeBackend, envelope_backend
from tests.support.envelope_stores import TickingClock
from turnkeep.envelope import EnvelopeError
from turnkeep.notes import UPDATE_TOOL, working_notes_tools
from turnkeep.notes.tools import UpdateArgs
from turnkeep.tools.base import ToolContext, ToolResult

ITERATIONS = {"memory": 200, "sqlite": 150, "dynamodb": 100}
CTX = ToolContext(session_id="s1", user_id="alice", operation_id="op", call_id="c")


@pytest.fixture(params=BACKEND_NAMES)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EnvelopeBackend]:
    """Every envelope backend, with a clock whose readings are distinct and increasing."""
    with envelope_backend(request.param, tmp_path, clock=TickingClock()) as harness:
        yield harness


@pytest.fixture(autouse=True)
def _fine_grained_thread_switching() -> Iterator[None]:
    """Switch threads every 10 µs so writes interleave mid-call, not only at I/O."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def _race(first: Callable[[], None], second: Callable[[], None], swap: bool) -> list[BaseException]:
    """Run both behind a barrier; `swap` flips which thread starts first (and so wins it)."""
    if swap:
        first, second = second, first
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(fn: Callable[[], None]) -> None:
        barrier.wait()
        try:
            fn()
        except BaseException as exc:  # collected and asserted by the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_host_put_racing_a_notes_update_never_loses_either_write(
    stores: EnvelopeBackend,
) -> None:
    host_store, tool_store, reader = (
        stores.store(),
        stores.store(),
        stores.store(),
    )
    reader.create("s1", "alice", {"title": "t-start"})
    update = next(
        t for t in working_notes_tools(tool_store, "alice", "s1") if t.name == UPDATE_TOOL
    )
    both_applied = 0
    for i in range(ITERATIONS[stores.name]):
        outcome: dict[str, ToolResult] = {}
        host_ok = threading.Event()

        def host_put(i: int = i, done: threading.Event = host_ok) -> None:
            host_store.put_host_meta("s1", "alice", {"title": f"t{i}", "selectedModel": f"m{i}"})
            done.set()

        def note(i: int = i, out: dict[str, ToolResult] = outcome) -> None:
            out["notes"] = update.run(UpdateArgs(notes=f"finding {i}"), CTX)

        errors = _race(host_put, note, swap=i % 2 == 1)
        assert all(isinstance(e, EnvelopeError) for e in errors), errors
        got = reader.get("s1")
        assert got is not None
        if host_ok.is_set():
            assert (got.meta["title"], got.meta["selectedModel"]) == (f"t{i}", f"m{i}")
        notes_saved = not outcome["notes"].is_error
        if notes_saved:
            assert got.meta["workingNotes"] == f"finding {i}", outcome["notes"].content
        else:  # honest failure: the previous iteration's notes are still there
            assert got.meta.get("workingNotes") != f"finding {i}"
        both_applied += host_ok.is_set() and notes_saved
    # With two writers and one bounded retry, every iteration must apply both writes.
    assert both_applied == ITERATIONS[stores.name]


def test_harness_write_racing_a_notes_update_never_loses_either_write(
    stores: EnvelopeBackend,
) -> None:
    harness_store, tool_store, reader = (
        stores.store(),
        stores.store(),
        stores.store(),
    )
    reader.create("s1", "alice")
    update = next(
        t for t in working_notes_tools(tool_store, "alice", "s1") if t.name == UPDATE_TOOL
    )
    for i in range(ITERATIONS[stores.name] // 2):
        outcome: dict[str, ToolResult] = {}

        def step(i: int = i) -> None:
            harness_store.update_worker_meta("s1", {"turnStepCount": i, "turnRunId": f"op-{i}"})

        def note(i: int = i, out: dict[str, ToolResult] = outcome) -> None:
            out["notes"] = update.run(UpdateArgs(notes=f"finding {i}"), CTX)

        assert _race(step, note, swap=i % 2 == 1) == []
        got = reader.get("s1")
        assert got is not None
        assert not outcome["notes"].is_error, outcome["notes"].content
        assert got.meta == {
            "turnStepCount": i,
            "turnRunId": f"op-{i}",
            "workingNotes": f"finding {i}",
        }
