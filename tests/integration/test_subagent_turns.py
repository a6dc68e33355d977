"""Sub-agents run as child turns: the model calls one like a tool `{"input": "<task>"}`, the
child turn has its own session (transcript), op id and scope, and its final text is the call's
result; a crash mid-child resumes the same child turn; cancelling the parent cancels the child
(docs/agent.md, "Sub-agents")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.turns_support import (
    USER,
    Harness,
    RecordingProvider,
    SimulatedCrash,
    make_turn_harness,
)
from turnkeep import Agent, ToolContext, tool
from turnkeep.harness import cancel_turn, resume_turn, run_turn
from turnkeep.harness.state import load_head, load_record, load_state
from turnkeep.harness.subagents import PARENT_NS, child_ids
from turnkeep.harness.transcript import branch_messages
from turnkeep.providers.base import Message, ToolResultPart
from turnkeep.storage import open_storage, value


@tool(isolation="in_process")
def shout(text: str) -> str:
    """Say it louder.

    Args:
        text: What to say.
    """
    return text.upper()


WRITER = Agent(
    name="writer",
    instructions="You write changelogs.",
    tools=[shout],
)


def _triage(*subs: Agent) -> Agent:
    return Agent(name="triage", agents=list(subs or (WRITER,)))


def _call(name: str, task: str) -> str:
    return f"call {name} {json.dumps({'input': task})}"


def _child_transcript(h: Harness, op_id: str, call_id: str) -> list[Message]:
    session_id, _ = child_ids(h.session_id, op_id, call_id)
    with open_storage(h.storage_url, session_id) as storage:
        return branch_messages(storage, load_head(storage))


def _results(messages: list[Message]) -> list[ToolResultPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_sub_agent_call_runs_a_child_turn_whose_final_text_is_the_result(
    tmp_path: Path, backend: str
) -> None:
    h = make_turn_harness(tmp_path, backend)
    h.deps.agent = _triage()

    result = run_turn(
        h.deps, h.session_id, USER, _call("writer", 'call shout {"text": "v2 is out"}')
    )

    assert result.status == "completed"
    (parent_result,) = _results(h.transcript())
    assert parent_result.name == "writer"
    assert parent_result.content == "Tool shout returned: V2 IS OUT"
    assert not parent_result.is_error
    # The parent's transcript holds the call and its result only, not the child's messages.
    assert [m.role for m in h.transcript()] == ["user", "assistant", "tool", "assistant"]
    child = _child_transcript(h, result.op_id, parent_result.call_id)
    assert child[0].role == "user"
    assert child[0].text == 'call shout {"text": "v2 is out"}'  # the task, exactly
    assert [p.name for p in _results(child)] == ["shout"]
    child_session, child_op = child_ids(h.session_id, result.op_id, parent_result.call_id)
    assert child_op != result.op_id
    with open_storage(h.storage_url, child_session) as storage:
        record = load_record(storage, child_op)
        assert record is not None
        assert record.status == "completed"
        assert load_state(storage, child_op) is None  # retired at its end
        link = storage.get_value(value(PARENT_NS, "link"))
        assert link is not None
        assert link.value["parent_op_id"] == result.op_id
    envelope = h.envelopes.get(child_session)
    assert envelope is not None
    assert envelope.owner_id == USER
    assert envelope.meta.get("turnStatus") == "completed"


def test_a_sub_agent_uses_its_own_instructions_and_tools_not_the_parents(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = _triage()

    run_turn(h.deps, h.session_id, USER, _call("writer", "hello"))

    parent_request, child_request = h.provider.requests[0], h.provider.requests[1]
    assert "writer" in [t.name for t in parent_request.tools]
    assert "shout" not in [t.name for t in parent_request.tools]
    assert "shout" in [t.name for t in child_request.tools]
    assert "writer" not in [t.name for t in child_request.tools]
    assert child_request.system.startswith("You write changelogs.")


def test_a_sub_agent_called_with_an_empty_task_is_a_tool_error_and_no_child_turn(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = _triage()

    result = run_turn(h.deps, h.session_id, USER, 'call writer {"input": ""}')

    (part,) = _results(h.transcript())
    assert part.is_error
    assert "input" in part.content
    assert result.status == "completed"
    assert len(h.provider.requests) == 2  # the parent's two rounds, no child round


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_crash_mid_child_resumes_the_same_child_turn(tmp_path: Path, backend: str) -> None:
    # Request 0: the parent's round 0; request 1: the child's round 0, which dies mid-stream.
    provider = RecordingProvider(crash_after={1: 1})
    h = make_turn_harness(tmp_path, backend, provider=provider)
    h.deps.agent = _triage()
    op = "op-parent-1"

    with pytest.raises(SimulatedCrash):
        run_turn(h.deps, h.session_id, USER, _call("writer", "draft v2"), op_id=op)

    result = resume_turn(h.deps, h.session_id, op)

    assert result.status == "completed"
    (part,) = _results(h.transcript())
    assert part.content == "You said: draft v2"
    child = _child_transcript(h, op, part.call_id)
    assert next(m.role for m in child) == "user"
    assert sum(1 for m in child if m.role == "user") == 1  # one child turn, resumed
    child_session, child_op = child_ids(h.session_id, op, part.call_id)
    with open_storage(h.storage_url, child_session) as storage:
        assert load_state(storage, child_op) is None
        record = load_record(storage, child_op)
        assert record is not None
        assert record.status == "completed"


def test_cancelling_the_parent_cancels_the_child_and_both_end_aborted(tmp_path: Path) -> None:
    h = make_turn_harness(tmp_path)

    @tool(isolation="in_process")
    def stop_parent(ctx: ToolContext) -> str:
        """A person presses stop on the parent turn while the child works."""
        assert cancel_turn(h.deps, h.session_id).status == "cancelling"
        return "stopped"

    worker = Agent(name="worker", tools=[stop_parent])
    h.deps.agent = _triage(worker)
    op = "op-parent-2"

    result = run_turn(h.deps, h.session_id, USER, _call("worker", "call stop_parent {}"), op_id=op)

    assert result.status == "aborted"
    assert h.meta()["turnStatus"] == "aborted"
    (part,) = _results(h.transcript())
    assert part.is_error
    assert "cancelled" in part.content
    child_session, child_op = child_ids(h.session_id, op, part.call_id)
    with open_storage(h.storage_url, child_session) as storage:
        record = load_record(storage, child_op)
        assert record is not None
        assert record.status == "aborted"
    envelope = h.envelopes.get(child_session)
    assert envelope is not None
    assert envelope.meta.get("turnStatus") == "aborted"


def test_a_child_turns_usage_is_rolled_up_into_the_parents_and_shown_apart(
    tmp_path: Path,
) -> None:
    h = make_turn_harness(tmp_path)
    h.deps.agent = _triage()
    alone = make_turn_harness(tmp_path)
    alone.deps.agent = WRITER  # the same turn, run on its own

    result = run_turn(h.deps, h.session_id, USER, _call("writer", "draft v2"))
    child = run_turn(alone.deps, alone.session_id, USER, "draft v2")

    assert result.subagent_usage == child.usage
    assert result.subagent_usage.input_tokens > 0
    own = result.usage.input_tokens - result.subagent_usage.input_tokens
    assert own > 0
    assert result.usage.input_tokens == own + child.usage.input_tokens
    assert json.loads(h.meta()["usage"])["input_tokens"] == result.usage.input_tokens
    (part,) = _results(h.transcript())
    with h.storage() as storage:
        (entry,) = storage.get_entries([f"{result.op_id}:r0:{part.call_id}"])
    assert entry.data["subagent"]["agent"] == "writer"
    assert entry.data["subagent"]["status"] == "completed"


def test_the_release_assistant_hands_changelog_writing_to_its_writer_sub_agent(
    tmp_path: Path,
) -> None:
    from turnkeep_agents.release_assistant import agent

    h = make_turn_harness(tmp_path)
    h.deps.agent = agent
    task = 'call ticket_summary {"ticket_id": "rel-101"}'

    result = run_turn(h.deps, h.session_id, USER, _call("write_changelog", task))

    assert result.status == "completed"
    (part,) = [p for p in _results(h.transcript()) if p.name == "write_changelog"]
    assert not part.is_error
    assert part.content.startswith("Tool ticket_summary returned: REL-101: ")
    assert "(status done" in part.content
    child = h.provider.requests[1]
    assert child.system.startswith("You write the changelog of one ACME web shop release.")
    assert [t.name for t in child.tools if t.name == "ticket_summary"] == ["ticket_summary"]


def test_a_sub_agent_of_a_sub_agent_runs_as_a_grandchild_turn_found_by_its_path(
    tmp_path: Path,
) -> None:
    from turnkeep.harness.subagents import deps_for_session, load_link

    editor = Agent(name="editor", instructions="You edit.")
    writer = Agent(name="writer", instructions="You write.", agents=[editor])
    h = make_turn_harness(tmp_path)
    h.deps.agent = _triage(writer)
    inner = json.dumps({"input": "hi"})

    result = run_turn(h.deps, h.session_id, USER, _call("writer", f"call editor {inner}"))

    assert result.status == "completed"
    (part,) = _results(h.transcript())
    assert part.content == "Tool editor returned: You said: hi"
    child_session, child_op = child_ids(h.session_id, result.op_id, part.call_id)
    (grand,) = _results(_child_transcript(h, result.op_id, part.call_id))
    grand_session, _ = child_ids(child_session, child_op, grand.call_id)
    link = load_link(h.deps, grand_session)
    assert link is not None
    assert link.path == ["writer", "editor"]
    # Where one process runs every agent's steps (Lambda), the path finds the editor.
    assert deps_for_session(h.deps, grand_session).agent is editor
    assert deps_for_session(h.deps, child_session).agent is writer
    assert deps_for_session(h.deps, h.session_id).agent is h.deps.agent
    # Usage rolls up through both levels.
    assert result.subagent_usage.input_tokens > 0


def test_a_typed_sub_agents_validated_result_is_the_calls_result_as_json(tmp_path: Path) -> None:
    from pydantic import BaseModel

    class Changelog(BaseModel):
        title: str
        items: list[str]

    typed_writer = Agent(name="typed_writer", output_type=Changelog)
    h = make_turn_harness(tmp_path)
    h.deps.agent = _triage(typed_writer)
    task = 'call final_result {"title": "2.4.0", "items": ["fix the login"]}'

    result = run_turn(h.deps, h.session_id, USER, _call("typed_writer", task), op_id="op-typed")

    assert result.status == "completed"
    with h.storage() as storage:
        messages = branch_messages(storage, load_head(storage))
    (part,) = _results(messages)
    assert not part.is_error
    assert json.loads(part.content) == {"title": "2.4.0", "items": ["fix the login"]}
