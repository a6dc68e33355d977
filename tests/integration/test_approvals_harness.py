"""Human approval of tool calls through the harness steps (in-process orchestrator, SQLite and
memory storage): pause, approve/edit/deny/timeout, cancel while waiting, recovery."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from turnkeep.envelope import open_envelope_store
from turnkeep.harness import (
    HarnessDeps,
    HarnessLimits,
    ToolStepInput,
    TurnConflictError,
    cancel_turn,
    resume_turn,
    run_turn,
    tool_step,
)
from turnkeep.harness.approvals import (
    ApprovalConflictError,
    ApprovalInvalidError,
    ApprovalNotFoundError,
    decide,
)
from turnkeep.harness.state import load_call, load_head, load_state
from turnkeep.harness.transcript import branch_messages
from turnkeep.providers.base import check_transcript
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import open_storage
from turnkeep.tools.base import Tool, ToolContext, ToolResult
from turnkeep.tools.builtin import builtin_tools


class SendArgs(BaseModel):
    to: str


@dataclass
class Outbox:
    """A tool with a real side effect: every run appends to `sent` (counted, never faked)."""

    sent: list[str] = field(default_factory=list)

    def tool(self) -> Tool[SendArgs]:
        def send(args: SendArgs, ctx: ToolContext) -> ToolResult:
            self.sent.append(args.to)
            return ToolResult(f"sent to {args.to}")

        return Tool(
            "send_mail",
            "send an email",
            SendArgs,
            send,
            isolation="in_process",
            requires_approval=True,
        )


@dataclass
class Clock:
    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Setup:
    deps: HarnessDeps
    url: str
    outbox: Outbox
    clock: Clock

    def storage(self) -> Any:
        return open_storage(self.url, "s1")

    def call(self, op: str, call_id: str) -> Any:
        with self.storage() as storage:
            return load_call(storage, op, call_id)

    def status(self) -> object:
        envelope = self.deps.envelopes.get("s1")
        assert envelope is not None
        return envelope.meta.get("turnStatus")

    def check_transcript(self) -> None:
        with self.storage() as storage:
            check_transcript(branch_messages(storage, load_head(storage)))

    def tool_results(self) -> list[dict[str, Any]]:
        with self.storage() as storage:
            entries = storage.scan_entries(after_seq=0, limit=1000)
        found = []
        for entry in entries:
            message = entry.data.get("message") if isinstance(entry.data, dict) else None
            if isinstance(message, dict) and message.get("role") == "tool":
                found.extend(message["parts"])
        return found


@pytest.fixture(params=["memory", "sqlite"])
def s(request: pytest.FixtureRequest, tmp_path: Path) -> Setup:
    if request.param == "memory":
        url = f"memory://{uuid.uuid4().hex}"
    else:
        url = f"sqlite:///{tmp_path / 'turnkeep.db'}"
    envelopes = open_envelope_store(f"memory://{uuid.uuid4().hex}")
    envelopes.create("s1", "u1")
    outbox = Outbox()
    clock = Clock()
    deps = HarnessDeps(
        open_storage=lambda sid: open_storage(url, sid),
        envelopes=envelopes,
        provider=ScriptedProvider(),
        tools=lambda _s, _u: [*builtin_tools(), outbox.tool()],
        clock=clock,
        limits=HarnessLimits(approval_timeout_seconds=600),
    )
    return Setup(deps, url, outbox, clock)


SEND = 'call send_mail {"to": "bob@example.com"}'


def _pause(s: Setup, text: str = SEND) -> tuple[str, str]:
    result = run_turn(s.deps, "s1", "u1", text, op_id="op1")
    assert result.status == "awaiting_approval"
    assert len(result.awaiting_call_ids) == 1
    return result.op_id, result.awaiting_call_ids[0]


def test_a_call_needing_approval_pauses_the_turn_without_running_the_tool(s: Setup) -> None:
    op, call_id = _pause(s)

    assert s.outbox.sent == []
    assert s.status() == "awaiting_approval"
    call = s.call(op, call_id)
    assert call.phase == "awaiting"
    with s.storage() as storage:
        requested = [e for e in storage.scan_entries(after_seq=0) if e.type == "approval_requested"]
    assert [e.data["arguments"] for e in requested] == [{"to": "bob@example.com"}]
    assert requested[0].data["name"] == "send_mail"


def test_an_approved_call_runs_once_and_the_turn_completes(s: Setup) -> None:
    op, call_id = _pause(s)

    decide(s.deps, "s1", op, call_id, user_id="u1", decision="approve")
    result = resume_turn(s.deps, "s1", op)
    again = resume_turn(s.deps, "s1", op)  # a redelivered resume changes nothing

    assert result.status == "completed"
    assert again.status == "completed"
    assert s.outbox.sent == ["bob@example.com"]
    assert s.status() == "completed"
    s.check_transcript()


def test_an_edited_call_runs_with_the_new_arguments_and_the_model_is_told(s: Setup) -> None:
    op, call_id = _pause(s)

    decide(s.deps, "s1", op, call_id, user_id="u1", decision="edit", arguments={"to": "amy@x.org"})
    resume_turn(s.deps, "s1", op)

    assert s.outbox.sent == ["amy@x.org"]
    [result] = s.tool_results()
    assert "edited the arguments" in result["content"]
    assert "sent to amy@x.org" in result["content"]
    with s.storage() as storage:
        [decided] = [e for e in storage.scan_entries(after_seq=0) if e.type == "approval_decided"]
    assert decided.data["arguments"] == {"to": "bob@example.com"}
    assert decided.data["edited_arguments"] == {"to": "amy@x.org"}


def test_edited_arguments_that_break_the_schema_are_refused_and_nothing_changes(s: Setup) -> None:
    op, call_id = _pause(s)

    with pytest.raises(ApprovalInvalidError, match="to"):
        decide(s.deps, "s1", op, call_id, user_id="u1", decision="edit", arguments={"x": 1})
    with pytest.raises(ApprovalInvalidError, match="arguments"):
        decide(s.deps, "s1", op, call_id, user_id="u1", decision="edit")

    assert s.call(op, call_id).approval.decision is None


def test_a_denied_call_gives_the_model_the_reason(s: Setup) -> None:
    op, call_id = _pause(s)

    decide(s.deps, "s1", op, call_id, user_id="u1", decision="deny", reason="not today")
    result = resume_turn(s.deps, "s1", op)

    assert result.status == "completed"
    assert s.outbox.sent == []
    [part] = s.tool_results()
    assert part["is_error"] is True
    assert "denied" in part["content"]
    assert "not today" in part["content"]


def test_a_request_nobody_decides_is_denied_as_timed_out(s: Setup) -> None:
    op, call_id = _pause(s)

    s.clock.now += 599
    assert resume_turn(s.deps, "s1", op).status == "awaiting_approval"
    s.clock.now += 2
    result = resume_turn(s.deps, "s1", op)

    assert result.status == "completed"
    assert s.outbox.sent == []
    [part] = s.tool_results()
    assert "timed out" in part["content"]
    with pytest.raises(ApprovalConflictError):
        decide(s.deps, "s1", op, call_id, user_id="u1", decision="approve")


def test_a_second_decision_is_a_conflict_and_changes_nothing(s: Setup) -> None:
    op, call_id = _pause(s)
    decide(s.deps, "s1", op, call_id, user_id="u1", decision="deny", reason="no")

    with pytest.raises(ApprovalConflictError):
        decide(s.deps, "s1", op, call_id, user_id="u1", decision="approve")
    resume_turn(s.deps, "s1", op)

    assert s.outbox.sent == []


def test_unknown_calls_and_other_users_are_not_found(s: Setup) -> None:
    op, call_id = _pause(s)

    with pytest.raises(ApprovalNotFoundError):
        decide(s.deps, "s1", op, "nosuch", user_id="u1", decision="approve")
    with pytest.raises(ApprovalNotFoundError):
        decide(s.deps, "s1", op, call_id, user_id="mallory", decision="approve")
    with pytest.raises(ApprovalNotFoundError):
        decide(s.deps, "s1", "op-none", call_id, user_id="u1", decision="approve")


def test_a_waiting_turn_blocks_a_new_turn_and_cancel_aborts_it(s: Setup) -> None:
    op, call_id = _pause(s)

    with pytest.raises(TurnConflictError):
        run_turn(s.deps, "s1", "u1", "hello", op_id="op2")
    cancelled = cancel_turn(s.deps, "s1", op)

    assert cancelled.status == "aborted"
    assert s.status() == "aborted"
    with s.storage() as storage:
        assert load_state(storage, op) is None
    s.check_transcript()
    with pytest.raises(ApprovalConflictError):  # a decision after the cancel
        decide(s.deps, "s1", op, call_id, user_id="u1", decision="approve")
    assert s.outbox.sent == []
    assert run_turn(s.deps, "s1", "u1", "hello", op_id="op3").status == "completed"


def test_calls_needing_no_approval_run_while_the_round_waits(s: Setup) -> None:
    text = f'{SEND}\ncall echo {{"text": "meanwhile"}}'
    result = run_turn(s.deps, "s1", "u1", text, op_id="op1")

    assert result.status == "awaiting_approval"
    echo = s.call("op1", "call_u1_r0_1")
    assert echo.phase == "done"
    assert "meanwhile" in echo.content


def test_the_session_policy_gates_a_tool_without_the_flag(s: Setup) -> None:
    s.deps.envelopes.put_host_meta("s1", "u1", {"toolApproval": "echo, calculator"})

    result = run_turn(s.deps, "s1", "u1", 'call echo {"text": "hi"}', op_id="op1")

    assert result.status == "awaiting_approval"


def test_the_star_policy_gates_every_tool(s: Setup) -> None:
    s.deps.envelopes.put_host_meta("s1", "u1", {"toolApproval": "*"})

    result = run_turn(s.deps, "s1", "u1", "call clock_now {}", op_id="op1")

    assert result.status == "awaiting_approval"


def test_a_redelivered_tool_step_while_waiting_keeps_one_request(s: Setup) -> None:
    op, call_id = _pause(s)

    again = tool_step(s.deps, ToolStepInput(session_id="s1", op_id=op, call_id=call_id))

    assert again.status == "awaiting_approval"
    with s.storage() as storage:
        requested = [e for e in storage.scan_entries(after_seq=0) if e.type == "approval_requested"]
    assert len(requested) == 1


def test_a_crash_after_the_approved_call_started_does_not_run_it_twice(s: Setup) -> None:
    op, call_id = _pause(s)
    decide(s.deps, "s1", op, call_id, user_id="u1", decision="approve")

    class Crash(BaseException):
        pass

    original = s.outbox.tool().handler

    def crashing(args: SendArgs, ctx: ToolContext) -> ToolResult:
        original(args, ctx)
        raise Crash

    s.deps.tools = lambda _s, _u: [
        *builtin_tools(),
        Tool(
            "send_mail", "send", SendArgs, crashing, isolation="in_process", requires_approval=True
        ),
    ]
    with pytest.raises(Crash):
        resume_turn(s.deps, "s1", op)
    s.deps.tools = lambda _s, _u: [*builtin_tools(), s.outbox.tool()]
    result = resume_turn(s.deps, "s1", op)

    assert result.status == "completed"
    assert s.outbox.sent == ["bob@example.com"]
    [part] = s.tool_results()
    assert "not run again" in part["content"]


def test_waiting_time_does_not_count_against_the_wall_clock(s: Setup) -> None:
    op, call_id = _pause(s)
    s.clock.now += 500  # longer than the 300 s turn deadline, shorter than the timeout

    decide(s.deps, "s1", op, call_id, user_id="u1", decision="approve")
    resume_turn(s.deps, "s1", op)

    with s.storage() as storage:
        entries = storage.scan_entries(after_seq=0)
    replies = [
        json.dumps(e.data) for e in entries if e.data.get("message", {}).get("role") == "assistant"
    ]
    assert not any("Wrapping up" in r for r in replies)


def test_under_express_a_call_needing_approval_fails_clearly_and_does_not_run(s: Setup) -> None:
    s.deps.limits = HarnessLimits(workflow_type="EXPRESS")

    result = run_turn(s.deps, "s1", "u1", SEND, op_id="op1")

    assert result.status == "completed"
    assert s.outbox.sent == []
    [part] = s.tool_results()
    assert part["is_error"] is True
    assert "Express" in part["content"]
    assert "STANDARD" in part["content"]


def test_the_workflow_type_comes_from_turnkeep_workflow_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from turnkeep.runtime.build import limits_from_settings
    from turnkeep.runtime.settings import TurnkeepSettings

    monkeypatch.setenv("TURNKEEP_WORKFLOW_TYPE", "EXPRESS")

    assert limits_from_settings(TurnkeepSettings()).workflow_type == "EXPRESS"


def test_a_decision_recorded_before_a_crash_is_applied_by_the_next_resume(s: Setup) -> None:
    op, call_id = _pause(s)
    decide(s.deps, "s1", op, call_id, user_id="u1", decision="approve")
    # The process that took the decision died before waking the turn: nothing ran yet.
    assert s.outbox.sent == []
    assert s.status() == "awaiting_approval"

    result = resume_turn(s.deps, "s1", op)

    assert result.status == "completed"
    assert s.outbox.sent == ["bob@example.com"]


def test_the_wait_step_keeps_its_token_while_undecided_and_releases_itself_once_decided(
    s: Setup,
) -> None:
    from turnkeep.harness.approvals import hold_wait, token_address

    op, call_id = _pause(s)
    released: list[str] = []

    first = hold_wait(s.deps, "s1", op, call_id, "token-1", release=released.append)
    with s.storage() as storage:
        kept = storage.get_value(token_address(op, call_id))
    decide(s.deps, "s1", op, call_id, user_id="u1", decision="approve")
    # A redelivered wait (or one whose token was kept after the decision's read) sees the
    # decision and releases itself instead of waiting forever.
    second = hold_wait(s.deps, "s1", op, call_id, "token-2", release=released.append)

    assert first == "waiting"
    assert kept is not None
    assert kept.value == "token-1"
    assert second == "released"
    assert released == ["token-2"]
