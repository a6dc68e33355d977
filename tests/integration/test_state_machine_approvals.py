"""Approvals on Step Functions: the real definition executed by moto, the real step handlers and
the API Lambda. The execution waits on `.waitForTaskToken` (token kept in the operation scope);
the approval route records the decision and sends SendTaskSuccess; the timeout is the wait's own.
Waiting needs a STANDARD workflow: those tests run on STANDARD only, and one shows what an
EXPRESS deployment does with a call needing approval.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.support.iam_policy import (
    checked_permissions,
    recording_aws_calls,
    stack_refs,
)
from tests.support.lambda_host import FakeContext
from tests.support.state_machine import (
    BUCKET,
    SESSION,
    TABLE,
    Call,
    Deployed,
    api_caller,
    finished_execution,
    tool_results,
)
from turnkeep.aws_lambda import container
from turnkeep.harness.approvals import token_address

# The `deployed` fixture runs on both workflow types; a task-token wait exists only on STANDARD.
STANDARD_ONLY = pytest.mark.parametrize("deployed", ["STANDARD"], indirect=True)


def _paused(call: Call, text: str) -> tuple[str, dict[str, Any]]:
    """Create the gated session, start a turn; return (turn id, the pending approval) once the
    execution waits with its token kept."""
    assert call("POST", "/sessions", {"session_id": SESSION})[0] == 201
    assert call("PUT", f"/sessions/{SESSION}/meta", {"toolApproval": "echo"})[0] == 200
    status, started = call("POST", f"/sessions/{SESSION}/turns", {"text": text})
    assert status == 202, started
    turn = started["turn_id"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pending = call("GET", "/approvals", None)[1]["approvals"]
        if pending and _token(turn, pending[0]["call_id"]) is not None:
            return turn, pending[0]
        time.sleep(0.05)
    raise AssertionError("the execution never waited for the approval")


def _token(turn: str, call_id: str) -> object:
    deps = container.runtime().deps
    storage = deps.open_storage(SESSION)
    try:
        stored = storage.get_value(token_address(turn, call_id))
    finally:
        storage.close()
    return None if stored is None else stored.value


def _decide(call: Call, turn: str, pending: dict[str, Any], decision: str) -> tuple[int, Any]:
    """POST the decision on the turn's pending approval: (status, body)."""
    return call(
        "POST",
        f"/sessions/{SESSION}/turns/{turn}/approvals/{pending['call_id']}",
        {"decision": decision},
    )


def _tool_runs(deployed: Deployed) -> list[dict[str, Any]]:
    return [
        event
        for name, event, _error in deployed.host.calls
        if name == "ToolStepFunction" and "task_token" not in event
    ]


