"""The SAM local executor without Docker: a moto server process plays the container, a small
HTTP server on 127.0.0.1 answers exactly as `sam local start-lambda` does, and the template's
own definition runs in moto's interpreter. Retry and Catch must see the errors Step Functions
would raise, although start-lambda reports a raised handler without `x-amz-function-error`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import httpx
import pytest

from tools.sam_local import seed, sfn_relay
from tools.sam_local.executor import LocalExecutor, StartLambda, deliver_callback
from tools.sam_local.stack import free_port
from tools.sam_local.template import function_ids, load_template

# function id -> (status, headers, body) answered for each invocation payload
Answer = Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes]]


class FakeStartLambda:
    """Answers invocations like start-lambda; records (function, payload)."""

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict[str, Any]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                function = self.path.split("/")[3]
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.calls.append((function, payload))
                status, headers, body = fake.answers[function](payload)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def moto_process() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                httpx.get(f"{url}/moto-api/", timeout=1)
                break
            except httpx.HTTPError:
                threading.Event().wait(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def moto_server(moto_process: str) -> str:
    """The module's moto server, emptied."""
    httpx.post(f"{moto_process}/moto-api/reset", timeout=10).raise_for_status()
    return moto_process


def _run(
    moto_url: str, answers: dict[str, Answer], callbacks_url: str = ""
) -> tuple[Any, FakeStartLambda]:
    names = seed.LocalNames.from_env_file()
    definition = seed.create_resources(moto_url, names)
    fake = FakeStartLambda(answers)
    lambdas = StartLambda(fake.url, timeout=30)
    executor = LocalExecutor(
        remote_endpoint=moto_url,
        remote_machine_arn=names.state_machine_arn,
        definition=definition,
        function_ids=function_ids(load_template()),
        invoke=lambdas.invoke,
        poll_seconds=0.05,
        callbacks_url=callbacks_url,
    )
    executor.start()
    try:
        seed.client("stepfunctions", moto_url).start_execution(
            stateMachineArn=names.state_machine_arn,
            name="op-1",
            input=json.dumps({"session_id": "s-1", "op_id": "op-1", "round": 0}),
        )
        return executor.wait("op-1", 60), fake
    finally:
        executor.stop()
        lambdas.close()
        fake.close()


def _json(value: Any) -> tuple[int, dict[str, str], bytes]:
    return 200, {"Content-Type": "application/json"}, json.dumps(value).encode()


