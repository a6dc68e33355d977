"""An approval inside a sub-agent's child turn pauses the child and the parent; the parent's
pending requests list the child's (marked with the sub-agent path); a decision on the parent's
turn resolves it and both go on; deny, timeout and cancel end as they would at the top
(docs/approvals.md, "Inside a sub-agent")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.integration.turns_support import USER, Harness, make_turn_harness
from turnkeep import Agent, Tool
from turnkeep.harness import cancel_turn, resume_turn, run_turn
from turnkeep.harness.child_approvals import decide_in_tree, pending_requests
from turnkeep.harness.state import load_record
from turnkeep.harness.subagents import child_ids
from turnkeep.providers.base import ToolResultPart
from turnkeep.storage import open_storage
from turnkeep.tools.base import ToolContext, ToolResult


class SendArgs(BaseModel):
    to: str


SENT: list[str] = []


def _send(args: SendArgs, ctx: ToolContext) -> ToolResult:
    SENT.append(args.to)
    return ToolResult(f"sent to {args.to}")


SEND = Tool("send_mail", "Send a mail.", SendArgs, _send, requires_approval=True)
MAILER = Agent(name="mailer", instructions="You send mail.", tools=[SEND])
TRIAGE = Agent(name="triage", agents=[MAILER])
TASK = 'call send_mail {"to": "ops@example.com"}'
CALL = f"call mailer {json.dumps({'input': TASK})}"


def _paused(tmp_path: Path, backend: str = "memory") -> tuple[Harness, str]:
    SENT.clear()
    h = make_turn_harness(tmp_path, backend)
    h.deps.agent = TRIAGE
    result = run_turn(h.deps, h.session_id, USER, CALL)
    assert result.status == "awaiting_approval", result
    return h, result.op_id


def _parent_result(h: Harness) -> ToolResultPart:
    (part,) = [p for m in h.transcript() for p in m.parts if isinstance(p, ToolResultPart)]
    return part


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_child_call_that_needs_approval_pauses_the_child_and_the_parent(
    tmp_path: Path, backend: str
) -> None:
    h, op = _paused(tmp_path, backend)

    assert h.meta()["turnStatus"] == "awaiting_approval"
    (request,) = pending_requests(h.deps, h.session_id, op)
    assert request.call.name == "send_mail"
    assert request.path == ["mailer"]
    marker = request.subagent()
    assert marker is not None
    assert marker["agent"] == "mailer"
    child_envelope = h.envelopes.get(request.session_id)
    assert child_envelope is not None
    assert child_envelope.meta["turnStatus"] == "awaiting_approval"
    assert child_envelope.parent_session_id == h.session_id
    assert SENT == []
    with h.storage() as storage:
        shown = [e for e in storage.scan_entries() if e.type == "approval_requested"]
    assert [(e.data["call_id"], e.data["name"]) for e in shown] == [
        (request.call.call_id, "send_mail")
    ]
    assert shown[0].data["subagent"]["path"] == ["mailer"]


def test_approving_through_the_parents_turn_runs_the_childs_call_and_both_complete(
    tmp_path: Path,
) -> None:
    h, op = _paused(tmp_path)
    (request,) = pending_requests(h.deps, h.session_id, op)

    decided, found = decide_in_tree(
        h.deps, h.session_id, op, request.call.call_id, user_id=USER, decision="approve"
    )
    result = resume_turn(h.deps, h.session_id, op)

    assert found is not None
    assert found.session_id == request.session_id
    assert decided.call.approval is not None
    assert result.status == "completed"
    assert h.meta()["turnStatus"] == "completed"
    assert SENT == ["ops@example.com"]
    part = _parent_result(h)
    assert not part.is_error
    assert "sent to ops@example.com" in part.content
    assert pending_requests(h.deps, h.session_id, op) == []
    child_session, child_op = child_ids(h.session_id, op, part.call_id)
    with open_storage(h.storage_url, child_session) as storage:
        record = load_record(storage, child_op)
    assert record is not None
    assert record.status == "completed"


def test_denying_through_the_parent_gives_the_child_the_denial_and_the_tool_never_runs(
    tmp_path: Path,
) -> None:
    h, op = _paused(tmp_path)
    (request,) = pending_requests(h.deps, h.session_id, op)

    decide_in_tree(
        h.deps,
        h.session_id,
        op,
        request.call.call_id,
        user_id=USER,
        decision="deny",
        reason="not today",
    )
    result = resume_turn(h.deps, h.session_id, op)

    assert result.status == "completed"
    assert SENT == []
    assert "the user denied this call of send_mail: not today" in _parent_result(h).content


def test_a_childs_approval_that_times_out_denies_its_call_as_a_top_level_turns_would(
    tmp_path: Path,
) -> None:
    h, op = _paused(tmp_path)

    h.clock.advance(h.deps.limits.approval_timeout_seconds + 1)
    result = resume_turn(h.deps, h.session_id, op)

    assert result.status == "completed"
    assert SENT == []
    assert "(timed out). It did not run." in _parent_result(h).content


def test_cancelling_the_parent_while_its_child_waits_aborts_both_and_leaves_nothing_waiting(
    tmp_path: Path,
) -> None:
    h, op = _paused(tmp_path)
    (request,) = pending_requests(h.deps, h.session_id, op)

    cancelled = cancel_turn(h.deps, h.session_id)

    assert cancelled.status == "aborted"
    assert h.meta()["turnStatus"] == "aborted"
    child = h.envelopes.get(request.session_id)
    assert child is not None
    assert child.meta["turnStatus"] == "aborted"
    assert pending_requests(h.deps, h.session_id, op) == []
    assert SENT == []


def test_a_decision_for_a_call_id_no_turn_of_the_tree_has_is_not_found(
    tmp_path: Path,
) -> None:
    from turnkeep.harness.approvals import ApprovalNotFoundError

    h, op = _paused(tmp_path)

    with pytest.raises(ApprovalNotFoundError):
        decide_in_tree(h.deps, h.session_id, op, "no-such-call", user_id=USER, decision="approve")
