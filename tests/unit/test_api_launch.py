"""Launchers: the local in-process orchestrator and the Step Functions starter."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from turnkeep.api import LaunchError, LocalLauncher, StepFunctionsLauncher
from turnkeep.harness import StartTurnInput, new_op_id, start_turn, turn_result
from turnkeep.providers.base import ModelProvider, ModelRequest, StreamEvent
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime.build import Runtime, build_runtime
from turnkeep.runtime.settings import TurnkeepSettings

REGION = "eu-west-1"


@dataclass
class GatedProvider(ModelProvider):
    """The scripted model, held at the start of every stream until `gate` opens."""

    gate: threading.Event = field(default_factory=threading.Event)
    calls: int = 0
    name: str = "gated"

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        self.calls += 1
        assert self.gate.wait(30), "gate never opened"
        yield from ScriptedProvider().stream(request)


def _runtime(name: str, provider: ModelProvider) -> Runtime:
    settings = TurnkeepSettings(storage_url=f"memory://{name}", envelope_url=f"memory://{name}")
    return build_runtime(settings, provider=provider)


def _started(runtime: Runtime, session_id: str, text: str = "hello") -> str:
    if runtime.envelopes.get(session_id) is None:
        runtime.envelopes.create(session_id, "u1")
    op = new_op_id()
    start_turn(
        runtime.deps, StartTurnInput(session_id=session_id, op_id=op, user_id="u1", text=text)
    )
    return op


def test_local_launcher_runs_a_started_turn_to_its_end_in_the_background() -> None:
    runtime = _runtime("launch-local-1", ScriptedProvider())
    launcher = LocalLauncher(runtime.deps, workers=2)
    try:
        op = _started(runtime, "s1", "remember we chose SQLite")
        launcher.launch("s1", op)
        assert launcher.wait_idle(30)
        result = turn_result(runtime.deps, "s1", op)
        assert result is not None
        assert result.status == "completed"
        envelope = runtime.envelopes.get("s1")
        assert envelope is not None
        assert envelope.working_notes == "we chose SQLite"
    finally:
        launcher.shutdown()
        runtime.close()


def test_local_launcher_drives_an_operation_once_when_launched_twice() -> None:
    provider = GatedProvider()
    runtime = _runtime("launch-local-2", provider)
    launcher = LocalLauncher(runtime.deps, workers=2)
    try:
        op = _started(runtime, "s2")
        launcher.launch("s2", op)
        launcher.launch("s2", op)
        assert launcher.pending() == 1
        provider.gate.set()
        assert launcher.wait_idle(30)
        assert provider.calls == 1
    finally:
        provider.gate.set()
        launcher.shutdown()
        runtime.close()


def test_local_launcher_refuses_more_than_max_pending_turns() -> None:
    provider = GatedProvider()
    runtime = _runtime("launch-local-3", provider)
    launcher = LocalLauncher(runtime.deps, workers=1, max_pending=1)
    try:
        first = _started(runtime, "s3a")
        launcher.launch("s3a", first)
        second = _started(runtime, "s3b")
        with pytest.raises(LaunchError, match="already holds 1 turns"):
            launcher.launch("s3b", second)
        provider.gate.set()
        assert launcher.wait_idle(30)
        launcher.launch("s3b", second)  # room again
        assert launcher.wait_idle(30)
        result = turn_result(runtime.deps, "s3b", second)
        assert result is not None
        assert result.status == "completed"
    finally:
        provider.gate.set()
        launcher.shutdown()
        runtime.close()


def test_local_launcher_refuses_launches_after_shutdown() -> None:
    runtime = _runtime("launch-local-4", ScriptedProvider())
    launcher = LocalLauncher(runtime.deps)
    launcher.shutdown()
    with pytest.raises(LaunchError, match="shut down"):
        launcher.launch("s4", "op-x")
    runtime.close()


@mock_aws
def test_step_functions_launcher_starts_one_execution_named_by_the_operation() -> None:
    client = boto3.client("stepfunctions", region_name=REGION)
    arn = client.create_state_machine(
        name="turn",
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
        roleArn="arn:aws:iam::123456789012:role/turn",
    )["stateMachineArn"]
    launcher = StepFunctionsLauncher(client, arn)
    launcher.launch("sess-1", "op-abc")
    launcher.launch("sess-1", "op-abc")  # a retried launch of the same operation
    executions = client.list_executions(stateMachineArn=arn)["executions"]
    assert [e["name"] for e in executions] == ["op-abc"]
    described = client.describe_execution(executionArn=executions[0]["executionArn"])
    assert json.loads(described["input"]) == {"session_id": "sess-1", "op_id": "op-abc", "round": 0}


def test_step_functions_launcher_treats_execution_already_exists_as_success() -> None:
    client = boto3.client("stepfunctions", region_name=REGION, aws_access_key_id="x",
                          aws_secret_access_key="x")  # fmt: skip
    with Stubber(client) as stub:
        stub.add_client_error("start_execution", service_error_code="ExecutionAlreadyExists")
        StepFunctionsLauncher(client, "arn:aws:states:eu-west-1:1:stateMachine:t").launch(
            "s", "op-1"
        )
        stub.add_client_error("start_execution", service_error_code="StateMachineDoesNotExist")
        with pytest.raises(client.exceptions.StateMachineDoesNotExist):
            StepFunctionsLauncher(client, "arn:aws:states:eu-west-1:1:stateMachine:t").launch(
                "s", "op-2"
            )


def test_step_functions_launcher_rejects_an_operation_id_that_is_no_execution_name() -> None:
    client = boto3.client("stepfunctions", region_name=REGION, aws_access_key_id="x",
                          aws_secret_access_key="x")  # fmt: skip
    launcher = StepFunctionsLauncher(client, "arn:aws:states:eu-west-1:1:stateMachine:t")
    with Stubber(client):  # any real call would fail the stubber
        with pytest.raises(LaunchError, match="execution name"):
            launcher.launch("s", "op:with:colons")
        with pytest.raises(LaunchError, match="execution name"):
            launcher.launch("s", "o" * 81)


@mock_aws
def test_a_launcher_with_a_client_factory_builds_its_client_on_the_first_launch_only() -> None:
    client = boto3.client("stepfunctions", region_name=REGION)
    arn = client.create_state_machine(
        name="turn",
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
        roleArn="arn:aws:iam::123456789012:role/turn",
    )["stateMachineArn"]
    built: list[object] = []

    def factory() -> object:
        built.append(client)
        return client

    launcher = StepFunctionsLauncher(None, arn, client_factory=factory)  # type: ignore[arg-type]
    assert built == []  # a container that starts no turn never builds the client
    launcher.launch("sess-1", "op-1")
    launcher.launch("sess-1", "op-2")
    assert len(built) == 1
    names = sorted(e["name"] for e in client.list_executions(stateMachineArn=arn)["executions"])
    assert names == ["op-1", "op-2"]


def test_a_launcher_needs_exactly_one_of_a_client_and_a_client_factory() -> None:
    client = boto3.client("stepfunctions", region_name=REGION, aws_access_key_id="x",
                          aws_secret_access_key="x")  # fmt: skip
    arn = "arn:aws:states:eu-west-1:1:stateMachine:t"
    with pytest.raises(ValueError, match="exactly one"):
        StepFunctionsLauncher(None, arn)
    with pytest.raises(ValueError, match="exactly one"):
        StepFunctionsLauncher(client, arn, client_factory=lambda: client)


def test_a_decision_while_the_round_still_runs_is_not_missed_by_the_local_launcher() -> None:
    # The round has a call waiting for approval and a slow call still running; the decision's
    # launch arrives while the driver is busy. The driver must go round again, else the turn
    # would stay paused with its decision unapplied.
    from pydantic import BaseModel

    from turnkeep.harness.approvals import decide
    from turnkeep.harness.state import load_call
    from turnkeep.tools.base import Tool, ToolContext, ToolResult
    from turnkeep.tools.builtin import builtin_tools

    class NoArgs(BaseModel):
        pass

    release = threading.Event()

    def slow(_args: NoArgs, _ctx: ToolContext) -> ToolResult:
        assert release.wait(30)
        return ToolResult("slow done")

    runtime = _runtime("launch-local-approval", ScriptedProvider())
    runtime.deps.tools = lambda _s, _u: [
        *builtin_tools(),
        Tool("slow", "waits", NoArgs, slow, isolation="in_process"),
    ]
    launcher = LocalLauncher(runtime.deps, workers=2)
    try:
        runtime.envelopes.create("s9", "u1")
        runtime.envelopes.put_host_meta("s9", "u1", {"toolApproval": "echo"})
        op = _started(runtime, "s9", 'call echo {"text": "a"}\ncall slow {}')
        launcher.launch("s9", op)
        call_id = "call_u1_r0_0"

        def parked() -> bool:
            storage = runtime.deps.open_storage("s9")
            try:
                call = load_call(storage, op, call_id)
            finally:
                storage.close()
            return call is not None and call.phase == "awaiting"

        deadline = time.monotonic() + 30
        while not parked():
            assert time.monotonic() < deadline, "the call never waited"
            time.sleep(0.01)
        decide(runtime.deps, "s9", op, call_id, user_id="u1", decision="approve")
        launcher.launch("s9", op)  # what the approval route does; the driver is still busy
        release.set()
        assert launcher.wait_idle(30)
        result = turn_result(runtime.deps, "s9", op)
        assert result is not None
        assert result.status == "completed"
    finally:
        release.set()
        launcher.shutdown()
        runtime.close()
