"""Recovery and idempotency: duplicate delivery, crashed rounds and tools, late writes, close."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.integration.turns_support import (
    USER,
    RecordingProvider,
    SimulatedCrash,
    StorageProxy,
    make_turn_harness,
)
from turnkeep.harness import (
    FailTurnInput,
    FencedWriteError,
    FinishTurnInput,
    HarnessLimits,
    ModelStepInput,
    StartTurnInput,
    ToolStepInput,
    fail_turn,
    finish_turn,
    model_step,
    resume_turn,
    run_turn,
    start_turn,
    tool_step,
)
from turnkeep.harness.progress import FrameWriter, ToolProgress, read_frames
from turnkeep.harness.recovery import INTERRUPTED_MARK
from turnkeep.harness.state import (
    frames_address,
    load_record,
    load_state,
    response_id,
    result_entry_id,
)
from turnkeep.providers.base import (
    RetryableModelError,
    TextDelta,
    ToolResultPart,
    check_transcript,
)
from turnkeep.storage import InsertEntry, Storage, Write
from turnkeep.tools.base import Tool, ToolContext, ToolResult

TWO_TOOLS = 'call calculator {"expression": "1+1"}\ncall echo {"text": "x"}'


def _start(h, op: str, text: str) -> None:  # type: ignore[no-untyped-def]
    start_turn(h.deps, StartTurnInput(session_id=h.session_id, op_id=op, user_id=USER, text=text))


def _mstep(h, op: str, round_: int):  # type: ignore[no-untyped-def]
    return model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=round_))


def _tstep(h, op: str, call_id: str):  # type: ignore[no-untyped-def]
    return tool_step(h.deps, ToolStepInput(session_id=h.session_id, op_id=op, call_id=call_id))


class NoArgs(BaseModel):
    pass


def _counting_tool(
    name: str, *, replay_safe: bool, crash_first: bool
) -> tuple[Tool[NoArgs], list[int]]:
    calls: list[int] = []

    def handler(_args: NoArgs, ctx: ToolContext) -> ToolResult:
        calls.append(1)
        progress = ctx.extras["progress"]
        seen = progress.checkpoint()
        progress.save_checkpoint({"attempt": len(calls)})
        if crash_first and len(calls) == 1:
            raise SimulatedCrash
        return ToolResult(f"ran {len(calls)} time(s), checkpoint before: {seen}")

    return Tool(name, f"{name} tool", NoArgs, handler, replay_safe=replay_safe), calls


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_every_step_delivered_twice_has_its_effects_once(tmp_path: Path, backend: str) -> None:
    h = make_turn_harness(tmp_path, backend)
    op = "op-dup"

    _start(h, op, TWO_TOOLS)
    _start(h, op, TWO_TOOLS)
    first = _mstep(h, op, 0)
    again = _mstep(h, op, 0)
    for call_id in first.call_ids:
        _tstep(h, op, call_id)
        _tstep(h, op, call_id)
    second = _mstep(h, op, 1)
    second_again = _mstep(h, op, 1)
    result = finish_turn(h.deps, FinishTurnInput(session_id=h.session_id, op_id=op))
    result_again = finish_turn(h.deps, FinishTurnInput(session_id=h.session_id, op_id=op))
    # Late redeliveries of earlier steps after the end change nothing either.
    late_tool = _tstep(h, op, first.call_ids[0])
    late_model = _mstep(h, op, 0)

    assert again == first
    assert first.next == "tools"
    assert len(first.call_ids) == 2
    assert second_again == second
    assert second.next == "finish"
    assert result_again == result
    assert result.status == "completed"
    assert late_tool.status == "skipped"
    assert late_model.next == "done"
    messages = h.transcript()
    check_transcript(messages)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert len(h.provider.requests) == 2  # the model ran once per round
    with h.storage() as storage:
        assert storage.get_stats().usage_rows == 2


def test_resuming_a_finished_turn_from_round_zero_adds_nothing(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path)
    from turnkeep.harness import run_turn

    result = run_turn(h.deps, h.session_id, USER, TWO_TOOLS, op_id="op-resume")
    before = h.transcript()

    again = resume_turn(h.deps, h.session_id, "op-resume")

    assert again == result
    assert h.transcript() == before


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_model_round_crashed_mid_stream_is_recorded_interrupted_and_the_turn_goes_on(
    tmp_path: Path, backend: str
) -> None:
    provider = RecordingProvider(crash_after={0: 2})  # dies after two text frames
    h = make_turn_harness(tmp_path, backend, provider=provider)
    op = "op-crash"
    _start(h, op, "tell me something long enough to stream in frames")

    with pytest.raises(SimulatedCrash):
        _mstep(h, op, 0)
    with h.storage() as storage:
        partial = read_frames(storage, op, response_id(op, 0))
    recovered = _mstep(h, op, 0)  # the redelivery finds the frames
    result = resume_turn(h.deps, h.session_id, op)

    assert partial is not None
    assert partial.response is None
    assert recovered.interrupted
    assert recovered.next == "model"
    assert recovered.next_round == 1
    assert result.status == "completed"
    messages = h.transcript()
    check_transcript(messages)
    assert [m.role for m in messages] == ["user", "assistant", "assistant"]
    assert messages[1].text == "You said: tell me \n" + INTERRUPTED_MARK
    assert messages[2].text.startswith("You said: tell me")
    # The model's next round sees what was interrupted, honestly marked.
    retry_request = h.provider.requests[1]
    assert [m.role for m in retry_request.messages] == ["user", "assistant"]
    assert retry_request.messages[1].text.endswith(INTERRUPTED_MARK)
    assert h.scope_residue(op) == 0


def test_a_model_that_keeps_crashing_fails_the_turn_honestly(tmp_path: Path) -> None:
    provider = RecordingProvider(
        crash_after=dict.fromkeys(range(10), 1),
        crash_with=lambda: RetryableModelError("connection dropped", code="dropped"),
    )
    h = make_turn_harness(
        tmp_path, provider=provider, limits=HarnessLimits(frame_interval_ms=0, model_retries=1)
    )
    from turnkeep.harness import run_turn

    result = run_turn(h.deps, h.session_id, USER, "hello", op_id="op-flaky")

    assert result.status == "failed"
    assert result.error is not None
    assert result.error.startswith("model_interrupted")
    messages = h.transcript()
    check_transcript(messages)
    assert messages[0].text == "hello"
    assert all(INTERRUPTED_MARK in m.text for m in messages[1:])
    assert h.meta()["turnStatus"] == "failed"
    assert h.scope_residue("op-flaky") == 0


def test_a_round_that_streamed_to_the_end_but_was_not_settled_is_settled_from_its_frames(
    tmp_path: Path,
) -> None:
    crashed: list[bool] = []

    def crash_on_settlement(writes: Sequence[Write]) -> None:
        settling = any(isinstance(w, InsertEntry) and w.id == "op-end:r0" for w in writes)
        if settling and not crashed:
            crashed.append(True)
            raise SimulatedCrash

    h = make_turn_harness(tmp_path, open_wrapper=lambda s: StorageProxy(s, crash_on_settlement))
    _start(h, "op-end", TWO_TOOLS)

    with pytest.raises(SimulatedCrash):
        _mstep(h, "op-end", 0)
    recovered = _mstep(h, "op-end", 0)

    assert crashed == [True]
    assert len(h.provider.requests) == 1  # not asked again: the frames held the whole response
    assert recovered.next == "tools"
    assert not recovered.interrupted
    assert len(recovered.call_ids) == 2
    assert [c.name for c in h.transcript()[-1].tool_calls] == ["calculator", "echo"]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_unknown_outcome_of_a_replay_safe_tool_runs_it_again_with_its_checkpoint(
    tmp_path: Path, backend: str
) -> None:
    tool, calls = _counting_tool("safe_job", replay_safe=True, crash_first=True)
    h = make_turn_harness(tmp_path, backend, tools=[tool])
    op = "op-safe"
    _start(h, op, "call safe_job {}")
    call_id = _mstep(h, op, 0).call_ids[0]

    with pytest.raises(SimulatedCrash):
        _tstep(h, op, call_id)
    replay = _tstep(h, op, call_id)
    result = resume_turn(h.deps, h.session_id, op)

    assert len(calls) == 2
    assert replay.replayed
    assert not replay.is_error
    assert result.status == "completed"
    tool_results = [p for m in h.transcript() for p in m.parts if isinstance(p, ToolResultPart)]
    assert tool_results[0].content == "ran 2 time(s), checkpoint before: {'attempt': 1}"
    assert h.scope_residue(op) == 0


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_unknown_outcome_of_an_unsafe_tool_is_recorded_as_an_interrupted_error(
    tmp_path: Path, backend: str
) -> None:
    tool, calls = _counting_tool("send_email", replay_safe=False, crash_first=True)
    h = make_turn_harness(tmp_path, backend, tools=[tool])
    op = "op-unsafe"
    _start(h, op, "call send_email {}")
    call_id = _mstep(h, op, 0).call_ids[0]

    with pytest.raises(SimulatedCrash):
        _tstep(h, op, call_id)
    outcome = _tstep(h, op, call_id)
    result = resume_turn(h.deps, h.session_id, op)

    assert len(calls) == 1
    assert outcome.interrupted
    assert outcome.is_error
    assert result.status == "completed"
    messages = h.transcript()
    check_transcript(messages)  # the call has exactly one result
    tool_results = [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert len(tool_results) == 1
    assert tool_results[0].is_error
    assert "not replay-safe" in tool_results[0].content
    assert "send_email failed" in messages[-1].text


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_progress_writes_after_the_terminal_commit_are_rejected_and_leave_no_scope(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    from turnkeep.harness import run_turn

    run_turn(h.deps, h.session_id, USER, "hello", op_id="op-late")
    with h.storage() as inner:
        proxy = StorageProxy(inner, lambda writes: None)
        storage: Storage = proxy  # type: ignore[assignment]
        writer = FrameWriter(storage, "op-late", response_id("op-late", 0), h.clock)
        writer.add(TextDelta("late frame"))
        with pytest.raises(FencedWriteError):
            writer.flush()
        progress = ToolProgress(storage, "op-late", "call-1")
        with pytest.raises(FencedWriteError):
            progress.save_checkpoint({"late": True})
        with pytest.raises(FencedWriteError):
            progress.save_memo("late memo")
        with pytest.raises(FencedWriteError):
            writer.add(TextDelta("after refusal"))  # the writer stays closed

    assert proxy.committed == []  # every late write was refused by the storage guard
    assert h.scope_residue("op-late") == 0


def test_a_progress_write_racing_the_terminal_commit_is_refused_atomically(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    op = "op-race"
    _start(h, op, "hello")
    raced: list[bool] = []

    def finish_first(writes: Sequence[Write]) -> None:
        # The terminal commit lands between the writer's fence check and its append.
        if not raced and not any(isinstance(w, InsertEntry) for w in writes):
            raced.append(True)
            finish_turn(h.deps, FinishTurnInput(session_id=h.session_id, op_id=op))

    with h.storage() as storage:
        proxy = StorageProxy(storage, finish_first)
        writer = FrameWriter(proxy, op, response_id(op, 0), h.clock)  # type: ignore[arg-type]
        writer.add(TextDelta("x"))
        with pytest.raises(FencedWriteError):
            writer.flush()

    assert raced == [True]
    assert proxy.committed == []  # the guarded append lost to the terminal commit: not written
    assert h.scope_residue(op) == 0
    with h.storage() as storage:
        record = load_record(storage, op)
    assert record is not None
    assert record.status == "completed"


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_close_and_faults_never_retire_the_scope(tmp_path: Path, backend: str) -> None:
    tool, _calls = _counting_tool("job", replay_safe=True, crash_first=True)
    provider = RecordingProvider(crash_after={1: 1})
    h = make_turn_harness(tmp_path, backend, tools=[tool], provider=provider)
    op = "op-keep"
    _start(h, op, "call job {}")
    call_id = _mstep(h, op, 0).call_ids[0]

    with pytest.raises(SimulatedCrash):
        _tstep(h, op, call_id)  # fault mid-tool: a checkpoint was written
    _tstep(h, op, call_id)
    with pytest.raises(SimulatedCrash):
        _mstep(h, op, 1)  # fault mid-stream: one frame was written

    with h.storage() as reopened:  # a fresh handle after every earlier one was closed
        assert load_state(reopened, op) is not None
        # The round-0 result was settled as an entry before round 1 streamed (causal order).
        assert reopened.get_entries([result_entry_id(op, 0, call_id)])
        frames = reopened.read_list(frames_address(op, response_id(op, 1)))
        assert len(frames) == 1
        assert ToolProgress(reopened, op, call_id).checkpoint() == {"attempt": 2}
    assert h.meta()["turnStatus"] == "running"
    # Only the terminal commit retires: ending the turn now removes all of it.
    resume_turn(h.deps, h.session_id, op)
    assert h.scope_residue(op) == 0


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_tool_step_delivered_twice_runs_the_tool_once_and_reports_the_same_outcome(
    tmp_path: Path, backend: str
) -> None:
    calls: list[int] = []

    def handler(_args: NoArgs, _ctx: ToolContext) -> ToolResult:
        calls.append(1)
        return ToolResult("card declined", is_error=True)

    charge = Tool("charge_card", "Charges a card.", NoArgs, handler, replay_safe=True)
    h = make_turn_harness(tmp_path, backend, tools=[charge])
    op = "op-charge"
    _start(h, op, "call charge_card {}")
    call_id = _mstep(h, op, 0).call_ids[0]

    first = _tstep(h, op, call_id)
    again = _tstep(h, op, call_id)
    _mstep(h, op, 1)  # settles the call as a result entry
    after_settlement = _tstep(h, op, call_id)

    assert calls == [1]
    assert first.is_error
    assert again == first
    assert after_settlement == first


def test_a_turn_that_crashed_between_claim_and_first_commit_can_be_failed_and_the_session_reused(
    tmp_path: Path,
) -> None:
    crashed: list[bool] = []

    def crash_on_start(writes: Sequence[Write]) -> None:
        if not crashed and any(isinstance(w, InsertEntry) for w in writes):
            crashed.append(True)
            raise SimulatedCrash  # the process dies after the envelope claim

    h = make_turn_harness(tmp_path, open_wrapper=lambda s: StorageProxy(s, crash_on_start))
    with pytest.raises(SimulatedCrash):
        _start(h, "op-lost", "hello")
    stuck = h.meta()["turnStatus"]

    failed = fail_turn(
        h.deps, FailTurnInput(session_id=h.session_id, op_id="op-lost", error="Lambda.Unknown")
    )
    failed_again = fail_turn(
        h.deps, FailTurnInput(session_id=h.session_id, op_id="op-lost", error="Lambda.Unknown")
    )
    after = run_turn(h.deps, h.session_id, USER, "hello again")

    assert stuck == "running"
    assert failed.status == "failed"
    assert failed.error == "Lambda.Unknown"
    assert failed_again == failed
    assert after.status == "completed"
    assert [m.text for m in h.transcript() if m.role == "user"] == ["hello again"]
