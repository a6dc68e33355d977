"""The API Lambda in the environment a deployment gives it (template.yaml's declared variables,
resolved) never accepts a dev token (only SAM's container marker switches them on) and names the
stack's WebSocket API at `GET /live`."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.support.lambda_host import ROOT, FakeContext, load_function_module
from tools.sam_local.template import (
    create_bucket,
    create_table,
    deployed_environment,
    load_template,
)
from turnkeep.aws_lambda import container

TABLE = "turnkeep-SessionTable-1ABC"
BUCKET = "turnkeep-progressbucket-1abc"


def _refs(template: dict[str, Any], machine_arn: str) -> dict[str, str]:
    refs = {
        name: str(spec.get("Default", f"{name.lower()}-value"))
        for name, spec in template["Parameters"].items()
    }
    refs |= {
        "SessionTable": TABLE,
        "ProgressBucket": BUCKET,
        "TurnStateMachine": machine_arn,
        "AWS::Region": "us-east-1",
        "AWS::URLSuffix": "amazonaws.com",
        "WebSocketApi": "wsapi01",
    }
    return refs


@pytest.fixture
def deployed_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ModuleType, dict[str, str]]]:
    for key in ("AWS_SAM_LOCAL", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    with mock_aws():
        template = load_template()
        create_table(boto3.client("dynamodb"), TABLE, template)
        create_bucket(boto3.client("s3"), BUCKET, template)
        machine = boto3.client("stepfunctions").create_state_machine(
            name="turn",
            definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
            roleArn="arn:aws:iam::123456789012:role/turn",
        )["stateMachineArn"]
        env = deployed_environment(template, "ApiFunction", _refs(template, machine))
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        container.reset_runtime()
        yield load_function_module("api"), env
        container.reset_runtime()


def _create_with_dev_token(app: ModuleType) -> tuple[int, Any]:
    sample = json.loads((ROOT / "events" / "api" / "create_session.json").read_text("utf-8"))
    event = copy.deepcopy(sample)
    del event["requestContext"]["authorizer"]  # what start-api sends: no authorizer ran
    event["headers"]["authorization"] = "Bearer dev-user-sample"
    answer = app.handler(event, FakeContext(function_name="api"))
    return int(answer["statusCode"]), json.loads(answer["body"])


def test_a_deployed_shaped_environment_rejects_dev_tokens(
    deployed_api: tuple[ModuleType, dict[str, str]],
) -> None:
    app, env = deployed_api
    assert env["AWS_ENDPOINT_URL"] == ""  # declared empty: the SDK's default endpoint
    assert "AWS_SAM_LOCAL" not in env

    status, body = _create_with_dev_token(app)

    assert status == 401
    assert body["error"]["code"] == "unauthenticated"


def test_the_same_environment_inside_a_sam_local_container_accepts_them(
    deployed_api: tuple[ModuleType, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _env = deployed_api
    monkeypatch.setenv("AWS_SAM_LOCAL", "true")  # set by SAM CLI in its containers only

    status, body = _create_with_dev_token(app)

    assert status == 201
    assert body["session_id"] == "sample-session"


def test_the_deployed_api_names_the_stacks_websocket_url_and_no_stream_route(
    deployed_api: tuple[ModuleType, dict[str, str]],
) -> None:
    app, env = deployed_api
    sample = json.loads((ROOT / "events" / "api" / "start_turn.json").read_text("utf-8"))
    event = copy.deepcopy(sample)
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/live"
    event["requestContext"]["http"]["method"] = "GET"
    event["rawQueryString"], event["body"] = "", None

    answer = app.handler(event, FakeContext(function_name="api"))

    assert answer["statusCode"] == 200, answer
    assert json.loads(answer["body"]) == {
        "websocket_url": "wss://wsapi01.execute-api.us-east-1.amazonaws.com/live",
        "stream": False,
    }
    assert env["TURNKEEP_LIVE_URL"] == "wss://wsapi01.execute-api.us-east-1.amazonaws.com/live"
