"""`ToolContext` and its session state: a parameter annotated `ToolContext` (any name, sync or
async) is left out of the schema and gets the call's ids, the agent's deps (an object, or a
factory called once per process) and `state`, whose writes are JSON, capped, and end with
the call."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator

import pytest

from tests.support import pantry_tools as pantry
from turnkeep import Agent, ToolContext, tool
from turnkeep.tools.context import resolve_deps
from turnkeep.tools.isolation import InProcessRunner, ProcessPoolRunner
from turnkeep.tools.registry import ToolRegistry
from turnkeep.tools.state import (
    MAX_SESSION_BYTES,
    MAX_VALUE_BYTES,
    MAX_WRITES_PER_CALL,
    ToolState,
    ToolStateError,
)


def _ctx(state: ToolState | None = None, deps: object = None) -> ToolContext:
    return ToolContext("s-1", "u-1", "op-1", "call-1", state=state or ToolState(), deps_source=deps)


def test_a_context_parameter_of_any_name_is_left_out_of_the_schema() -> None:
    assert set(pantry.put_away.spec().input_schema["properties"]) == {"item", "qty"}
    assert set(pantry.check_stock.spec().input_schema["properties"]) == {"item"}
    assert pantry.whoami.spec().input_schema.get("properties", {}) == {}
    assert pantry.put_away.uses_context
    assert not tool(lambda_free_add).uses_context


def lambda_free_add(a: int, b: int = 2) -> int:
    return a + b


def test_sync_and_async_tools_share_the_calls_state() -> None:
    registry = ToolRegistry([pantry.put_away, pantry.check_stock])
    ctx = _ctx()

    registry.run_call("put_away", '{"item": "rice", "qty": 2}', ctx, InProcessRunner())
    result = registry.run_call("check_stock", '{"item": "rice"}', ctx, InProcessRunner())

    assert result.content == "rice: qty 2"
    assert ctx.state.changes() == ({"stock": {"rice": 2}}, frozenset())


def test_the_context_carries_the_ids_and_the_agents_deps() -> None:
    ctx = _ctx(deps={"shop": "kiosk", "pid": 1})
    result = ToolRegistry([pantry.whoami]).run_call("whoami", "{}", ctx)

    seen = json.loads(result.content)
    assert (seen["session_id"], seen["user_id"], seen["turn_id"], seen["call_id"]) == (
        "s-1",
        "u-1",
        "op-1",
        "call-1",
    )
    assert seen["shop"] == "kiosk"


def test_a_deps_factory_is_called_once_per_process_even_from_threads() -> None:
    calls: list[int] = []

    def factory() -> dict[str, int]:
        calls.append(1)
        return {"n": len(calls)}

    seen: list[object] = []
    threads = [
        threading.Thread(target=lambda: seen.append(_ctx(deps=factory).deps)) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert calls == [1]
    assert all(item is seen[0] for item in seen)
    assert resolve_deps({"plain": 1}) == {"plain": 1}  # an object is the deps itself
    assert Agent(deps=factory).deps is factory


def test_state_get_returns_a_copy_and_the_default() -> None:
    state = ToolState({"stock": {"rice": 1}})
    got = state.get("stock")
    assert isinstance(got, dict)
    got["rice"] = 99

    assert state.get("stock") == {"rice": 1}
    assert state.get("nothing", 7) == 7
    state.set("nothing", None)  # null is a value, not a delete
    assert state.get("nothing", 7) is None
    state.delete("stock")
    assert state.keys() == ["nothing"]
    assert state.changes() == ({"nothing": None}, frozenset({"stock"}))


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda s: s.set("k", "x" * MAX_VALUE_BYTES), f"over the limit of {MAX_VALUE_BYTES}"),
        (lambda s: s.set("k", {1, 2}), "the value is not JSON (set"),
        (lambda s: s.set("k", float("nan")), "the value is not JSON"),
        (lambda s: s.set("", 1), "state key '' is invalid"),
        (lambda s: s.delete("x" * 201), "is invalid: use a string of 1-200 characters"),
    ],
    ids=["value-cap", "not-json", "nan", "empty-key", "long-key"],
)
def test_a_write_that_cannot_be_kept_is_a_clear_error(write: object, message: str) -> None:
    state = ToolState({})
    with pytest.raises(ToolStateError, match=re.escape(message)):
        write(state)  # type: ignore[operator]
    assert state.changes() == ({}, frozenset())


def test_the_session_cap_counts_every_key_and_a_rewrite_replaces_its_old_size() -> None:
    chunk = "x" * (MAX_VALUE_BYTES - 100)
    state = ToolState({f"k{i:02}": chunk for i in range(MAX_SESSION_BYTES // MAX_VALUE_BYTES)})
    state.set("k00", chunk)  # the same size again: still fits

    with pytest.raises(ToolStateError, match="bytes per session; delete keys"):
        state.set("extra", "y" * 2000)
    state.delete("k01")
    state.set("extra", "y" * 2000)  # room again
    assert state.get("extra") == "y" * 2000


def test_one_call_changes_at_most_its_share_of_keys() -> None:
    state = ToolState({})
    for i in range(MAX_WRITES_PER_CALL):
        state.set(f"k{i}", i)
    state.set("k0", "again")  # a key already changed does not count twice

    with pytest.raises(ToolStateError, match=f"at most {MAX_WRITES_PER_CALL} keys"):
        state.set("one-more", 1)


def test_a_cap_error_is_the_function_tools_error_result() -> None:
    result = ToolRegistry([pantry.hoard]).run_call("hoard", '{"kib": 20}', _ctx())

    assert result.is_error
    assert result.content.startswith("Error: tool hoard failed: ToolStateError: state.set('note')")
    assert f"over the limit of {MAX_VALUE_BYTES} bytes per value" in result.content


def test_a_call_stopped_at_its_limit_keeps_no_state_writes() -> None:
    release = threading.Event()

    @tool(timeout_seconds=0.2, isolation="in_process")
    def slow_writer(ctx: ToolContext) -> str:
        ctx.state.set("early", 1)
        release.wait(5)
        try:
            ctx.state.set("late", 2)
        except ToolStateError as exc:
            late.append(str(exc))
        return "done"

    late: list[str] = []
    ctx = _ctx()
    result = ToolRegistry([slow_writer]).run_call("slow_writer", "{}", ctx, InProcessRunner())
    release.set()

    assert result.is_error
    assert ctx.state.changes() == ({}, frozenset())
    for _ in range(100):
        if late:
            break
        threading.Event().wait(0.02)
    assert late
    assert "its state writes are no longer kept" in late[0]


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolRunner]:
    runner = ProcessPoolRunner(workers=1, timeout_seconds=30)
    yield runner
    runner.close()


def test_a_worker_process_gets_the_state_back_to_the_parent_and_builds_its_own_deps(
    pool: ProcessPoolRunner,
) -> None:
    ctx = _ctx(ToolState({"stock": {"rice": 1}}), deps=pantry.pantry_deps)
    registry = ToolRegistry([pantry.put_away, pantry.whoami])

    put = registry.run_call("put_away", '{"item": "rice", "qty": 2}', ctx, pool)
    who = json.loads(registry.run_call("whoami", "{}", ctx, pool).content)

    assert put.content == "put away 2 rice"
    assert ctx.state.changes() == ({"stock": {"rice": 3}}, frozenset())  # absorbed here
    assert who["pid"] != os.getpid()
    assert who["deps_pid"] == who["pid"]  # the worker called the factory itself


def test_deps_that_cannot_be_pickled_fail_only_the_tool_that_reads_them(
    pool: ProcessPoolRunner,
) -> None:
    ctx = _ctx(deps={"lock": threading.Lock()})
    registry = ToolRegistry([pantry.put_away, pantry.whoami])

    put = registry.run_call("put_away", '{"item": "oats", "qty": 1}', ctx, pool)
    who = registry.run_call("whoami", "{}", ctx, pool)

    assert (put.content, put.is_error) == ("put away 1 oats", False)
    assert who.is_error
    assert who.content.startswith("Error: tool whoami failed: DepsUnavailableError: the agent's")
    assert "give Agent(deps=...) a module-level factory function instead" in who.content
