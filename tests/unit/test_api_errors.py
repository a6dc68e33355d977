"""The error contract: JSON bodies everywhere, and a 500 only for a genuine bug (logged)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from mangum import Mangum

from tests.support.api_client import USER, ApiHarness, auth, make_api_harness
from tests.support.lambda_host import FakeContext
from tests.support.owners import dead_owner
from turnkeep.api import ApiSettings, LaunchError, LocalLauncher, sessions
from turnkeep.api.__main__ import resume_unfinished
from turnkeep.envelope import EnvelopeUnavailableError
from turnkeep.harness import StartTurnInput, new_op_id, start_turn, turn_result
from turnkeep.harness.local_owner import record_owner
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime.build import build_runtime
from turnkeep.runtime.settings import TurnkeepSettings


@pytest.fixture
def small_body_api() -> Iterator[ApiHarness]:
    yield from make_api_harness(settings=ApiSettings(max_body_bytes=2048))


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
        with runtime.deps.open_storage("left-running") as storage:
            record_owner(storage, op, dead_owner())  # the server that drove it is gone
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


def test_a_chunked_body_over_the_limit_is_413_even_without_content_length(
    small_body_api: ApiHarness,
) -> None:
    api = small_body_api
    sid = api.session()
    before = api.snapshot(sid)

    def chunks() -> Iterator[bytes]:
        yield b'{"text": "'
        for _ in range(10):
            yield b"x" * 1024
        yield b'"}'

    response = api.client.post(
        f"/sessions/{sid}/turns",
        content=chunks(),
        headers={**auth(), "content-type": "application/json"},
    )
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "body_too_large"
    assert "2048" in response.json()["error"]["message"]
    assert api.snapshot(sid) == before


def test_a_chunked_body_under_the_limit_is_read_normally(small_body_api: ApiHarness) -> None:
    api = small_body_api
    sid = api.session()

    def chunks() -> Iterator[bytes]:
        yield b'{"title": '
        yield b'"small"}'

    response = api.client.put(
        f"/sessions/{sid}/meta",
        content=chunks(),
        headers={**auth(), "content-type": "application/json"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["meta"] == {"title": "small"}


def test_openapi_documents_the_json_error_shape_not_fastapis_default(api: ApiHarness) -> None:
    spec = api.client.get("/openapi.json").json()
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    error = spec["components"]["schemas"]["ErrorBody"]
    assert error["required"] == ["error"]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            assert "401" in responses, (method, path)
            for status in ("401", "422"):
                if status not in responses:
                    continue
                schema = responses[status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path)
            if "{session_id}" in path:
                assert "404" in responses, (method, path)
    start = spec["paths"]["/sessions/{session_id}/turns"]["post"]["responses"]
    assert {"409", "429", "503"} <= set(start)
    cancel = spec["paths"]["/sessions/{session_id}/turns/{turn_id}/cancel"]["post"]["responses"]
    assert "200" in cancel


def test_local_server_start_up_survives_more_unfinished_turns_than_the_launcher_accepts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = TurnkeepSettings(local_dir=tmp_path)
    runtime = build_runtime(settings, provider=ScriptedProvider())
    try:
        ops = {}
        for sid in ("left-a", "left-b"):
            runtime.envelopes.create(sid, "u1")
            ops[sid] = new_op_id()
            with runtime.deps.open_storage(sid) as storage:
                record_owner(storage, ops[sid], dead_owner())
            start_turn(
                runtime.deps,
                StartTurnInput(session_id=sid, op_id=ops[sid], user_id="u1", text="hello"),
            )

        class FullAfterOne(LocalLauncher):
            def launch(self, session_id: str, op_id: str) -> None:
                if self.pending() or session_id != "left-a":
                    raise LaunchError("the local orchestrator already holds 1 turns")
                self.launched = (session_id, op_id)

        launcher = FullAfterOne(runtime.deps)
        try:
            with caplog.at_level(logging.WARNING, logger="turnkeep.api"):
                resumed = resume_unfinished(runtime, launcher)
            assert resumed == [f"left-a/{ops['left-a']}"]
            assert any("left-b" in r.getMessage() for r in caplog.records)
        finally:
            launcher.shutdown()
    finally:
        runtime.close()


def test_a_body_python_cannot_parse_is_a_400_invalid_body_and_changes_nothing(
    api: ApiHarness,
) -> None:
    sid = api.session()
    before = api.snapshot(sid)
    response = api.client.put(
        f"/sessions/{sid}/meta",
        content=b'{"title": ' + b"9" * 5000 + b"}",
        headers={**auth(), "content-type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_body"
    assert api.snapshot(sid) == before


@pytest.mark.parametrize(
    ("method", "path", "key"),
    [("POST", "/sessions", "k" * 20000), ("PUT", "/sessions/{sid}/meta", "k" * 20000)],
)
def test_an_enormous_unknown_key_is_named_briefly_not_echoed_whole(
    api: ApiHarness, method: str, path: str, key: str
) -> None:
    sid = api.session()
    response = api.client.request(method, path.format(sid=sid), json={key: "v"}, headers=auth())
    assert 400 <= response.status_code < 500
    error = response.json()["error"]
    assert len(error["message"]) < 500
    assert len(error.get("field", "")) < 200
    assert "kkkk" in error["message"]
