"""Typed turns: the model submits its result through `final_result` (the scripted model's
`call final_result {json}`), an invalid one goes back as a tool error naming each error up to
`output_retries`, then the turn fails `output_invalid`; the validated object is stored with the
turn record (docs/agent.md, "Typed results")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from tests.integration.turns_support import USER, make_turn_harness
from turnkeep import Agent, tool
from turnkeep.harness import HarnessLimits, run_turn
from turnkeep.harness.state import load_record
from turnkeep.providers.base import ToolResultPart


class Verdict(BaseModel):
    label: Literal["bug", "feature"]
    confidence: float


def _echo(text: str) -> str:
    """Echo the text."""
    return text


VALID = 'call final_result {"label": "bug", "confidence": 0.9}'
INVALID = 'call final_result {"label": "question"}'


def _results(h: object) -> list[ToolResultPart]:
    return [
        p
        for m in h.transcript()  # type: ignore[attr-defined]
        for p in m.parts
        if isinstance(p, ToolResultPart)
    ]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_valid_final_result_completes_the_turn_with_the_object_stored(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    h.deps.agent = Agent(output_type=Verdict)

    result = run_turn(h.deps, h.session_id, USER, VALID)

    assert result.status == "completed"
    assert result.output == {"label": "bug", "confidence": 0.9}
    with h.storage() as storage:
        record = load_record(storage, result.op_id)
    assert record is not None
    assert record.output == {"label": "bug", "confidence": 0.9}
    offered = {t.name: t for t in h.provider.requests[0].tools}
    assert offered["final_result"].input_schema == Verdict.model_json_schema()
    assert len(h.provider.requests) == 1  # the accepted result ends the turn: no more rounds


def test_an_invalid_result_goes_back_naming_each_error_and_a_corrected_one_completes(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = Agent(output_type=Verdict)

    result = run_turn(h.deps, h.session_id, USER, f"{INVALID}\nthen\n{VALID}")

    assert result.status == "completed"
    assert result.output == {"label": "bug", "confidence": 0.9}
    first = _results(h)[0]
    assert first.is_error
    assert "2 error(s)" in first.content
    assert "- label: " in first.content
    assert "- confidence: Field required" in first.content


def test_a_result_still_invalid_after_the_retries_fails_the_turn_output_invalid(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = Agent(output_type=Verdict, output_retries=1)

    result = run_turn(h.deps, h.session_id, USER, f"{INVALID}\nthen\n{INVALID}\nthen\n{VALID}")

    assert result.status == "failed"
    assert result.error_code == "output_invalid"
    assert result.error is not None
    assert "label: " in result.error
    assert result.output is None
    assert len(h.provider.requests) == 2  # the third (valid) submission never ran


def test_a_text_reply_in_a_typed_turn_forces_final_result_on_the_next_round(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = Agent(output_type=Verdict, output_retries=1)

    result = run_turn(h.deps, h.session_id, USER, "hello")

    assert result.status == "failed"
    assert result.error_code == "output_invalid"
    assert "without a final_result call" in (result.error or "")
    first, second = h.provider.requests
    assert first.settings is None or first.settings.tool_choice is None
    assert second.settings is not None
    assert second.settings.tool_choice == "final_result"


def test_a_text_turn_keeps_no_output_and_offers_no_final_result(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path)

    result = run_turn(h.deps, h.session_id, USER, "hello")

    assert result.status == "completed"
    assert result.output is None
    assert "final_result" not in {t.name for t in h.provider.requests[0].tools}


def test_the_example_readiness_agent_uses_its_tools_then_submits_a_readiness(
    tmp_path: Path,
) -> None:
    from turnkeep_agents.release_assistant.readiness import Readiness, agent

    h = make_turn_harness(tmp_path)
    h.deps.agent = agent
    verdict = {
        "version": "2.4.0",
        "ready": False,
        "blockers": [{"kind": "ticket", "ref": "REL-102", "reason": "in progress"}],
        "summary": "REL-102 is not done.",
    }
    script = (
        'call lookup_ticket {"ticket_id": "REL-102"}\n'
        'call check_ci {"branch": "main", "limit": 1}\n'
        f"then\ncall final_result {json.dumps(verdict)}"
    )

    result = run_turn(h.deps, h.session_id, USER, script)

    assert result.status == "completed", result.error
    assert Readiness.model_validate(result.output).blockers[0].ref == "REL-102"
    assert [r.is_error for r in _results(h)] == [False, False, False]


def test_the_last_allowed_round_is_forced_and_other_calls_there_fail_output_invalid(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path, limits=HarnessLimits(frame_interval_ms=0, max_steps=2))
    h.deps.agent = Agent(output_type=Verdict, tools=[tool(name="echo_text")(_echo)])
    script = 'call echo_text {"text": "a"}\nthen\ncall echo_text {"text": "b"}'

    result = run_turn(h.deps, h.session_id, USER, script)

    assert (result.status, result.error_code) == ("failed", "output_invalid")
    assert "no round is left" in (result.error or "")
    first, last = h.provider.requests
    assert first.settings is None or first.settings.tool_choice is None
    assert last.settings is not None
    assert last.settings.tool_choice == "final_result"
