"""The turn state machine of template.yaml under moto, for the integration tests: the stack
deployed (moto's Step Functions interpreter executing the definition, invoking the real handlers
of functions/turn_steps/ against DynamoDB and S3), a turn run through it, and its end checked.

Function names, handlers and ARN substitutions are read from template.yaml, so a test fails if
the template's wiring and the definition drift apart. The `deployed` fixture
(tests/integration/conftest.py) gives each test the stack rendered for both values of the
template's WorkflowType, moto executing an EXPRESS machine as it does a STANDARD one.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

from tests.support.aws_template import load_template
from tests.support.lambda_env import lambda_deployment
from tests.support.lambda_host import (
    ROOT,
    FakeContext,
    LambdaHost,
    dummy_zip,
    hosted_lambdas,
    load_function_module,
)
from tools.sam_local.template import STATE_MACHINE, render
from turnkeep.aws_lambda import container
from turnkeep.harness import StartTurnInput, start_turn
from turnkeep.harness.io import AttachmentRef
from turnkeep.harness.state import op_scope

RETRY_TIME_SCALE = 0.05
"""moto waits out each Retry interval of the definition for real (2 s, 4 s, 8 s with jitter):
the tests wait that fraction of it. The attempts, their order and their inputs are unchanged;
each wait the definition asked for is recorded (`Deployed.retry_waits`)."""

TABLE = "turnkeep-sessions"
BUCKET = "turnkeep-progress"
USER = "user-1"


@dataclass
class Deployed:
    """The stack as moto holds it: clients, the state machine and the hosted handlers."""

    sfn: Any
    s3: Any
    state_machine_arn: str
    host: LambdaHost
    storage_url: str
    workflow_type: str
    template: dict[str, Any]  # rendered for workflow_type
    retry_waits: list[float] = field(default_factory=list)  # seconds, as the Retry asked

    @contextmanager
    def replaced(self, logical_id: str, handler: Callable[..., Any]) -> Iterator[None]:
        """Inside the block the hosted function `logical_id` runs `handler`; its own code after."""
        original = self.host.handlers[logical_id]
        self.host.handlers[logical_id] = handler
        try:
            yield
        finally:
            self.host.handlers[logical_id] = original


class _RetryClock:
    """The `time` moto's retrier sees: its waits recorded and shortened by RETRY_TIME_SCALE."""

    def __init__(self, waits: list[float]) -> None:
        self.waits = waits

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        time.sleep(seconds * RETRY_TIME_SCALE)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def machine_of(template: dict[str, Any]) -> dict[str, Any]:
    """The one state machine of a rendered template."""
    [machine] = [r for r in template["Resources"].values() if r["Type"] == STATE_MACHINE]
    return machine


