"""A tool call runs once even when two deliveries of its step overlap (docs/harness.md, "Tool
calls"): the claim is a compare-and-set on the call state, a concurrent duplicate waits for the
holder's result, and a holder that died is taken over once its lease is over."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.integration.turns_support import SimulatedCrash, make_turn_harness
from turnkeep.harness import (
    HarnessLimits,
    ModelStepInput,
    StartTurnInput,
    ToolStepInput,
    model_step,
    resume_turn,
    start_turn,
    tool_step,
)
from turnkeep.harness.errors import CallLeaseExpiredError
from turnkeep.providers.base import ToolResultPart, check_transcript
from turnkeep.tools.base import Tool, ToolContext, ToolResult

USER = "user-1"


class NoArgs(BaseModel):
    pass


def _slow_tool(
    *, seconds: float, replay_safe: bool = False, crash_first: bool = False
) -> tuple[Tool[NoArgs], list[int]]:
    runs: list[int] = []
    lock = threading.Lock()

    def handler(_args: NoArgs, _ctx: ToolContext) -> ToolResult:
        with lock:
            runs.append(1)
            number = len(runs)
        if crash_first and number == 1:
            raise SimulatedCrash
        time.sleep(seconds)
        return ToolResult(f"run {number}")

    return Tool("job", "a slow job", NoArgs, handler, replay_safe=replay_safe), runs


def _first_call(h, op: str) -> str:  # type: ignore[no-untyped-def]
    start_turn(
        h.deps, StartTurnInput(session_id=h.session_id, op_id=op, user_id=USER, text="call job {}")
    )
    out = model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=0))
    return str(out.call_ids[0])


def _deliver(h, op: str, call_id: str):  # type: ignore[no-untyped-def]
    return tool_step(h.deps, ToolStepInput(session_id=h.session_id, op_id=op, call_id=call_id))


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_two_overlapping_deliveries_of_one_tool_call_run_the_tool_once(
    tmp_path: Path, backend: str
) -> None:
    tool, runs = _slow_tool(seconds=0.4)
    limits = HarnessLimits(frame_interval_ms=0, tool_lease_seconds=60)
    h = make_turn_harness(tmp_path, backend, tools=[tool], limits=limits)
    call_id = _first_call(h, "op-overlap")

    with ThreadPoolExecutor(max_workers=2) as pool:
        outputs = list(pool.map(lambda _: _deliver(h, "op-overlap", call_id), range(2)))

    assert runs == [1]
    assert [o.status for o in outputs] == ["done", "done"]
    assert outputs[0] == outputs[1]
    result = resume_turn(h.deps, h.session_id, "op-overlap")
    assert result.status == "completed"
    messages = h.transcript()
    check_transcript(messages)
    results = [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert [r.content for r in results] == ["run 1"]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_delivery_that_died_holding_a_call_is_waited_out_then_taken_over(
    tmp_path: Path, backend: str
) -> None:
    tool, runs = _slow_tool(seconds=0, replay_safe=True, crash_first=True)
    limits = HarnessLimits(frame_interval_ms=0, tool_lease_seconds=0.3)
    h = make_turn_harness(tmp_path, backend, tools=[tool], limits=limits)
    call_id = _first_call(h, "op-died")
    with pytest.raises(SimulatedCrash):
        _deliver(h, "op-died", call_id)

    # Within the lease the call may still run elsewhere: the retry waits, then asks to be retried.
    with pytest.raises(CallLeaseExpiredError):
        _deliver(h, "op-died", call_id)
    assert runs == [1]
    h.clock.advance(1)  # the lease is over: the holder is gone
    taken_over = _deliver(h, "op-died", call_id)

    assert taken_over.status == "done"
    assert taken_over.replayed
    assert runs == [1, 1]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_without_a_lease_a_started_call_is_taken_over_at_once(tmp_path: Path, backend: str) -> None:
    tool, runs = _slow_tool(seconds=0, replay_safe=False, crash_first=True)
    h = make_turn_harness(tmp_path, backend, tools=[tool])  # lease 0: deliveries never overlap
    call_id = _first_call(h, "op-local")
    with pytest.raises(SimulatedCrash):
        _deliver(h, "op-local", call_id)

    outcome = _deliver(h, "op-local", call_id)

    assert outcome.interrupted
    assert runs == [1]
