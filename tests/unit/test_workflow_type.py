"""template.yaml's WorkflowType: what each value deploys (the template rendered as
CloudFormation would for it), and what an EXPRESS deployment needs to fit in 5 minutes, without
task tokens, with its execution history in CloudWatch Logs (docs/step-functions.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.aws_template import load_template
from tools.express_asl import EXPRESS, STANDARD, render_express
from tools.sam_local.template import (
    STATE_MACHINE,
    declared_environment,
    deployed_environment,
    render,
    resolve,
)
from turnkeep.runtime.build import limits_from_settings
from turnkeep.runtime.settings import TurnkeepSettings

ROOT = Path(__file__).resolve().parents[2]
EXPRESS_LIMIT_SECONDS = 300  # an Express execution ends at 5 minutes


def _rendered(workflow_type: str) -> dict[str, Any]:
    return render(load_template(), {"WorkflowType": workflow_type})


def _machine(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    [(logical_id, machine)] = [
        (k, r["Properties"]) for k, r in template["Resources"].items() if r["Type"] == STATE_MACHINE
    ]
    return logical_id, machine


def _timeout(template: dict[str, Any], function_id: str) -> int:
    props = template["Resources"][function_id]["Properties"]
    return int(props.get("Timeout", template["Globals"]["Function"]["Timeout"]))


def test_the_committed_express_definition_is_the_one_generated_from_the_standard_one() -> None:
    # Edit turn.asl.json, then run `python -m tools.express_asl`.
    assert EXPRESS.read_text(encoding="utf-8") == render_express(STANDARD.read_text("utf-8"))


def test_an_express_deployment_fits_a_turn_in_five_minutes() -> None:
    template = _rendered("EXPRESS")
    _id, machine = _machine(template)
    assert machine["Type"] == "EXPRESS"
    definition = json.loads((ROOT / machine["DefinitionUri"]).read_text(encoding="utf-8"))
    assert 0 < definition["TimeoutSeconds"] <= EXPRESS_LIMIT_SECONDS
    for function_id in ("ModelStepFunction", "ToolStepFunction", "FinishTurnFunction"):
        assert _timeout(template, function_id) < EXPRESS_LIMIT_SECONDS, function_id
    # The deadline, then one round that may call tools, its tools, the tools-off wrap-up round
    # (docs/harness.md) and the finish: all inside the execution (retries aside).
    wall_clock = float(
        template["Globals"]["Function"]["Environment"]["Variables"]["TURNKEEP_WALL_CLOCK_SECONDS"]
    )
    model = _timeout(template, "ModelStepFunction")
    tools = _timeout(template, "ToolStepFunction")
    finish = _timeout(template, "FinishTurnFunction")
    assert wall_clock + model + tools + model + finish <= definition["TimeoutSeconds"]


def test_a_standard_deployment_keeps_its_long_timeouts() -> None:
    template = _rendered("STANDARD")
    _id, machine = _machine(template)
    assert machine["Type"] == "STANDARD"
    assert machine["DefinitionUri"] == "statemachine/turn.asl.json"
    assert _timeout(template, "ModelStepFunction") == 300
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert env["TURNKEEP_WALL_CLOCK_SECONDS"] == "300"


def test_the_express_definition_has_no_task_token_wait_and_fails_a_call_awaiting_approval() -> None:
    text = EXPRESS.read_text(encoding="utf-8")
    assert "waitForTaskToken" not in text
    assert "$$.Task.Token" not in text
    tools = json.loads(text)["States"]["RunTools"]["ItemProcessor"]["States"]
    [rule] = [
        r
        for r in tools["ToolAwaitsApproval"]["Choices"]
        if r["StringEquals"] == "awaiting_approval"
    ]
    failed = tools[rule["Next"]]
    assert failed["Type"] == "Fail"
    assert failed["Error"] == "ApprovalRequiresStandardWorkflow"
    # The standard definition does wait (the approvals state machine tests run it).
    assert "waitForTaskToken" in STANDARD.read_text(encoding="utf-8")


@pytest.mark.parametrize("workflow_type", ["STANDARD", "EXPRESS"])
def test_every_function_is_told_the_deployed_workflow_type(workflow_type: str) -> None:
    template = _rendered(workflow_type)
    for function_id in ("ToolStepFunction", "ApiFunction", "ModelStepFunction"):
        env = declared_environment(template, function_id)
        deployed = resolve(env["TURNKEEP_WORKFLOW_TYPE"], {"WorkflowType": workflow_type})
        assert deployed == workflow_type, function_id


@pytest.mark.parametrize(("workflow_type", "level"), [("STANDARD", "ERROR"), ("EXPRESS", "ALL")])
def test_executions_log_to_a_retained_log_group_the_state_machine_may_deliver_to(
    workflow_type: str, level: str
) -> None:
    template = _rendered(workflow_type)
    logical_id, machine = _machine(template)
    logging = machine["Logging"]
    assert logging["Level"] == level
    assert logging["IncludeExecutionData"] is True
    [destination] = logging["Destinations"]
    group_arn = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]
    group_id = group_arn["Fn::GetAtt"].split(".")[0]
    group = template["Resources"][group_id]
    assert group["Type"] == "AWS::Logs::LogGroup"
    assert group["Properties"]["RetentionInDays"] == {"Ref": "ExecutionLogRetentionDays"}
    actions = {
        action
        for policy in machine["Policies"]
        if isinstance(policy, dict) and "Statement" in policy
        for statement in policy["Statement"]
        for action in statement["Action"]
    }
    assert {"logs:CreateLogDelivery", "logs:PutResourcePolicy"} <= actions
    # The API starts executions of the machine that exists.
    api_env = declared_environment(template, "ApiFunction")
    assert api_env["TURNKEEP_STATE_MACHINE_ARN"] == {"Ref": logical_id}


def test_an_unknown_workflow_type_is_not_a_deployable_value() -> None:
    parameter = load_template()["Parameters"]["WorkflowType"]
    assert parameter["AllowedValues"] == ["STANDARD", "EXPRESS"]
    assert parameter["Default"] == "STANDARD"


@pytest.mark.parametrize(("workflow_type", "wall_clock"), [("STANDARD", 300), ("EXPRESS", 60)])
def test_the_deployed_environment_gives_each_function_the_types_deadline_and_type(
    workflow_type: str, wall_clock: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Through the settings the handlers build: a misspelt variable would leave the default.
    template = load_template()
    refs = {name: str(spec.get("Default", "x")) for name, spec in template["Parameters"].items()}
    refs |= {"WorkflowType": workflow_type, "SessionTable": "t", "ProgressBucket": "b"}
    refs |= {"TurnStateMachine": "m", "TurnExpressStateMachine": "m", "AWS::Region": "us-east-1"}
    refs |= {"WebSocketApi": "ws", "AWS::URLSuffix": "amazonaws.com"}
    refs |= {"AWS::Partition": "aws", "AWS::AccountId": "123456789012", "AWS::StackName": "s"}
    for function_id in ("ApiFunction", "ModelStepFunction", "ToolStepFunction"):
        for name in list(os.environ):
            if name.startswith("TURNKEEP_"):
                monkeypatch.delenv(name)
        for name, value in deployed_environment(template, function_id, refs).items():
            monkeypatch.setenv(name, value)
        limits = limits_from_settings(TurnkeepSettings())
        assert limits.wall_clock_seconds == wall_clock, function_id
        assert limits.workflow_type == workflow_type, function_id
