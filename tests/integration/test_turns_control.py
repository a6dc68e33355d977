"""Caps and control: one running turn, cancel, deadline wrap-up, max steps, envelope status."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.integration.turns_support import USER, RecordingProvider, make_turn_harness
from turnkeep.harness import (
    FailTurnInput,
    HarnessLimits,
    ModelStepInput,
    StartTurnInput,
    ToolStepInput,
    TurnConflictError,
    cancel_turn,
    fail_turn,
    model_step,
    resume_turn,
    run_turn,
    start_turn,
    tool_step,
)
from turnkeep.harness.state import load_record, load_state
from turnkeep.providers.base import (
    Message,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamEvent,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    ToolCallStart,
    ToolResultPart,
    Usage,
    check_transcript,
)
from turnkeep.system_prompt import resolve_system
from turnkeep.tools.base import Tool, ToolContext, ToolResult

TWO_ROUNDS = 'call echo {"text": "a"}\ncall echo {"text": "b"}\nthen\ncall echo {"text": "c"}'


def _start(h, op: str, text: str) -> None:  # type: ignore[no-untyped-def]
    start_turn(h.deps, StartTurnInput(session_id=h.session_id, op_id=op, user_id=USER, text=text))


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_second_turn_while_one_runs_is_rejected_with_turn_conflict(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    _start(h, "op-one", "hello")

    with pytest.raises(TurnConflictError) as info:
        _start(h, "op-two", "hello again")
    resume_turn(h.deps, h.session_id, "op-one")
    after = run_turn(h.deps, h.session_id, USER, "now it may start", op_id="op-three")

    assert info.value.running_op == "op-one"
    assert info.value.status == "running"
    with h.storage() as storage:
        assert load_state(storage, "op-two") is None
        assert load_record(storage, "op-two") is None
    assert after.status == "completed"
    assert [m.text for m in h.transcript() if m.role == "user"] == ["hello", "now it may start"]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_cancel_makes_the_next_step_abort_answer_every_call_and_retire_the_scope(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    op = "op-cancel"
    _start(h, op, TWO_ROUNDS)
    out = model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=0))

    cancelled = cancel_turn(h.deps, h.session_id)
    status_while_cancelling = h.meta()["turnStatus"]
    skipped = tool_step(
        h.deps, ToolStepInput(session_id=h.session_id, op_id=op, call_id=out.call_ids[0])
    )
    aborted = model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=1))

    assert cancelled.status == "cancelling"
    assert status_while_cancelling == "cancelling"
    assert skipped.status == "skipped"
    assert aborted.next == "done"
    assert aborted.status == "aborted"
    assert h.meta()["turnStatus"] == "aborted"
    messages = h.transcript()
    check_transcript(messages)  # both calls have (cancelled) results
    results = [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert len(results) == 2
    assert all(p.is_error and "cancelled" in p.content for p in results)
    assert len(h.provider.requests) == 1
    assert h.scope_residue(op) == 0
    with h.storage() as storage:
        record = load_record(storage, op)
    assert record is not None
    assert record.status == "aborted"


def test_cancelling_a_finished_turn_reports_its_status_and_changes_nothing(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    run_turn(h.deps, h.session_id, USER, "hello", op_id="op-done")

    result = cancel_turn(h.deps, h.session_id, "op-done")

    assert result.status == "completed"
    assert h.meta()["turnStatus"] == "completed"


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_the_deadline_gives_one_tools_off_wrap_up_round_then_finishes(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend, limits=HarnessLimits(wall_clock_seconds=10))
    op = "op-deadline"
    _start(h, op, TWO_ROUNDS)
    out = model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=0))
    for call_id in out.call_ids:
        tool_step(h.deps, ToolStepInput(session_id=h.session_id, op_id=op, call_id=call_id))
    h.clock.advance(11)

    wrap = model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=1))
    result = resume_turn(h.deps, h.session_id, op)

    assert wrap.wrap_up
    assert wrap.next == "finish"
    assert wrap.call_ids == []
    assert h.provider.requests[0].tools != ()
    assert h.provider.requests[1].tools == ()  # tools off for the wrap-up round
    assert len(h.provider.requests) == 2  # exactly one wrap-up round
    assert result.status == "completed"
    messages = h.transcript()
    check_transcript(messages)
    assert messages[-1].text.startswith("Wrapping up: tools are off")
    assert "Tool echo returned: a" in messages[-1].text


def test_max_steps_fails_the_turn_with_every_call_answered(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path, limits=HarnessLimits(max_steps=1, frame_interval_ms=0))

    result = run_turn(h.deps, h.session_id, USER, TWO_ROUNDS, op_id="op-steps")

    assert result.status == "failed"
    assert result.error is not None
    assert result.error.startswith("max_steps_exceeded")
    assert h.meta()["turnStatus"] == "failed"
    assert h.meta()["turnError"] == result.error
    messages = h.transcript()
    check_transcript(messages)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool"]
    assert h.scope_residue("op-steps") == 0


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_turn_status_usage_and_stream_cursor_are_kept_in_the_envelope(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    op = "op-env"
    _start(h, op, TWO_ROUNDS)
    started = h.meta()
    model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=0))
    after_round = h.meta()

    result = resume_turn(h.deps, h.session_id, op)
    final = h.meta()

    assert started["turnStatus"] == "running"
    assert started["turnRunId"] == op
    assert started["turnStartedAt"] == int(h.clock.now * 1000)
    assert after_round["turnStatus"] == "running"
    assert after_round["turnStreamCursor"] > started["turnStreamCursor"]
    assert json.loads(after_round["usage"])["output_tokens"] > 0
    assert final["turnStatus"] == "completed"
    assert final["turnStreamCursor"] > after_round["turnStreamCursor"]
    assert json.loads(final["usage"]) == asdict(result.usage)
    assert "turnError" not in final


def test_fail_turn_from_a_catch_records_the_error_and_is_idempotent(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path)
    _start(h, "op-catch", "hello")
    inp = FailTurnInput(session_id=h.session_id, op_id="op-catch", error="States.Timeout")

    first = fail_turn(h.deps, inp)
    second = fail_turn(h.deps, inp)

    assert first == second
    assert first.status == "failed"
    assert h.meta()["turnError"] == "States.Timeout"
    assert [m.role for m in h.transcript()] == ["user"]


def test_a_note_written_in_round_k_is_in_the_system_prompt_of_round_k_plus_1(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)

    run_turn(h.deps, h.session_id, USER, "remember the cat is called Miso")

    round0, round1 = h.provider.requests
    assert "the cat is called Miso" not in round0.system
    assert "the cat is called Miso" in round1.system
    # The fold is the one `resolve_system` builds (the same on the Step Functions path).
    assert round0.system == resolve_system(h.deps.default_system)
    assert round1.system == resolve_system(h.deps.default_system, notes="the cat is called Miso")


def test_invalid_tool_arguments_reach_the_model_as_a_tool_error(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path)

    result = run_turn(h.deps, h.session_id, USER, 'call calculator {"expression": 5}')

    assert result.status == "completed"
    results = [p for m in h.transcript() for p in m.parts if isinstance(p, ToolResultPart)]
    assert results[0].is_error
    assert results[0].content.startswith("Error: invalid arguments for calculator: expression")
    assert h.transcript()[-1].text.startswith("Tool calculator failed: Error: invalid arguments")


def test_after_a_turn_cancelled_before_any_reply_the_next_command_still_works(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    _start(h, "op-cut", "hello")
    cancel_turn(h.deps, h.session_id)
    aborted = resume_turn(h.deps, h.session_id, "op-cut")

    noted = run_turn(h.deps, h.session_id, USER, "remember the door code is 1234")

    assert aborted.status == "aborted"
    assert noted.status == "completed"
    assert h.envelopes.get(h.session_id).working_notes == "the door code is 1234"  # type: ignore[union-attr]
    assert h.transcript()[-1].text == "Noted."


@dataclass
class _ManyCalls(ModelProvider):
    """Round 0: `count` echo calls with long ids; afterwards a plain reply."""

    count: int
    name: str = "many-calls"

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        if request.messages[-1].role == "user":
            calls = tuple(
                ToolCallPart(f"call-{i:04d}-" + "x" * 60, "echo", '{"text": "hi"}')
                for i in range(self.count)
            )
            yield ResponseDone(ModelResponse(Message("assistant", calls), "tool_use"))
        else:
            yield ResponseDone(ModelResponse(Message("assistant", (TextPart("done"),)), "end_turn"))


def test_a_round_with_too_many_tool_calls_runs_the_first_ones_and_answers_the_rest(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(
        tmp_path,
        provider=RecordingProvider(inner=_ManyCalls(3000)),
        limits=HarnessLimits(frame_interval_ms=0, max_tool_calls_per_round=8),
    )
    _start(h, "op-many", "go")

    out = model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id="op-many", round=0))
    again = model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id="op-many", round=0))
    result = resume_turn(h.deps, h.session_id, "op-many")

    assert len(out.model_dump_json()) < 4096  # a Step Functions payload stays small
    assert len(out.call_ids) == 8
    assert again == out
    assert result.status == "completed"
    messages = h.transcript()
    check_transcript(messages)  # every one of the 3000 calls has a result
    results = [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert len(results) == 3000
    assert [p.content for p in results[:8]] == ["hi"] * 8
    assert all(p.is_error and "limit is 8" in p.content for p in results[8:])


def test_every_round_folds_persona_notes_and_skills_from_the_envelope(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path)
    h.envelopes.put_host_meta(
        h.session_id,
        USER,
        {"personaSnapshot": "You are terse.", "attachedSkills": json.dumps(["Skill: haiku"])},
    )

    run_turn(h.deps, h.session_id, USER, "remember the sky is blue")

    round0, round1 = h.provider.requests
    assert round0.system == resolve_system(
        h.deps.default_system, persona="You are terse.", skills=["Skill: haiku"]
    )
    assert round1.system == resolve_system(
        h.deps.default_system,
        persona="You are terse.",
        notes="the sky is blue",
        skills=["Skill: haiku"],
    )


@dataclass
class _SameIdTwice(ModelProvider):
    """Answers with two tool calls that share one id (a provider bug)."""

    name: str = "same-id"

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        calls = tuple(ToolCallPart("dup", "echo", '{"text": "x"}') for _ in range(2))
        yield ResponseDone(ModelResponse(Message("assistant", calls), "tool_use"))


def test_duplicate_tool_call_ids_fail_the_turn_naming_the_id_and_leave_no_open_call(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path, provider=RecordingProvider(inner=_SameIdTwice()))

    result = run_turn(h.deps, h.session_id, USER, "go", op_id="op-dup-ids")

    assert result.status == "failed"
    assert result.error == "model error: duplicate tool call ids ['dup']"
    check_transcript(h.transcript())
    assert h.scope_residue("op-dup-ids") == 0


class _CallsEvenWhenToolsAreOff(ModelProvider):
    """A model that makes a tool call in every round, tools offered or not (some do)."""

    name = "stubborn"

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        number = sum(1 for m in request.messages if m.role == "assistant")
        call = ToolCallPart(f"call-{number}", "echo", '{"text": "again"}')
        yield ToolCallStart(0, call.id, call.name)
        yield ToolCallDelta(0, call.arguments)
        yield ResponseDone(
            ModelResponse(Message("assistant", (call,)), "tool_use", Usage(1, 1), "stubborn")
        )


def test_tool_calls_made_in_the_wrap_up_round_are_answered_and_the_next_turn_still_runs(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(
        tmp_path,
        provider=_CallsEvenWhenToolsAreOff(),
        limits=HarnessLimits(wall_clock_seconds=10, frame_interval_ms=0),
    )
    op = "op-stubborn"
    _start(h, op, "go")
    out = model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id=op, round=0))
    for call_id in out.call_ids:
        tool_step(h.deps, ToolStepInput(session_id=h.session_id, op_id=op, call_id=call_id))
    h.clock.advance(11)

    result = resume_turn(h.deps, h.session_id, op)

    assert result.status == "completed"
    check_transcript(h.transcript())  # the wrap-up's call got an explicit result
    assert h.scope_residue(op) == 0
    h.clock.advance(1)
    follow_up = run_turn(h.deps, h.session_id, USER, "and now?", op_id="op-after")
    # The stubborn model never stops calling: the next turn runs until its step cap, which it
    # could not if the wrap-up's call had been left without a result (TranscriptError).
    assert follow_up.status == "failed"
    assert follow_up.error is not None
    assert follow_up.error.startswith("max_steps_exceeded")
    check_transcript(h.transcript())


STALE = HarnessLimits(wall_clock_seconds=300, stale_turn_seconds=3600, frame_interval_ms=0)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_turn_nobody_drove_past_its_deadline_and_the_stale_grace_is_ended_by_the_next_start(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend, limits=STALE)
    _start(h, "op-lost", 'call echo {"text": "never runs"}')
    model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id="op-lost", round=0))
    h.clock.advance(300 + 3600 + 1)  # its orchestrator is gone: no step ran since

    _start(h, "op-next", "hello again")

    with h.storage() as storage:
        lost = load_record(storage, "op-lost")
    assert lost is not None
    assert lost.status == "failed"
    assert lost.error is not None
    assert lost.error.startswith("abandoned:")
    assert h.scope_residue("op-lost") == 0
    assert h.meta()["turnRunId"] == "op-next"
    assert h.meta()["turnStatus"] == "running"
    result = resume_turn(h.deps, h.session_id, "op-next")
    assert result.status == "completed"
    check_transcript(h.transcript())  # the lost turn's pending call got an explicit result


def test_a_turn_past_its_deadline_but_within_the_stale_grace_still_blocks_a_new_start(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path, limits=STALE)
    _start(h, "op-slow", "hello")
    h.clock.advance(300 + 3600 - 1)

    with pytest.raises(TurnConflictError):
        _start(h, "op-next", "hello again")
    with h.storage() as storage:
        assert load_state(storage, "op-slow") is not None  # untouched


def test_a_claim_whose_first_commit_never_landed_is_taken_over_once_stale(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path, limits=STALE)
    h.envelopes.update_worker_meta(
        h.session_id,
        {
            "turnStatus": "running",
            "turnRunId": "op-ghost",
            "turnStartedAt": int(h.clock() * 1000),
        },
    )
    with pytest.raises(TurnConflictError):
        _start(h, "op-early", "too soon")
    h.clock.advance(300 + 3600 + 1)

    _start(h, "op-next", "hello")

    assert h.meta()["turnRunId"] == "op-next"
    with h.storage() as storage:
        ghost = load_record(storage, "op-ghost")
    assert ghost is not None
    assert ghost.status == "failed"


class _NoArgs(BaseModel):
    pass


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_the_tool_calls_of_one_round_run_in_parallel(tmp_path: Path, backend: str) -> None:
    # Both calls must be inside the tool at the same time to pass the barrier; run one after
    # the other, the first would wait alone until the barrier times out and breaks.
    barrier = threading.Barrier(2, timeout=10)

    def meet(_args: _NoArgs, _ctx: ToolContext) -> ToolResult:
        barrier.wait()
        return ToolResult("met")

    tool = Tool("meet", "waits for the other call of its round", _NoArgs, meet)
    h = make_turn_harness(tmp_path, backend, tools=[tool])

    result = run_turn(h.deps, h.session_id, USER, "call meet {}\ncall meet {}", op_id="op-par")

    assert result.status == "completed"
    results = [p for m in h.transcript() for p in m.parts if isinstance(p, ToolResultPart)]
    assert [(r.content, r.is_error) for r in results] == [("met", False), ("met", False)]
