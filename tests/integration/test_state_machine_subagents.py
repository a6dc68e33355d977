"""Sub-agents on Step Functions: the template's definition executed by moto, the real handlers.
A sub-agent call's tool step starts the child turn and answers `child_turn`; the execution waits
on a task token (no Lambda waits) while the child runs as an execution of its own, whose last
step hands the token back; then the tool step records the child's final text. A failed child
step is retried, a cancel of the parent cancels the child (both aborted), and under EXPRESS the
call is a clear tool error (docs/step-functions.md, "Sub-agents")."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.iam_policy import checked_permissions, recording_aws_calls, stack_refs
from tests.support.state_machine import (
    BUCKET,
    TABLE,
    USER,
    Deployed,
    run_turn,
    scope_objects,
)
from turnkeep.aws_lambda import container
from turnkeep.aws_lambda.step_events import RetryableStepError
from turnkeep.harness import StartTurnInput, cancel_turn, start_turn
from turnkeep.harness.state import load_head, load_record, load_state
from turnkeep.harness.subagents import child_ids
from turnkeep.harness.transcript import branch_messages
from turnkeep.providers.base import ToolResultPart
from turnkeep.runtime.agent_loading import forget_agents

AGENT = "tests.support.subagent_agents:agent"
STANDARD_ONLY = pytest.mark.parametrize("deployed", ["STANDARD"], indirect=True)
EXPRESS_ONLY = pytest.mark.parametrize("deployed", ["EXPRESS"], indirect=True)
RESEARCH = "call research " + json.dumps({"input": 'call count_words {"text": "a b c"}'})


@pytest.fixture
def flags(deployed: Deployed, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv("TURNKEEP_AGENT", AGENT)
    # As template.yaml sets them (the tool step's ARN names the stack's own machine).
    monkeypatch.setenv("TURNKEEP_CHILD_TURNS", "execution")
    monkeypatch.setenv("TURNKEEP_STATE_MACHINE_ARN", deployed.state_machine_arn)
    monkeypatch.setenv("SUBAGENT_FLAG_DIR", str(tmp_path))
    forget_agents()
    container.reset_runtime()
    yield tmp_path
    container.reset_runtime()


def _results(session: str) -> list[ToolResultPart]:
    storage = container.runtime().deps.open_storage(session)
    try:
        messages = branch_messages(storage, load_head(storage))
    finally:
        storage.close()
    return [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]


def _child(session: str, op_id: str, call_id: str) -> tuple[str, str, Any]:
    child_session, child_op = child_ids(session, op_id, call_id)
    storage = container.runtime().deps.open_storage(child_session)
    try:
        assert load_state(storage, child_op) is None  # ended: its op state is gone
        record = load_record(storage, child_op)
    finally:
        storage.close()
    return child_session, child_op, record


def _execution(deployed: Deployed, name: str) -> dict[str, Any]:
    arn = f"{deployed.state_machine_arn.replace(':stateMachine:', ':execution:')}:{name}"
    described: dict[str, Any] = deployed.sfn.describe_execution(executionArn=arn)
    return described


@STANDARD_ONLY
def test_a_sub_agent_call_runs_its_child_turn_as_an_execution_the_parent_waits_for(
    deployed: Deployed, flags: Path
) -> None:
    session = "sfn-sub"
    op_id, output = run_turn(deployed, session, RESEARCH)

    assert output["status"] == "completed"
    (part,) = _results(session)
    assert part.name == "research"
    assert part.content == "Tool count_words returned: 3"
    child_session, child_op, record = _child(session, op_id, part.call_id)
    assert record.status == "completed"
    nested = _execution(deployed, child_op)
    assert nested["status"] == "SUCCEEDED"
    assert json.loads(nested["input"])["session_id"] == child_session
    assert scope_objects(deployed, child_session, child_op) == []
    # The parent's tool step function ran three times for the call, each briefly: it started
    # the child turn (`child_turn`), kept the wait's token and started the child's execution,
    # and recorded the result once the child's last step handed the token back.
    parent_tools = [
        e
        for name, e, _ in deployed.host.calls
        if name == "ToolStepFunction" and e["session_id"] == session
    ]
    assert [e.get("approval", "wait") for e in parent_tools] == ["none", "wait", "child_ended"]
    assert parent_tools[1]["child"] is True
    child_models = [
        e
        for name, e, _ in deployed.host.calls
        if name == "ModelStepFunction" and e["session_id"] == child_session
    ]
    assert len(child_models) == 2  # the child's two rounds ran as their own invocations
    assert output["subagent_usage"] == dataclasses.asdict(record.usage)


@STANDARD_ONLY
def test_a_failed_child_step_is_retried_and_the_child_turn_completes(
    deployed: Deployed, flags: Path
) -> None:
    original = deployed.host.handlers["ModelStepFunction"]
    failures: list[str] = []

    def flaky(event: dict[str, Any], context: Any) -> Any:
        if event["session_id"].startswith("sub-") and not failures:
            failures.append(event["session_id"])
            raise RetryableStepError("throttled (injected)")
        return original(event, context)

    with deployed.replaced("ModelStepFunction", flaky):
        op_id, output = run_turn(deployed, "sfn-sub-retry", RESEARCH)

    assert failures  # the child's first model step did fail once
    assert output["status"] == "completed"
    (part,) = _results("sfn-sub-retry")
    assert part.content == "Tool count_words returned: 3"
    assert _child("sfn-sub-retry", op_id, part.call_id)[2].status == "completed"


@STANDARD_ONLY
def test_cancelling_the_parent_cancels_the_running_child_and_both_end_aborted(
    deployed: Deployed, flags: Path
) -> None:
    session = "sfn-sub-cancel"
    deps = container.runtime().deps
    deps.envelopes.create(session, USER)
    op_id = "op-sub-cancel"
    text = "call writer " + json.dumps({"input": "call wait_for_go {}"})
    start_turn(deps, StartTurnInput(session_id=session, op_id=op_id, user_id=USER, text=text))
    deployed.sfn.start_execution(
        stateMachineArn=deployed.state_machine_arn,
        name=op_id,
        input=json.dumps({"session_id": session, "op_id": op_id, "round": 0}),
    )
    deadline = time.monotonic() + 60
    while not (flags / "started").exists():  # the child's tool runs: the parent waits
        assert time.monotonic() < deadline, "the child turn's tool never started"
        time.sleep(0.05)

    assert cancel_turn(deps, session).status == "cancelling"
    (flags / "go").touch()
    parent = _wait(deployed, op_id)

    assert parent["status"] == "SUCCEEDED"
    assert json.loads(parent["output"])["model"]["status"] == "aborted"
    (part,) = _results(session)
    assert part.is_error
    child_session, child_op, record = _child(session, op_id, part.call_id)
    assert record.status == "aborted"
    envelope = deps.envelopes.get(child_session)
    assert envelope is not None
    assert envelope.meta["turnStatus"] == "aborted"
    assert _wait(deployed, child_op)["status"] == "SUCCEEDED"


@EXPRESS_ONLY
def test_under_express_a_sub_agent_call_is_a_clear_tool_error(
    deployed: Deployed, flags: Path
) -> None:
    assert container.runtime().deps.limits.workflow_type == "EXPRESS"

    _op, output = run_turn(deployed, "sfn-sub-express", RESEARCH)

    assert output["status"] == "completed"
    (part,) = _results("sfn-sub-express")
    assert part.is_error
    assert "sub-agents need WorkflowType STANDARD" in part.content


def _wait(deployed: Deployed, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        described = _execution(deployed, name)
        if described["status"] != "RUNNING":
            return described
        assert time.monotonic() < deadline, f"execution {name} did not end"
        time.sleep(0.05)


@STANDARD_ONLY
def test_the_child_turn_calls_are_allowed_by_the_templates_least_privilege_policies(
    deployed: Deployed, flags: Path
) -> None:
    machine = deployed.state_machine_arn.rsplit(":", 1)[-1]
    refs = stack_refs(TABLE, BUCKET, machine)
    with recording_aws_calls(deployed.host.current_function) as log:
        _op, output = run_turn(deployed, "sfn-sub-iam", RESEARCH)
    assert output["status"] == "completed"

    checked = list(checked_permissions(deployed.template, log, refs))
    assert [(f, p) for f, p, allowed in checked if not allowed] == []
    actions = {(f, p.action) for f, p, _ in checked}
    # The tool step starts the child's execution; the child's last step hands the token back.
    assert ("ToolStepFunction", "states:StartExecution") in actions
    assert ("FinishTurnFunction", "states:SendTaskSuccess") in actions
