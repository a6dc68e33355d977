"""Every sample event in events/api/ drives the real API handler (functions/api/app.py) under
moto: DynamoDB table and S3 bucket from template.yaml, a Step Functions state machine whose
executions are only recorded. Each sample answers its documented status code."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import boto3
import pytest

from tests.support.lambda_env import lambda_deployment
from tests.support.lambda_host import ROOT, FakeContext, load_function_module
from turnkeep.aws_lambda import container
from turnkeep.harness import StartTurnInput, resume_turn, start_turn

EVENTS = ROOT / "events" / "api"
TABLE = "turnkeep-sessions"
BUCKET = "turnkeep-progress"
SESSION = "sample-session"
SAMPLE_TURN = "op-sample-0001"
USER = "user-sample"

# The documented answer of each sample (docs/api.md), in the order they are sent.
EXPECTED = {
    "create_session": 201,
    "put_meta": 200,
    "start_turn": 202,
    "get_events": 200,
    "cancel_turn": 202,
}


def _event(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))
    return data


@pytest.fixture
def lambda_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ModuleType, Any, str]]:
    with lambda_deployment(monkeypatch, TABLE, BUCKET):
        sfn = boto3.client("stepfunctions")
        arn = sfn.create_state_machine(
            name="turn",
            definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
            roleArn="arn:aws:iam::123456789012:role/turn",
        )["stateMachineArn"]
        monkeypatch.setenv("TURNKEEP_STATE_MACHINE_ARN", arn)
        container.reset_runtime()
        yield load_function_module("api"), sfn, arn


def _call(app: ModuleType, event: dict[str, Any]) -> tuple[int, Any]:
    answer: dict[str, Any] = app.handler(event, FakeContext(function_name="api"))
    body = json.loads(answer["body"]) if answer.get("body") else None
    return int(answer["statusCode"]), body


def test_every_sample_event_is_documented() -> None:
    assert {p.stem for p in EVENTS.glob("*.json")} == set(EXPECTED)


def test_sample_events_answer_their_documented_status_codes(
    lambda_env: tuple[ModuleType, Any, str],
) -> None:
    app, sfn, arn = lambda_env
    answers: dict[str, tuple[int, Any]] = {}

    answers["create_session"] = _call(app, _event("create_session"))
    assert answers["create_session"][1]["session_id"] == SESSION
    answers["put_meta"] = _call(app, _event("put_meta"))
    assert answers["put_meta"][1]["meta"] == {"title": "Renamed session", "reasoningEffort": "low"}

    answers["start_turn"] = _call(app, _event("start_turn"))
    started = answers["start_turn"][1]["turn_id"]
    executions = sfn.list_executions(stateMachineArn=arn)["executions"]
    assert [e["name"] for e in executions] == [started]
    described = sfn.describe_execution(executionArn=executions[0]["executionArn"])
    assert json.loads(described["input"]) == {"session_id": SESSION, "op_id": started, "round": 0}

    # The state machine's work, done here: run the launched turn to its end, then start the
    # turn the remaining samples name (as another start would have).
    deps = container.runtime().deps
    assert resume_turn(deps, SESSION, started).status == "completed"
    start_turn(
        deps,
        StartTurnInput(session_id=SESSION, op_id=SAMPLE_TURN, user_id=USER, text="hello"),
    )

    answers["get_events"] = _call(app, _event("get_events"))
    events = answers["get_events"][1]["events"]
    assert events[0]["entry_id"] == f"{SAMPLE_TURN}:user"
    answers["cancel_turn"] = _call(app, _event("cancel_turn"))
    assert answers["cancel_turn"][1]["status"] == "cancelling"

    assert {name: status for name, (status, _body) in answers.items()} == EXPECTED
    assert set(answers) == {p.stem for p in EVENTS.glob("*.json")}


def test_a_sample_without_authorizer_claims_is_401(
    lambda_env: tuple[ModuleType, Any, str],
) -> None:
    app, _sfn, _arn = lambda_env
    event = copy.deepcopy(_event("create_session"))
    del event["requestContext"]["authorizer"]
    event["headers"]["authorization"] = "Bearer dev-user-sample"  # never honoured on Lambda
    status, body = _call(app, event)
    assert status == 401
    assert body["error"]["code"] == "unauthenticated"


def test_another_users_claims_see_404_for_the_sample_session(
    lambda_env: tuple[ModuleType, Any, str],
) -> None:
    app, _sfn, _arn = lambda_env
    assert _call(app, _event("create_session"))[0] == 201
    event = copy.deepcopy(_event("put_meta"))
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = "someone-else"
    status, body = _call(app, event)
    assert status == 404
    assert body["error"]["code"] == "not_found"