def _failed(payload: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    return _json({"session_id": payload["session_id"], "op_id": payload["op_id"],
                  "status": "failed"})  # fmt: skip


def test_a_handler_error_without_the_function_error_header_is_caught_into_fail_turn(
    moto_server: str,
) -> None:
    raised = {"errorType": "ValueError", "errorMessage": "model exploded", "stackTrace": []}
    execution, fake = _run(
        moto_server,
        {"ModelStepFunction": lambda _p: _json(raised), "FailTurnFunction": _failed},
    )

    assert execution.status == "SUCCEEDED"
    assert [name for name, _payload in fake.calls] == ["ModelStepFunction", "FailTurnFunction"]
    caught = fake.calls[1][1]["caught"]
    assert caught["Error"] == "ValueError"
    assert json.loads(caught["Cause"])["errorMessage"] == "model exploded"


def test_a_timeout_reported_as_bare_text_is_retried_once_then_caught(moto_server: str) -> None:
    execution, fake = _run(
        moto_server,
        {
            "ModelStepFunction": lambda _p: (200, {}, b"Task timed out after 300.00 seconds"),
            "FailTurnFunction": _failed,
        },
    )

    assert execution.status == "SUCCEEDED"
    assert [name for name, _payload in fake.calls] == [
        "ModelStepFunction",
        "ModelStepFunction",  # Retry on Sandbox.Timedout, once
        "FailTurnFunction",
    ]
    assert fake.calls[2][1]["caught"]["Error"] == "Sandbox.Timedout"


def test_a_result_runs_the_definition_on_to_the_next_task(moto_server: str) -> None:
    def model(payload: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        return _json({**payload, "next": "finish", "next_round": 1, "call_ids": []})

    execution, fake = _run(
        moto_server,
        {
            "ModelStepFunction": model,
            "FinishTurnFunction": lambda p: _json({**p, "status": "completed"}),
        },
    )

    assert execution.status == "SUCCEEDED"
    assert [name for name, _payload in fake.calls] == ["ModelStepFunction", "FinishTurnFunction"]
    assert execution.output == {"session_id": "s-1", "op_id": "op-1", "status": "completed"}


@pytest.fixture
def relay(moto_server: str) -> Iterator[str]:
    """The Step Functions relay (sfn_relay.py) in this process, in front of the moto server."""
    server = sfn_relay.serve("127.0.0.1", free_port(), moto_server)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_task_token_sent_through_the_relay_ends_the_child_turn_wait_and_the_turn_goes_on(
    moto_server: str, relay: str
) -> None:
    # As a function in a container would: its Step Functions endpoint is the relay.
    sfn = seed.client("stepfunctions", relay)
    rounds: list[int] = []

    def model(payload: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        rounds.append(payload["round"])
        if len(rounds) == 1:
            return _json({**payload, "next": "tools", "next_round": 1, "call_ids": ["c-1"]})
        return _json({**payload, "next": "finish", "next_round": 2, "call_ids": []})

    def tool(payload: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        if payload.get("child"):
            # The wait's hold: the token goes back once this invocation has answered, as a
            # child turn's last step would send it from another container.
            token = payload["task_token"]
            threading.Thread(
                target=lambda: sfn.send_task_success(taskToken=token, output="{}")
            ).start()
            return _json({"status": "waiting"})
        if payload["approval"] == "none":
            return _json({**payload, "status": "child_turn", "child_wait_seconds": 600})
        return _json({**payload, "status": "done"})

    execution, fake = _run(
        moto_server,
        {
            "ModelStepFunction": model,
            "ToolStepFunction": tool,
            "FinishTurnFunction": lambda p: _json({**p, "status": "completed"}),
        },
        callbacks_url=f"{relay}{sfn_relay.CALLBACKS_PATH}",
    )

    assert execution.status == "SUCCEEDED"
    tools = [p for name, p in fake.calls if name == "ToolStepFunction"]
    assert [p.get("approval", "wait") for p in tools] == ["none", "wait", "child_ended"]
    assert [name for name, _p in fake.calls][-2:] == ["ModelStepFunction", "FinishTurnFunction"]
    assert execution.output["status"] == "completed"


def test_the_relay_forwards_step_functions_calls_and_keeps_only_the_callbacks(
    moto_server: str, relay: str
) -> None:
    names = seed.LocalNames.from_env_file()
    seed.create_resources(moto_server, names)
    sfn = seed.client("stepfunctions", relay)
    sfn.start_execution(stateMachineArn=names.state_machine_arn, name="op-r", input="{}")
    sfn.send_task_failure(taskToken="t-1", error="E", cause="why")
    sfn.send_task_success(taskToken="t-2", output='{"a": 1}')

    direct = seed.client("stepfunctions", moto_server)
    listed = direct.list_executions(stateMachineArn=names.state_machine_arn)["executions"]
    assert [e["name"] for e in listed] == ["op-r"]  # forwarded to moto
    page = httpx.get(f"{relay}{sfn_relay.CALLBACKS_PATH}", params={"after": 1}).json()
    assert page["callbacks"] == [
        {"operation": "SendTaskSuccess", "request": {"taskToken": "t-2", "output": '{"a": 1}'}}
    ]


def test_a_callback_no_wait_holds_is_answered_with_its_error_code() -> None:
    from moto import mock_aws

    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):  # type: ignore[arg-type]
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        callback = {"operation": "SendTaskSuccess", "request": {"taskToken": "gone"}}
        assert deliver_callback(sfn, callback) == "InvalidToken"