def wiring_of(template: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Substitution name → (function logical id, handler attribute) from the template."""
    machine = machine_of(template)
    wiring: dict[str, tuple[str, str]] = {}
    for name, ref in machine["Properties"]["DefinitionSubstitutions"].items():
        logical_id = ref["Fn::GetAtt"].split(".")[0]
        props = template["Resources"][logical_id]["Properties"]
        assert props["CodeUri"].rstrip("/") == "functions/turn_steps"
        module, attribute = props["Handler"].split(".")
        assert module == "app"
        wiring[name] = (logical_id, attribute)
    return wiring


@contextmanager
def deploy(monkeypatch: pytest.MonkeyPatch, workflow_type: str, **env: str) -> Iterator[Deployed]:
    """The stack of template.yaml rendered for `workflow_type` under moto; `env` adds function
    environment variables."""
    storage_url = f"aws://?table={TABLE}&bucket={BUCKET}&prefix=tk"
    template = render(load_template(), {"WorkflowType": workflow_type})
    machine = machine_of(template)["Properties"]
    assert machine["Type"] == workflow_type
    with lambda_deployment(
        monkeypatch,
        TABLE,
        BUCKET,
        template=template,
        moto_config={
            "stepfunctions": {"execute_state_machine": True},
            "lambda": {"use_docker": False},
        },
        # Every stream event makes a frame: the scripted model answers within any interval,
        # and these executions must write (and retire) progress objects as a real stream does.
        TURNKEEP_FRAME_INTERVAL_MS="0",
        TURNKEEP_WORKFLOW_TYPE=workflow_type,
        **env,
    ):
        s3 = boto3.client("s3")
        role = boto3.client("iam").create_role(
            RoleName="turnkeep-test",
            AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
        )["Role"]["Arn"]
        awslambda = boto3.client("lambda")
        app = load_function_module("turn_steps")
        host = LambdaHost()
        substitutions: dict[str, str] = {}
        for name, (logical_id, attribute) in wiring_of(template).items():
            arn = awslambda.create_function(
                FunctionName=logical_id,
                Runtime="python3.12",
                Role=role,
                Handler=f"app.{attribute}",
                Code={"ZipFile": dummy_zip()},
            )["FunctionArn"]
            substitutions[name] = arn
            host.handlers[logical_id] = getattr(app, attribute)
        definition = (ROOT / machine["DefinitionUri"]).read_text(encoding="utf-8")
        for name, arn in substitutions.items():
            definition = definition.replace("${" + name + "}", arn)
        assert "${" not in definition
        sfn = boto3.client("stepfunctions")
        machine_arn = sfn.create_state_machine(
            name="turnkeep-turn", definition=definition, roleArn=role, type=workflow_type
        )["stateMachineArn"]
        assert sfn.describe_state_machine(stateMachineArn=machine_arn)["type"] == workflow_type
        container.reset_runtime()
        stack = Deployed(sfn, s3, machine_arn, host, storage_url, workflow_type, template)
        monkeypatch.setattr(retrier_decl, "time", _RetryClock(stack.retry_waits))
        with hosted_lambdas(host):
            yield stack


def run_turn(
    deployed: Deployed,
    session_id: str,
    text: str,
    *,
    model: str | None = "scripted",
    attachments: list[AttachmentRef] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Start a turn like the API does, run the execution to its end, return (op id, output)."""
    deps = container.runtime().deps
    if deps.envelopes.get(session_id) is None:
        deps.envelopes.create(session_id, USER)
    op_id = f"op-{len(deployed.host.calls)}-{time.monotonic_ns()}"
    start_turn(
        deps,
        StartTurnInput(
            session_id=session_id,
            op_id=op_id,
            user_id=USER,
            text=text,
            model=model,
            attachments=attachments or [],
        ),
    )
    execution = deployed.sfn.start_execution(
        stateMachineArn=deployed.state_machine_arn,
        name=op_id,
        input=json.dumps({"session_id": session_id, "op_id": op_id, "round": 0}),
    )["executionArn"]
    deadline = time.monotonic() + 60
    while True:
        described = deployed.sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert described["status"] == "SUCCEEDED", described
    return op_id, json.loads(described["output"])


def wait_for_executions(deployed: Deployed) -> None:
    """Wait until no execution of the state machine is running (bounded)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        running = deployed.sfn.list_executions(
            stateMachineArn=deployed.state_machine_arn, statusFilter="RUNNING"
        )["executions"]
        if not running:
            return
        time.sleep(0.05)
    raise AssertionError("an execution is still running")


def assert_ended(deployed: Deployed, session: str, op_id: str, status: str) -> None:
    """The turn ended `status`: its operation scope retired (no object left) and the envelope
    says so."""
    assert scope_objects(deployed, session, op_id) == []
    envelope = container.runtime().deps.envelopes.get(session)
    assert envelope is not None
    assert envelope.meta["turnStatus"] == status


def scope_objects(deployed: Deployed, session_id: str, op_id: str) -> list[str]:
    listed = deployed.s3.list_objects_v2(Bucket=BUCKET, Prefix=f"tk/sessions/{session_id}/")
    scope_id = op_scope(op_id).id
    return [o["Key"] for o in listed.get("Contents", []) if scope_id in o["Key"]]


def api_event(name: str, path: str, query: str = "", body: str | None = None) -> dict[str, Any]:
    sample = ROOT / "events" / "api" / f"{name}.json"
    event: dict[str, Any] = json.loads(sample.read_text(encoding="utf-8"))
    event["rawPath"] = path
    event["requestContext"]["http"]["path"] = path
    event["rawQueryString"] = query
    if body is not None:
        event["body"] = body
        event["headers"]["content-length"] = str(len(body.encode()))
    return event


SESSION = "sample-session"  # the sample events' session, owned by their `sub`

Call = Callable[[str, str, dict[str, Any] | None], tuple[int, Any]]


def api_caller(deployed: Deployed, monkeypatch: pytest.MonkeyPatch) -> Call:
    """Call the API Lambda of the stack as API Gateway would, as the sample events' user:
    `call(method, path, body)` -> (status, parsed body)."""
    monkeypatch.setenv("TURNKEEP_STATE_MACHINE_ARN", deployed.state_machine_arn)
    api = load_function_module("api")
    sample = api_event("start_turn", "/")

    def call(method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        event = copy.deepcopy(sample)
        path, _, query = path.partition("?")
        event["rawPath"] = event["requestContext"]["http"]["path"] = path
        event["rawQueryString"] = query
        event["requestContext"]["http"]["method"] = method
        if body is None:
            event["body"] = None
            event["headers"].pop("content-length", None)
        else:
            event["body"] = json.dumps(body)
            event["headers"]["content-length"] = str(len(event["body"].encode()))
        with deployed.host.acting_as("ApiFunction"):
            answer = api.handler(event, FakeContext(function_name="ApiFunction"))
        text = answer["body"]
        return int(answer["statusCode"]), json.loads(text) if text else None

    return call


def finished_execution(deployed: Deployed, turn: str) -> dict[str, Any]:
    execution = f"{deployed.state_machine_arn.replace(':stateMachine:', ':execution:')}:{turn}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        described: dict[str, Any] = deployed.sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            return described
        time.sleep(0.05)
    raise AssertionError("the execution did not end")


def tool_results(call: Call, turn: str) -> list[dict[str, Any]]:
    """The turn's own tool results (a sub-agent's child turn's are nested in: not these)."""
    page = call("GET", f"/sessions/{SESSION}/turns/{turn}/events?limit=100", None)[1]
    return [
        part
        for event in page["events"]
        if event.get("role") == "tool" and not event.get("nested")
        for part in event["parts"]
    ]
