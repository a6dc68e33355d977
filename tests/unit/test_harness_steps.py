"""Step contracts: small JSON payloads, typed errors on bad input, start-turn idempotency."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from turnkeep.envelope import open_envelope_store
from turnkeep.harness import (
    HarnessDeps,
    ModelStepInput,
    ModelStepOutput,
    OperationNotFoundError,
    SessionNotFoundError,
    StartTurnInput,
    StepInputError,
    ToolStepInput,
    model_step,
    run_turn,
    start_turn,
    tool_step,
)
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import open_storage


def _deps() -> tuple[HarnessDeps, str]:
    url = f"memory://{uuid.uuid4().hex}"
    envelopes = open_envelope_store(f"memory://{uuid.uuid4().hex}")
    envelopes.create("s1", "u1")
    deps = HarnessDeps(
        open_storage=lambda sid: open_storage(url, sid),
        envelopes=envelopes,
        provider=ScriptedProvider(),
    )
    return deps, url


def test_step_outputs_stay_small_however_long_the_reply() -> None:
    deps, _ = _deps()
    start_turn(deps, StartTurnInput(session_id="s1", op_id="op1", user_id="u1", text="x" * 100_000))

    out = model_step(deps, ModelStepInput(session_id="s1", op_id="op1", round=0))

    payload = out.model_dump_json()
    assert len(payload) < 1024
    assert ModelStepOutput.model_validate_json(payload) == out


def test_model_step_output_lists_the_call_ids_of_the_round() -> None:
    deps, _ = _deps()
    text = 'call echo {"text": "a"}\ncall echo {"text": "b"}'
    start_turn(deps, StartTurnInput(session_id="s1", op_id="op1", user_id="u1", text=text))

    out = model_step(deps, ModelStepInput(session_id="s1", op_id="op1", round=0))

    assert out.next == "tools"
    assert out.call_ids == ["call_u1_r0_0", "call_u1_r0_1"]
    assert out.next_round == 1


def test_start_turn_delivered_twice_records_one_user_message() -> None:
    deps, url = _deps()
    inp = StartTurnInput(session_id="s1", op_id="op1", user_id="u1", text="hi")

    first = start_turn(deps, inp)
    second = start_turn(deps, inp)

    assert first == second
    with open_storage(url, "s1") as storage:
        assert storage.get_stats().entry_count == 1


def test_start_turn_without_a_session_envelope_is_a_typed_error() -> None:
    deps, _ = _deps()

    with pytest.raises(SessionNotFoundError, match="'nosuch'"):
        start_turn(deps, StartTurnInput(session_id="nosuch", op_id="op1", user_id="u1", text="x"))


@pytest.mark.parametrize("op_id", ["has/slash", "-leading", "with space"])
def test_malformed_operation_ids_are_rejected_naming_the_id(op_id: str) -> None:
    deps, _ = _deps()

    with pytest.raises(StepInputError, match="operation id"):
        start_turn(deps, StartTurnInput(session_id="s1", op_id=op_id, user_id="u1", text="x"))


def test_empty_user_text_is_rejected_by_the_input_model() -> None:
    with pytest.raises(ValidationError, match="text"):
        StartTurnInput(session_id="s1", op_id="op1", user_id="u1", text="")


def test_steps_for_an_unknown_operation_raise_operation_not_found() -> None:
    deps, _ = _deps()

    with pytest.raises(OperationNotFoundError):
        model_step(deps, ModelStepInput(session_id="s1", op_id="ghost", round=0))
    with pytest.raises(OperationNotFoundError):
        tool_step(deps, ToolStepInput(session_id="s1", op_id="ghost", call_id="c"))


def test_a_model_step_ahead_of_the_operation_is_rejected() -> None:
    deps, _ = _deps()
    start_turn(deps, StartTurnInput(session_id="s1", op_id="op1", user_id="u1", text="hi"))

    with pytest.raises(StepInputError, match="at model round 0, not 3"):
        model_step(deps, ModelStepInput(session_id="s1", op_id="op1", round=3))


def test_a_tool_step_for_a_call_the_model_never_made_is_rejected() -> None:
    deps, _ = _deps()
    start_turn(deps, StartTurnInput(session_id="s1", op_id="op1", user_id="u1", text="hi"))

    with pytest.raises(StepInputError, match="no tool call 'made-up'"):
        tool_step(deps, ToolStepInput(session_id="s1", op_id="op1", call_id="made-up"))


def test_the_working_notes_tools_and_read_tool_result_are_always_on() -> None:
    deps, _ = _deps()
    deps.tools = lambda _s, _u: []

    names = deps.registry("s1", "u1").names

    assert names == [
        "working_notes_get",
        "working_notes_update",
        "working_notes_clear",
        "read_tool_result",
    ]


def test_run_turn_returns_a_completed_result_with_usage() -> None:
    deps, _ = _deps()

    result = run_turn(deps, "s1", "u1", "hello")

    assert result.status == "completed"
    assert result.rounds == 1
    assert result.usage.output_tokens > 0
    assert result.final_entry_id == f"{result.op_id}:r0"
