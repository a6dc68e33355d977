"""An approval inside a sub-agent's child turn on Step Functions: the template's definition
executed by moto, the child turn an execution of its own that waits on its approval task token
while the parent's execution waits on its child token. The parent's routes list the child's
request and resolve it (the route finds the child's wait and sends it); cancel ends both
(docs/approvals.md, "Inside a sub-agent")."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.approving_subagent import TASK_TEXT
from tests.support.state_machine import (
    SESSION,
    Call,
    Deployed,
    api_caller,
    finished_execution,
    tool_results,
)
from turnkeep.aws_lambda import container
from turnkeep.harness.approvals import token_address
from turnkeep.runtime.agent_loading import forget_agents

STANDARD_ONLY = pytest.mark.parametrize("deployed", ["STANDARD"], indirect=True)


@pytest.fixture
def mail_log(deployed: Deployed, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The approving sub-agent deployed, its child turns as executions; its mail log."""
    log = tmp_path / "mail.log"
    monkeypatch.setenv("TURNKEEP_AGENT", "tests.support.approving_subagent:agent")
    monkeypatch.setenv("TURNKEEP_CHILD_TURNS", "execution")
    monkeypatch.setenv("TURNKEEP_STATE_MACHINE_ARN", deployed.state_machine_arn)
    monkeypatch.setenv("SUBAGENT_MAIL_LOG", str(log))
    forget_agents()
    container.reset_runtime()
    yield log
    container.reset_runtime()


def _child_token(pending: dict[str, Any]) -> object:
    marker = pending["subagent"]
    storage = container.runtime().deps.open_storage(marker["session_id"])
    try:
        stored = storage.get_value(token_address(marker["turn_id"], pending["call_id"]))
    finally:
        storage.close()
    return None if stored is None else stored.value


def _paused(call: Call) -> tuple[str, dict[str, Any]]:
    """Start the parent's turn; (turn id, the child's pending request) once the child's
    execution waits with its token kept."""
    assert call("POST", "/sessions", {"session_id": SESSION})[0] == 201
    status, started = call("POST", f"/sessions/{SESSION}/turns", {"text": TASK_TEXT})
    assert status == 202, started
    turn = started["turn_id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pending = call("GET", "/approvals", None)[1]["approvals"]
        if pending and _child_token(pending[0]) is not None:
            return turn, pending[0]
        time.sleep(0.05)
    raise AssertionError("the child's execution never waited for the approval")


@STANDARD_ONLY
def test_a_childs_approval_decided_on_the_parents_route_resumes_both_executions(
    deployed: Deployed, mail_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = api_caller(deployed, monkeypatch)
    turn, pending = _paused(call)

    view = call("GET", f"/sessions/{SESSION}/turns/{turn}", None)[1]
    assert view["status"] == "awaiting_approval"
    assert (pending["session_id"], pending["turn_id"]) == (SESSION, turn)
    assert pending["tool"] == "send_mail"
    assert pending["subagent"]["path"] == ["mailer"]
    assert not mail_log.exists()

    status, _ = call(
        "POST",
        f"/sessions/{SESSION}/turns/{turn}/approvals/{pending['call_id']}",
        {"decision": "approve"},
    )
    child = finished_execution(deployed, pending["subagent"]["turn_id"])
    parent = finished_execution(deployed, turn)

    assert status == 202
    assert child["status"] == "SUCCEEDED", child
    assert parent["status"] == "SUCCEEDED", parent
    assert call("GET", f"/sessions/{SESSION}/turns/{turn}", None)[1]["status"] == "completed"
    assert mail_log.read_text() == "ops@example.com\n"
    (result,) = tool_results(call, turn)
    assert "sent to ops@example.com" in result["content"]
    assert call("GET", "/approvals", None)[1]["approvals"] == []


@STANDARD_ONLY
def test_a_childs_denial_on_the_parents_route_reaches_the_child_and_the_tool_never_runs(
    deployed: Deployed, mail_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = api_caller(deployed, monkeypatch)
    turn, pending = _paused(call)

    status, _ = call(
        "POST",
        f"/sessions/{SESSION}/turns/{turn}/approvals/{pending['call_id']}",
        {"decision": "deny", "reason": "not now"},
    )
    parent = finished_execution(deployed, turn)

    assert status == 202
    assert parent["status"] == "SUCCEEDED", parent
    (result,) = tool_results(call, turn)
    assert "the user denied this call of send_mail: not now" in result["content"]
    assert not mail_log.exists()


@STANDARD_ONLY
def test_cancelling_the_parent_while_its_child_waits_ends_both_executions_aborted(
    deployed: Deployed, mail_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = api_caller(deployed, monkeypatch)
    turn, pending = _paused(call)

    status, cancelled = call("POST", f"/sessions/{SESSION}/turns/{turn}/cancel", None)
    child = finished_execution(deployed, pending["subagent"]["turn_id"])
    parent = finished_execution(deployed, turn)
    late, _ = call(
        "POST",
        f"/sessions/{SESSION}/turns/{turn}/approvals/{pending['call_id']}",
        {"decision": "approve"},
    )

    assert status == 202
    assert cancelled["status"] == "aborted"
    assert child["status"] == "SUCCEEDED", child
    assert parent["status"] == "SUCCEEDED", parent
    assert json.loads(parent["output"])["model"]["status"] == "aborted"
    child_view = call("GET", f"/sessions/{pending['subagent']['session_id']}", None)[1]
    assert child_view["turn"]["status"] == "aborted"
    assert late == 409
    assert not mail_log.exists()


@STANDARD_ONLY
def test_a_childs_approval_nobody_answers_times_out_in_the_child_and_the_parent_goes_on(
    deployed: Deployed, mail_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNKEEP_APPROVAL_TIMEOUT_SECONDS", "2")
    container.reset_runtime()
    call = api_caller(deployed, monkeypatch)
    turn, pending = _paused(call)

    child = finished_execution(deployed, pending["subagent"]["turn_id"])
    parent = finished_execution(deployed, turn)

    assert child["status"] == "SUCCEEDED", child
    assert parent["status"] == "SUCCEEDED", parent
    assert call("GET", f"/sessions/{SESSION}/turns/{turn}", None)[1]["status"] == "completed"
    (result,) = tool_results(call, turn)
    assert "(timed out). It did not run." in result["content"]
    assert not mail_log.exists()
