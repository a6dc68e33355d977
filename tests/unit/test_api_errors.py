"""The error contract: JSON bodies everywhere, and a 500 only for a genuine bug (logged)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from mangum import Mangum

from tests.support.api_client import USER, ApiHarness, auth, make_harness
from tests.support.lambda_host import FakeContext
from turnkeep.api import LocalLauncher, sessions
from turnkeep.api.__main__ import resume_unfinished
from turnkeep.envelope import EnvelopeUnavailableError
from turnkeep.harness import StartTurnInput, new_op_id, start_turn, turn_result
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime import build_runtime
from turnkeep.settings import TurnkeepSettings


@pytest.fixture
def api() -> Iterator[ApiHarness]:
    yield from make_harness()


def _boom(*_args: object) -> None:
    raise RuntimeError("a genuine bug")


def test_a_genuine_bug_is_a_logged_json_500(
    api: ApiHarness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sid = api.session()
    monkeypatch.setattr(sessions, "session_view", _boom)
    with caplog.at_level(logging.ERROR, logger="turnkeep.api"):
        response = api.client.get(f"/sessions/{sid}", headers=auth())
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert "a genuine bug" not in response.text  # internals stay in the log
    assert any("a genuine bug" in (r.exc_text or "") for r in caplog.records)


def test_a_genuine_bug_behind_mangum_still_answers_the_json_500(
    api: ApiHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.session("x")
    monkeypatch.setattr(sessions, "session_view", _boom)
    event = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/sessions/x",
        "rawQueryString": "",
        "headers": {"authorization": f"Bearer dev-{USER}"},
        "requestContext": {
            "http": {"method": "GET", "path": "/sessions/x", "protocol": "HTTP/1.1",
                     "sourceIp": "203.0.113.1", "userAgent": "t"},
            "requestId": "r", "routeKey": "$default", "stage": "$default",
            "accountId": "1", "apiId": "a", "domainName": "d", "domainPrefix": "d",
            "time": "t", "timeEpoch": 0,
        },
        "isBase64Encoded": False,
    }  # fmt: skip
    context: Any = FakeContext(function_name="api")
    answer = Mangum(cast(Any, api.client.app), lifespan="off")(event, context)
    assert answer["statusCode"] == 500
    assert json.loads(answer["body"])["error"]["code"] == "internal_error"


def test_an_unavailable_store_is_503_not_500(
    api: ApiHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(*_args: object, **_kwargs: object) -> None:
        raise EnvelopeUnavailableError("DynamoDB throttled the read")

    monkeypatch.setattr(api.runtime.envelopes, "get_for_owner", down)
    response = api.client.get("/sessions/anything", headers=auth())
    assert response.status_code == 503
    assert response.json()["error"] == {
        "code": "unavailable",
        "message": "DynamoDB throttled the read",
    }


def test_create_session_without_a_body_uses_defaults(api: ApiHarness) -> None:
    response = api.client.post("/sessions", headers=auth())
    assert response.status_code == 201
    assert response.json()["session_id"].startswith("s-")
    assert response.json()["meta"] == {}


def test_local_server_start_up_relaunches_turns_left_running(tmp_path: Path) -> None:
    settings = TurnkeepSettings(local_dir=tmp_path)
    runtime = build_runtime(settings, provider=ScriptedProvider())
    try:
        runtime.envelopes.create("left-running", "u1")
        op = new_op_id()
        start_turn(
            runtime.deps,
            StartTurnInput(session_id="left-running", op_id=op, user_id="u1", text="hello"),
        )
        launcher = LocalLauncher(runtime.deps)
        try:
            assert resume_unfinished(runtime, launcher) == [f"left-running/{op}"]
            assert launcher.wait_idle(30)
        finally:
            launcher.shutdown()
        result = turn_result(runtime.deps, "left-running", op)
        assert result is not None
        assert result.status == "completed"
    finally:
        runtime.close()
