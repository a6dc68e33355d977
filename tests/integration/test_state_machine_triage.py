"""The example triage agent on Step Functions: the template's definition executed by moto with
TURNKEEP_AGENT naming `turnkeep_agents.release_assistant.triage:agent`. Its typed readiness
checker runs as one child turn (an execution of its own the parent waits for on a task token),
its `Readiness` comes back as the call's JSON result, and the parent's own `Triage` is the
execution's output (docs/step-functions.md, "Sub-agents")."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.state_machine import Deployed, run_turn
from tests.support.triage_scripts import AGENT, DECISION, VERDICT, readiness_only
from turnkeep.aws_lambda import container
from turnkeep.harness.state import load_head, load_record
from turnkeep.harness.subagents import child_ids
from turnkeep.harness.transcript import branch_messages
from turnkeep.providers.base import ToolResultPart
from turnkeep.runtime.agent_loading import forget_agents


@pytest.fixture
def triage(deployed: Deployed, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TURNKEEP_AGENT", AGENT)
    monkeypatch.setenv("TURNKEEP_CHILD_TURNS", "execution")
    monkeypatch.setenv("TURNKEEP_STATE_MACHINE_ARN", deployed.state_machine_arn)
    forget_agents()
    container.reset_runtime()
    yield
    container.reset_runtime()


@pytest.mark.parametrize("deployed", ["STANDARD"], indirect=True)
def test_the_triage_agent_runs_its_typed_sub_agent_as_a_child_execution_and_ends_typed(
    deployed: Deployed, triage: None
) -> None:
    session = "sfn-triage"
    op_id, output = run_turn(deployed, session, readiness_only())

    assert output["status"] == "completed", output
    assert output["output"] == DECISION
    storage = container.runtime().deps.open_storage(session)
    try:
        messages = branch_messages(storage, load_head(storage))
    finally:
        storage.close()
    (part,) = [
        p
        for m in messages
        for p in m.parts
        if isinstance(p, ToolResultPart) and p.name == "check_readiness"
    ]
    assert not part.is_error
    assert json.loads(part.content) == VERDICT
    child_session, child_op = child_ids(session, op_id, part.call_id)
    storage = container.runtime().deps.open_storage(child_session)
    try:
        record = load_record(storage, child_op)
    finally:
        storage.close()
    assert (record.status, record.output) == ("completed", VERDICT)
    arn = f"{deployed.state_machine_arn.replace(':stateMachine:', ':execution:')}:{child_op}"
    assert deployed.sfn.describe_execution(executionArn=arn)["status"] == "SUCCEEDED"
    child_models = [
        e
        for name, e, _ in deployed.host.calls
        if name == "ModelStepFunction" and e["session_id"] == child_session
    ]
    assert len(child_models) == 2  # the child's two rounds: its lookup, then its Readiness
    assert output["subagent_usage"]["input_tokens"] > 0