@STANDARD_ONLY
def test_an_approval_through_the_api_lambda_resumes_the_waiting_execution_and_the_tool_runs_once(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = api_caller(deployed, monkeypatch)
    turn, pending = _paused(call, 'call echo {"text": "approved hello"}')
    assert pending["tool"] == "echo"
    view = call("GET", f"/sessions/{SESSION}/turns/{turn}", None)[1]
    assert view["status"] == "awaiting_approval"

    status, _ = _decide(call, turn, pending, "approve")
    described = finished_execution(deployed, turn)
    again, _ = _decide(call, turn, pending, "approve")

    assert status == 202
    assert described["status"] == "SUCCEEDED", described
    results = tool_results(call, turn)
    assert [r["content"] for r in results] == ["approved hello"]
    assert [e["approval"] for e in _tool_runs(deployed)] == ["none", "decided"]
    assert call("GET", f"/sessions/{SESSION}/turns/{turn}", None)[1]["status"] == "completed"
    assert again == 409  # a late decision for an ended turn changes nothing


@STANDARD_ONLY
def test_a_denial_resumes_the_execution_and_the_model_gets_the_reason(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = api_caller(deployed, monkeypatch)
    turn, pending = _paused(call, 'call echo {"text": "x"}')

    status, _ = call(
        "POST",
        f"/sessions/{SESSION}/turns/{turn}/approvals/{pending['call_id']}",
        {"decision": "deny", "reason": "wrong recipient"},
    )
    described = finished_execution(deployed, turn)

    assert status == 202
    assert described["status"] == "SUCCEEDED", described
    [result] = tool_results(call, turn)
    assert result["is_error"] is True
    assert "wrong recipient" in result["content"]


@STANDARD_ONLY
def test_a_wait_nobody_answers_times_out_into_a_denial(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNKEEP_APPROVAL_TIMEOUT_SECONDS", "2")
    container.reset_runtime()
    call = api_caller(deployed, monkeypatch)
    turn, _pending = _paused(call, 'call echo {"text": "x"}')

    described = finished_execution(deployed, turn)

    assert described["status"] == "SUCCEEDED", described
    [result] = tool_results(call, turn)
    assert "timed out" in result["content"]
    assert [e["approval"] for e in _tool_runs(deployed)] == ["none", "timed_out"]


@STANDARD_ONLY
def test_a_cancel_while_waiting_aborts_the_turn_and_ends_the_execution(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = api_caller(deployed, monkeypatch)
    turn, pending = _paused(call, 'call echo {"text": "x"}')

    status, cancelled = call("POST", f"/sessions/{SESSION}/turns/{turn}/cancel", None)
    described = finished_execution(deployed, turn)
    late, _ = _decide(call, turn, pending, "approve")

    assert status == 202
    assert cancelled["status"] == "aborted"
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"])["model"]["status"] == "aborted"
    assert late == 409
    assert _token(turn, pending["call_id"]) is None  # the scope was retired


@STANDARD_ONLY
def test_every_aws_call_of_an_approval_is_allowed_by_the_template_policies(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API's SendTaskSuccess after a decision, and the wait step's own release (a wait
    that finds nothing left to wait for), checked against template.yaml's statements."""
    template = deployed.template
    refs = stack_refs(TABLE, BUCKET, deployed.state_machine_arn.rsplit(":", 1)[-1])
    call = api_caller(deployed, monkeypatch)
    with recording_aws_calls(deployed.host.current_function) as log:
        turn, pending = _paused(call, 'call echo {"text": "x"}')
        path = f"/sessions/{SESSION}/turns/{turn}/approvals/{pending['call_id']}"
        assert call("POST", path, {"decision": "approve"})[0] == 202
        finished_execution(deployed, turn)
        late_wait = {
            "session_id": SESSION,
            "op_id": turn,
            "round": 0,
            "call_id": pending["call_id"],
            "task_token": "a-token-whose-wait-is-over",
        }
        with deployed.host.acting_as("ToolStepFunction"):
            answer = deployed.host.handlers["ToolStepFunction"](
                late_wait, FakeContext(function_name="ToolStepFunction")
            )
        assert answer["status"] == "released"

    sent = {c.function for c in log.calls if c.operation == "SendTaskSuccess"}
    assert sent == {"ApiFunction", "ToolStepFunction"}
    denied = [(f, p) for f, p, allowed in checked_permissions(template, log, refs) if not allowed]
    assert denied == []


@pytest.mark.parametrize("deployed", ["EXPRESS"], indirect=True)
def test_under_express_a_call_needing_approval_fails_clearly_and_the_turn_goes_on(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = api_caller(deployed, monkeypatch)
    assert call("POST", "/sessions", {"session_id": SESSION})[0] == 201
    assert call("PUT", f"/sessions/{SESSION}/meta", {"toolApproval": "echo"})[0] == 200
    status, started = call(
        "POST", f"/sessions/{SESSION}/turns", {"text": 'call echo {"text": "never sent"}'}
    )
    assert status == 202, started
    turn = started["turn_id"]

    described = finished_execution(deployed, turn)

    assert described["status"] == "SUCCEEDED", described
    [result] = tool_results(call, turn)
    assert result["is_error"] is True
    assert "approvals need WorkflowType STANDARD" in result["content"]
    assert "never sent" not in result["content"]  # the tool did not run
    assert call("GET", "/approvals", None)[1]["approvals"] == []
    assert all("task_token" not in e for _n, e, _err in deployed.host.calls)
    assert call("GET", f"/sessions/{SESSION}/turns/{turn}", None)[1]["status"] == "completed"
