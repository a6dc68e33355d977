"""Tool calls in killable worker processes: a hung or CPU-bound tool is stopped at its limit
with a tool error, its worker replaced; tools declared in-process stay in the calling thread."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.turns_support import USER, make_turn_harness
from tests.support.slow_tools import BOOM, DIE, HANG, PID, PID_IN_PROCESS, SPIN, SpinArgs
from turnkeep.harness import run_turn
from turnkeep.tools.base import Tool, ToolContext, ToolResult
from turnkeep.tools.isolation import ProcessPoolRunner
from turnkeep.tools.registry import ToolRegistry

CTX = ToolContext("s", "u", "op", "c1", extras={"progress": object(), "replayed": False})
REGISTRY = ToolRegistry([SPIN, HANG, PID, PID_IN_PROCESS, DIE, BOOM])


@pytest.fixture(scope="module")
def runner() -> Iterator[ProcessPoolRunner]:
    pool = ProcessPoolRunner(workers=1, timeout_seconds=1.0)
    yield pool
    pool.close()


def _pid_of(runner: ProcessPoolRunner) -> int:
    result = REGISTRY.run_call("pid", "{}", CTX, runner)
    assert not result.is_error, result.content
    return int(result.content.split()[0])


def test_a_process_tool_runs_in_a_worker_with_only_the_portable_context(
    runner: ProcessPoolRunner,
) -> None:
    result = REGISTRY.run_call("pid", "{}", CTX, runner)

    pid, extras = result.content.split(" ", 1)
    assert int(pid) != os.getpid()
    assert extras == "['replayed']"  # the live `progress` object stays behind


def test_an_in_process_tool_runs_in_the_calling_process(runner: ProcessPoolRunner) -> None:
    result = REGISTRY.run_call("pid_here", "{}", CTX, runner)

    assert int(result.content.split()[0]) == os.getpid()


@pytest.mark.parametrize("name", ["spin", "hang"])
def test_a_call_past_its_limit_is_a_tool_error_and_the_worker_is_replaced(
    runner: ProcessPoolRunner, name: str
) -> None:
    before = _pid_of(runner)

    result = REGISTRY.run_call(name, '{"seconds": 60}', CTX, runner)

    assert result.is_error
    assert f"tool {name} did not finish within its limit of 1 s" in result.content
    after = _pid_of(runner)  # the pool still answers, from a new worker
    assert after != before


def test_a_tool_that_kills_its_worker_is_a_tool_error_and_the_pool_recovers(
    runner: ProcessPoolRunner,
) -> None:
    result = REGISTRY.run_call("die", "{}", CTX, runner)

    assert result.is_error
    assert "exit code 3" in result.content
    assert _pid_of(runner) != os.getpid()


def test_a_tool_exception_in_a_worker_reaches_the_model_as_text(runner: ProcessPoolRunner) -> None:
    result = REGISTRY.run_call("boom", "{}", CTX, runner)

    assert result == ToolResult("Error: tool boom failed: RuntimeError: tool bug", True)


def test_a_handler_that_cannot_be_pickled_gets_a_clear_error(runner: ProcessPoolRunner) -> None:
    local = Tool("local", "x", SpinArgs, lambda _a, _c: ToolResult("never"))

    result = ToolRegistry([local]).run_call("local", "{}", CTX, runner)

    assert result.is_error
    assert "cannot run in a worker process" in result.content
    assert "isolation='in_process'" in result.content


def test_a_hung_tool_in_a_turn_ends_with_a_tool_error_and_the_turn_completes(
    tmp_path: Path, runner: ProcessPoolRunner
) -> None:
    h = make_turn_harness(tmp_path, "sqlite", tools=[HANG])
    h.deps.tool_runner = runner

    result = run_turn(h.deps, h.session_id, USER, 'call hang {"seconds": 60}')

    assert result.status == "completed"
    transcript = " ".join(str(m) for m in h.transcript())
    assert "did not finish within its limit" in transcript


def test_a_closed_runner_refuses_calls_with_a_tool_error() -> None:
    pool = ProcessPoolRunner(workers=1, timeout_seconds=1.0)
    pool.close()

    result = REGISTRY.run_call("pid", "{}", CTX, pool)

    assert result.is_error
    assert "server is stopping" in result.content
