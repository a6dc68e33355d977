"""Static checks of the turn state machine definitions (statemachine/turn.asl.json for
WorkflowType STANDARD, turn.express.asl.json for EXPRESS) against template.yaml rendered for
that type and the handlers: what the moto executions in tests/integration/test_state_machine.py
cannot reach in a fast test (which errors each Task retries, every error name a Retry names,
the history bound)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest

from tests.support.aws_template import load_template
from tools.sam_local.template import STATE_MACHINE, render
from turnkeep.aws_lambda import step_events
from turnkeep.harness import HarnessLimits
from turnkeep.harness.io import NextAction
from turnkeep.runtime.settings import TurnkeepSettings

ROOT = Path(__file__).resolve().parents[2]
AWS_ERROR_PREFIXES = ("States.", "Lambda.", "Sandbox.")
WORKFLOW_TYPES = pytest.mark.parametrize("workflow_type", ["STANDARD", "EXPRESS"])


def _rendered(workflow_type: str) -> dict[str, Any]:
    return render(load_template(), {"WorkflowType": workflow_type})


def _machine(workflow_type: str) -> dict[str, Any]:
    [machine] = [
        r["Properties"]
        for r in _rendered(workflow_type)["Resources"].values()
        if r["Type"] == STATE_MACHINE
    ]
    assert machine["Type"] == workflow_type
    return machine


def _definition(workflow_type: str = "STANDARD") -> dict[str, Any]:
    uri = _machine(workflow_type)["DefinitionUri"]
    data: dict[str, Any] = json.loads((ROOT / uri).read_text(encoding="utf-8"))
    return data


def _states(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in states.items():
        yield name, state
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            yield from _states(processor["States"])


def _tasks(workflow_type: str) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(state name, state, function properties) of every Task, through the substitutions,
    functions as `workflow_type` renders them (Timeout always set: the Globals' by default)."""
    template = _rendered(workflow_type)
    machine = _machine(workflow_type)
    for name, state in _states(_definition(workflow_type)["States"]):
        if state["Type"] != "Task":
            continue
        # A Lambda service integration (the approval wait) names its function in Parameters.
        resource = (
            state["Parameters"]["FunctionName"]
            if state["Resource"].startswith("arn:aws:states:::lambda:invoke")
            else state["Resource"]
        )
        placeholder = resource.removeprefix("${").removesuffix("}")
        logical_id = machine["DefinitionSubstitutions"][placeholder]["Fn::GetAtt"].split(".")[0]
        function = {"Timeout": template["Globals"]["Function"]["Timeout"]}
        yield name, state, function | template["Resources"][logical_id]["Properties"]


def _retrier(state: dict[str, Any], error: str) -> dict[str, Any] | None:
    """The retrier Step Functions applies to `error` (the first that names it, or States.ALL)."""
    for retrier in state.get("Retry", []):
        if error in retrier["ErrorEquals"] or "States.ALL" in retrier["ErrorEquals"]:
            return dict(retrier)
    return None


@WORKFLOW_TYPES
def test_every_task_retries_transient_step_failures(workflow_type: str) -> None:
    for name, state, _function in _tasks(workflow_type):
        for error in (
            "RetryableStepError",
            "Lambda.ServiceException",
            "Lambda.TooManyRequestsException",
        ):
            assert _retrier(state, error) is not None, (name, error)


@WORKFLOW_TYPES
def test_a_timed_out_model_or_tool_step_is_delivered_again_for_the_harness_to_recover(
    workflow_type: str,
) -> None:
    # A redelivery records a round that died mid-stream as interrupted and settles a started
    # non-replay-safe tool call as interrupted: the turn goes on instead of failing outright.
    steps = {name: state for name, state, _f in _tasks(workflow_type)}
    for name in ("ModelStep", "ToolStep"):
        retrier = _retrier(steps[name], "Sandbox.Timedout")
        assert retrier is not None, name
        assert retrier["MaxAttempts"] >= 1


@WORKFLOW_TYPES
def test_every_retried_error_name_is_the_class_name_a_handler_raises(workflow_type: str) -> None:
    # Lambda reports an unhandled exception's class name as errorType: a renamed class would
    # silently stop matching its Retry.
    raisable = {step_events.RetryableStepError.__name__}
    for name, state, _function in _tasks(workflow_type):
        for retrier in state.get("Retry", []):
            for error in retrier["ErrorEquals"]:
                if not error.startswith(AWS_ERROR_PREFIXES):
                    assert error in raisable, (name, error)


@WORKFLOW_TYPES
def test_the_route_handles_every_next_action_the_model_step_can_answer(workflow_type: str) -> None:
    states = _definition(workflow_type)["States"]
    route = states["Route"]
    handled = {c["StringEquals"] for c in route["Choices"] if c["Variable"] == "$.model.next"}
    assert handled == set(get_args(NextAction))
    default = states[route["Default"]]
    assert default["Next"] == "FailTurn"  # an unknown action is a wiring bug: fail honestly


@WORKFLOW_TYPES
def test_every_catch_keeps_the_execution_input_and_ends_in_fail_turn(workflow_type: str) -> None:
    states = _definition(workflow_type)["States"]
    for name, state in states.items():
        if state["Type"] not in {"Task", "Map"} or name.startswith("FailTurn"):
            continue
        catchers = state.get("Catch", [])
        assert [c["ErrorEquals"] for c in catchers] == [["States.ALL"]], name
        # ResultPath below the root: session_id and op_id survive for FailTurn's Parameters.
        assert catchers[0]["ResultPath"] == "$.caught", name
        assert catchers[0]["Next"] == "FailTurn", name
    assert states["FailTurn"]["Parameters"]["caught.$"] == "$.caught"


