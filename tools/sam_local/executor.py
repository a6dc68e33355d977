"""Run the turn state machine for `sam local`: every execution the API starts (in the moto
container) is executed by moto's Step Functions interpreter in this process, on the template's
own ASL definition, and each Task invokes its function through `sam local start-lambda`.

Why here: a container cannot reach a process on the host, and start-lambda runs on the host.
So this process polls the container's Step Functions API (through its port published on
127.0.0.1) for new executions and runs each one locally, under the same name and input. The
container's execution record stays RUNNING (it is only the launch record: the API reads turn
state from DynamoDB); outcomes are kept here (`outcomes()`). The task tokens those executions
hand out (an approval wait, a sub-agent's child-turn wait) come back from the functions through
the Step Functions relay (sfn_relay.py), whose callbacks this process delivers to them.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.exceptions
import httpx

from tools.sam_local.lambda_errors import (
    TaskFailure,
    TaskResult,
    connection_failure,
    outcome,
)

log = logging.getLogger("sam_local.executor")

ACCOUNT = "123456789012"  # moto's default account: ARNs the API and the tooling agree on
REGION = "us-east-1"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/turnkeep-sam-local"


def function_arn(function_id: str) -> str:
    """The ARN a Task resource names for the function of logical id `function_id`."""
    return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function_id}"


def substitute(definition: str, wiring: dict[str, str]) -> str:
    """The ASL with each `${Placeholder}` replaced by its function's ARN."""
    for placeholder, function_id in wiring.items():
        definition = definition.replace("${" + placeholder + "}", function_arn(function_id))
    if "${" in definition:
        raise ValueError("the state machine definition has a substitution the template lacks")
    return definition


class StartLambda:
    """Invokes functions through `sam local start-lambda` (Lambda's Invoke API shape)."""

    def __init__(self, base_url: str, timeout: float = 330.0) -> None:
        # Above the longest function timeout (model step: 300 s), so start-lambda reports it.
        self._client = httpx.Client(base_url=base_url, timeout=timeout)
        self._lock = threading.Lock()
        self.calls: list[tuple[str, str | None, str]] = []
        """(function id, payload's op_id, outcome: "ok" or the error name), in call order."""

    def invoke(self, function_id: str, payload: bytes) -> TaskResult | TaskFailure:
        """One synchronous invocation, mapped to what Step Functions would see."""
        try:
            answer = self._client.post(
                f"/2015-03-31/functions/{function_id}/invocations", content=payload
            )
            result = outcome(answer.status_code, dict(answer.headers), answer.content)
        except httpx.HTTPError as exc:
            result = connection_failure(f"start-lambda unreachable: {exc}")
        self._record(function_id, payload, result)
        return result

    def calls_for(self, op_id: str) -> list[tuple[str, str]]:
        """(function id, outcome) of the invocations whose payload named `op_id`."""
        with self._lock:
            return [(f, result) for f, op, result in self.calls if op == op_id]

    def _record(self, function_id: str, payload: bytes, result: TaskResult | TaskFailure) -> None:
        try:
            parsed = json.loads(payload)
            op_id = parsed.get("op_id") if isinstance(parsed, dict) else None
        except ValueError:
            op_id = None
        name = result.error if isinstance(result, TaskFailure) else "ok"
        with self._lock:
            self.calls.append((function_id, op_id, name))

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()


@dataclass
class Execution:
    """One execution run here: its name, input and (once ended) outcome."""

    name: str
    input: dict[str, Any]
    local_arn: str
    status: str = "RUNNING"
    output: Any = None
    error: str | None = None
    cause: str | None = None


Invoker = Callable[[str, bytes], TaskResult | TaskFailure]


def _route_lambda_invocations(invoke: Invoker) -> Callable[[], None]:
    """Patch moto's Docker-free Lambda backend so each invocation goes to `invoke`; returns
    the undo. A failure is answered as Lambda answers one (function error + error payload)."""
    from moto.awslambda_simple.models import LambdaSimpleBackend

    original = LambdaSimpleBackend.invoke

    def routed(  # noqa: PLR0917 - moto's signature
        self: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response: Any
    ) -> bytes:
        name = function_name.rsplit(":", 1)[-1]  # an ARN or a bare name
        raw = body if isinstance(body, bytes) else (body or "{}").encode()
        result = invoke(name, raw)
        if isinstance(result, TaskFailure):
            response["x-amz-function-error"] = "Unhandled"
            payload = json.dumps(result.payload()).encode()
        else:
            payload = json.dumps(result.value).encode()
        response["Content-Length"] = str(len(payload))
        return payload

    LambdaSimpleBackend.invoke = routed  # type: ignore[method-assign,assignment]

    def undo() -> None:
        LambdaSimpleBackend.invoke = original  # type: ignore[method-assign]

    return undo


