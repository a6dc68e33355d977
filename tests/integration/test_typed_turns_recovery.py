"""Typed turns recover like any turn: a model step delivered again after its round settled
returns the decision it made (finish, another round, fail), never a second validation; a turn
resumed after a crash ends with the object; a turn's own output schema is recorded with it, so
the resumed turn keeps it (docs/agent.md, "Typed results"; docs/harness.md, "Recovery")."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from tests.integration.turns_support import (
    USER,
    RecordingProvider,
    SimulatedCrash,
    make_turn_harness,
)
from turnkeep import Agent
from turnkeep.harness import (
    FinishTurnInput,
    ModelStepInput,
    StartTurnInput,
    finish_turn,
    model_step,
    resume_turn,
    start_turn,
)

VALID = 'call final_result {"label": "bug", "confidence": 0.9}'
INVALID = 'call final_result {"label": "question"}'
COUNT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class Verdict(BaseModel):
    label: Literal["bug", "feature"]
    confidence: float


def _start(h: object, op: str, text: str, schema: dict[str, object] | None = None) -> None:
    start_turn(
        h.deps,  # type: ignore[attr-defined]
        StartTurnInput(
            session_id=h.session_id,  # type: ignore[attr-defined]
            op_id=op,
            user_id=USER,
            text=text,
            output_schema=schema,
        ),
    )


@pytest.mark.parametrize(
    ("script", "retries", "expected"),
    [
        (VALID, 2, ("finish", [], None)),
        (INVALID, 2, ("model", [], None)),
        (INVALID, 0, ("fail", [], "output_invalid")),
    ],
)
def test_a_redelivered_model_step_returns_the_typed_decision_it_made(
    tmp_path: Path, script: str, retries: int, expected: tuple[str, list[str], str | None]
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = Agent(output_type=Verdict, output_retries=retries)
    _start(h, "op-typed", script)
    step = ModelStepInput(session_id=h.session_id, op_id="op-typed", round=0)

    first = model_step(h.deps, step)
    again = model_step(h.deps, step)

    assert again == first
    code = first.error.split(":", 1)[0] if first.error else None
    assert (first.next, first.call_ids, code) == expected
    assert len(h.provider.requests) == 1  # the redelivery did not ask the model again


def test_a_typed_turn_crashed_mid_stream_resumes_and_ends_with_the_object(
    tmp_path: Path,
) -> None:
    provider = RecordingProvider(crash_after={0: 2})
    h = make_turn_harness(tmp_path, provider=provider)
    h.deps.agent = Agent(output_type=Verdict)
    _start(h, "op-crash", VALID)

    with pytest.raises(SimulatedCrash):
        model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id="op-crash", round=0))
    result = resume_turn(h.deps, h.session_id, "op-crash")

    assert result.status == "completed", result.error
    assert result.output == {"label": "bug", "confidence": 0.9}


def test_a_turns_own_schema_is_recorded_and_the_resumed_turn_keeps_it(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = Agent(turn_settings=["output_schema"])
    _start(h, "op-own", 'call final_result {"n": "x"}\nthen\ncall final_result {"n": 4}', COUNT)
    out = model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id="op-own", round=0))
    assert out.next == "model"

    h.deps.agent = Agent(turn_settings=["output_schema"])  # a new process: a fresh definition
    out = model_step(h.deps, ModelStepInput(session_id=h.session_id, op_id="op-own", round=1))
    result = finish_turn(h.deps, FinishTurnInput(session_id=h.session_id, op_id="op-own"))

    assert out.next == "finish"
    assert result.output == {"n": 4}