def test_a_turn_within_the_default_caps_fits_the_execution_history_limit() -> None:
    # A Standard execution fails (uncatchably, leaving the turn running) past 25,000 history
    # events. Per round: the model task 5, Route 2, NextRound 2, the Map 4 + 7 per tool call.
    template = load_template()
    environments = [template["Globals"]["Function"]["Environment"]["Variables"]] + [
        r["Properties"].get("Environment", {}).get("Variables", {})
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Serverless::Function"
    ]
    assert not any("TURNKEEP_MAX_STEPS" in env for env in environments)  # else bound it here
    max_steps = TurnkeepSettings().limits.max_steps
    calls = HarnessLimits.model_fields["max_tool_calls_per_round"].default
    events = max_steps * (13 + 7 * calls) + 20
    assert events * 2 <= 25_000  # room for retries (3 events each) and the terminal steps


def test_the_approval_wait_runs_on_the_tool_step_function_and_times_out_into_a_denial() -> None:
    tool_states = _definition()["States"]["RunTools"]["ItemProcessor"]["States"]
    wait = tool_states["WaitForApproval"]

    assert wait["Resource"] == "arn:aws:states:::lambda:invoke.waitForTaskToken"
    assert wait["Parameters"]["FunctionName"] == "${ToolStepFunctionArn}"
    assert wait["Parameters"]["Payload"]["task_token.$"] == "$$.Task.Token"
    assert wait["TimeoutSecondsPath"] == "$.tool.approval_timeout_seconds"
    [timeout] = wait["Catch"]
    assert timeout["ErrorEquals"] == ["States.Timeout"]
    assert tool_states[timeout["Next"]]["Result"] == "timed_out"
    assert tool_states[wait["Next"]]["Next"] == "ToolStep"
    # The tool step after a wait learns how it ended (a timeout records the call as denied).
    assert tool_states["ToolStep"]["Parameters"]["approval.$"] == "$.approval"
    assert tool_states[timeout["Next"]]["ResultPath"] == "$.approval"


def test_the_execution_timeout_outlasts_a_default_approval_wait() -> None:
    # An execution that times out cannot be caught: it must outlast the wait (plus the turn).
    timeout = _definition()["TimeoutSeconds"]
    approval = HarnessLimits.model_fields["approval_timeout_seconds"].default
    wall_clock = HarnessLimits.model_fields["wall_clock_seconds"].default
    assert timeout > approval + wall_clock + 3600


def _tool_states(workflow_type: str) -> dict[str, Any]:
    states: dict[str, Any] = _definition(workflow_type)["States"]["RunTools"]["ItemProcessor"][
        "States"
    ]
    return states


def test_a_sub_agent_call_waits_for_its_child_turn_on_a_task_token() -> None:
    states = _tool_states("STANDARD")
    route = states["ToolAwaitsApproval"]["Choices"]
    assert {"Variable": "$.tool.status", "StringEquals": "child_turn", "Next": "RunChildTurn"} in (
        route
    )
    child = states["RunChildTurn"]
    # The wait hands the tool step function its token (it starts the child's execution and
    # returns): no Lambda runs while the child does.
    assert child["Resource"] == "arn:aws:states:::lambda:invoke.waitForTaskToken"
    assert child["Parameters"]["FunctionName"] == "${ToolStepFunctionArn}"
    assert child["Parameters"]["Payload"]["task_token.$"] == "$$.Task.Token"
    assert child["Parameters"]["Payload"]["child"] is True
    assert child["TimeoutSecondsPath"] == "$.tool.child_wait_seconds"
    # A timed-out or failed wait still reaches the tool step, which ends the child honestly.
    assert [c["ErrorEquals"] for c in child["Catch"]] == [["States.ALL"]]
    assert child["Catch"][0]["Next"] == child["Next"] == "ChildTurnEnded"
    assert states["ChildTurnEnded"]["Result"] == "child_ended"
    assert states["ChildTurnEnded"]["Next"] == "ToolStep"
    template = _rendered("STANDARD")
    machine = _machine("STANDARD")
    assert machine["Name"] == {"Fn::Sub": "${AWS::StackName}-turn"}
    tool_env = template["Resources"]["ToolStepFunction"]["Properties"]["Environment"]["Variables"]
    own = tool_env["TURNKEEP_STATE_MACHINE_ARN"]["Fn::Sub"]
    assert own.endswith(":stateMachine:${AWS::StackName}-turn")
    assert template["Globals"]["Function"]["Environment"]["Variables"]["TURNKEEP_CHILD_TURNS"] == (
        "execution"
    )


def test_under_express_a_child_turn_cannot_be_waited_for_and_fails_clearly() -> None:
    states = _tool_states("EXPRESS")
    assert "RunChildTurn" not in states
    route = {c["StringEquals"]: c["Next"] for c in states["ToolAwaitsApproval"]["Choices"]}
    assert states[route["child_turn"]]["Error"] == "SubAgentRequiresStandardWorkflow"
    assert "waitForTaskToken" not in json.dumps(_definition("EXPRESS"))