class LocalExecutor:
    """Polls the container's executions of one state machine and runs each one here."""

    def __init__(
        self,
        *,
        remote_endpoint: str,
        remote_machine_arn: str,
        definition: str,
        function_ids: list[str],
        invoke: Invoker,
        poll_seconds: float = 0.2,
        callbacks_url: str = "",
    ) -> None:
        self._remote = boto3.session.Session().client(
            "stepfunctions",
            endpoint_url=remote_endpoint,
            region_name=REGION,
            aws_access_key_id="sam-local",
            aws_secret_access_key="sam-local",
        )
        self._remote_machine = remote_machine_arn
        self._definition = definition
        self._function_ids = function_ids
        self._invoke = invoke
        self._poll = poll_seconds
        self._callbacks_url = callbacks_url
        self.callbacks: list[tuple[str, str]] = []
        """(operation, outcome: "delivered" or the local error code) of each relayed callback."""
        self._executions: dict[str, Execution] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="sam-local-executor", daemon=True)

    def start(self) -> None:
        """Start polling (returns once the local state machine exists)."""
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the local Step Functions interpreter did not start")
        if self._failure is not None:
            raise RuntimeError(f"executor failed: {self._failure}") from self._failure

    def stop(self) -> None:
        """Stop polling and the interpreter (running executions are abandoned)."""
        self._stop.set()
        self._thread.join(30)

    def outcomes(self) -> dict[str, Execution]:
        """Executions seen so far, by name (the API names them by operation id)."""
        with self._lock:
            return dict(self._executions)

    def wait(self, name: str, timeout: float) -> Execution:
        """The execution `name` once it has ended (raises TimeoutError otherwise)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._failure is not None:
                raise RuntimeError(f"executor failed: {self._failure}") from self._failure
            found = self.outcomes().get(name)
            if found is not None and found.status != "RUNNING":
                return found
            time.sleep(0.1)
        raise TimeoutError(f"execution {name} did not end within {timeout:.0f} s")

    def _run(self) -> None:
        from moto import mock_aws

        config: Any = {
            "stepfunctions": {"execute_state_machine": True},
            "lambda": {"use_docker": False},
        }
        mock = mock_aws(config=config)
        mock.start()
        undo = _route_lambda_invocations(self._invoke)
        try:
            local = self._deploy_locally()
            self._ready.set()
            while not self._stop.is_set():
                self._adopt_new_executions(local)
                self._deliver_callbacks(local)
                self._collect_outcomes(local)
                self._stop.wait(self._poll)
        except BaseException as exc:  # surfaced by start()/wait(): never a silent death
            log.exception("executor stopped")
            self._failure = exc
            self._ready.set()
        finally:
            undo()
            mock.stop()

    def _deploy_locally(self) -> tuple[Any, str]:
        boto3.client("iam", region_name=REGION).create_role(
            RoleName=ROLE_ARN.rsplit("/", 1)[-1],
            AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
        )
        awslambda = boto3.client("lambda", region_name=REGION)
        for function_id in self._function_ids:
            awslambda.create_function(
                FunctionName=function_id,
                Runtime="python3.12",
                Role=ROLE_ARN,
                Handler="app.handler",
                Code={"ZipFile": _placeholder_zip()},  # never run: invocations are routed
            )
        sfn = boto3.client("stepfunctions", region_name=REGION)
        arn = sfn.create_state_machine(
            name="turnkeep-turn-local", definition=self._definition, roleArn=ROLE_ARN
        )["stateMachineArn"]
        return sfn, arn

    def _adopt_new_executions(self, local: tuple[Any, str]) -> None:
        sfn, machine = local
        pages = self._remote.get_paginator("list_executions").paginate(
            stateMachineArn=self._remote_machine, statusFilter="RUNNING"
        )
        for page in pages:
            for summary in page["executions"]:
                name = summary["name"]
                with self._lock:
                    if name in self._executions:
                        continue
                described = self._remote.describe_execution(executionArn=summary["executionArn"])
                started = sfn.start_execution(
                    stateMachineArn=machine, name=name, input=described["input"]
                )
                log.info("execution %s: started", name)
                with self._lock:
                    self._executions[name] = Execution(
                        name, json.loads(described["input"]), started["executionArn"]
                    )

    def _deliver_callbacks(self, local: tuple[Any, str]) -> None:
        """Hand each callback the relay saw since the last poll to the local interpreter."""
        if not self._callbacks_url:
            return
        answer = httpx.get(
            self._callbacks_url, params={"after": len(self.callbacks)}, timeout=30
        ).raise_for_status()
        sfn, _machine = local
        for callback in answer.json()["callbacks"]:
            self.callbacks.append((callback["operation"], deliver_callback(sfn, callback)))

    def _collect_outcomes(self, local: tuple[Any, str]) -> None:
        sfn, _machine = local
        for execution in self.outcomes().values():
            if execution.status != "RUNNING":
                continue
            described = sfn.describe_execution(executionArn=execution.local_arn)
            if described["status"] == "RUNNING":
                continue
            with self._lock:
                execution.status = described["status"]
                execution.output = json.loads(described.get("output") or "null")
                execution.error = described.get("error")
                execution.cause = described.get("cause")
            log.info("execution %s: %s", execution.name, execution.status)


def deliver_callback(sfn: Any, callback: dict[str, Any]) -> str:
    """Send one relayed callback (`operation`, `request`) to `sfn`; "delivered", or the error
    code Step Functions answered (a token no wait holds any more, as on AWS, is no failure of
    the run: the function that sent it got a 200 already)."""
    operation, request = callback["operation"], callback["request"]
    token = request.get("taskToken", "")
    try:
        if operation == "SendTaskSuccess":
            sfn.send_task_success(taskToken=token, output=request.get("output", "{}"))
        elif operation == "SendTaskFailure":
            fields = {k: request[k] for k in ("error", "cause") if k in request}
            sfn.send_task_failure(taskToken=token, **fields)
        else:
            sfn.send_task_heartbeat(taskToken=token)
    except botocore.exceptions.ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", "ClientError"))
        log.info("callback %s: %s", operation, code)
        return code
    log.info("callback %s: delivered", operation)
    return "delivered"


def _placeholder_zip() -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    return event\n")
    return buffer.getvalue()
