"""Dev tokens under `sam local` only: `lambda_authenticator` follows SAM's container marker."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from mangum import Mangum

from tests.support.api_client import RecordingLauncher
from tests.support.lambda_host import FakeContext
from turnkeep.api import (
    JwtClaimsAuthenticator,
    SamLocalAuthenticator,
    create_app,
    lambda_authenticator,
)
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime.build import build_runtime
from turnkeep.runtime.settings import TurnkeepSettings


@pytest.mark.parametrize(
    "environ",
    [{}, {"AWS_SAM_LOCAL": "false"}, {"AWS_SAM_LOCAL": "1"}, {"AWS_SAM_LOCAL": "TRUE"},
     {"AWS_SAM_LOCAL": ""}, {"SAM_LOCAL": "true"}],
)  # fmt: skip
def test_outside_sam_local_the_lambda_authenticator_reads_jwt_claims_only(
    environ: dict[str, str],
) -> None:
    assert isinstance(lambda_authenticator(environ), JwtClaimsAuthenticator)


def test_sams_container_marker_switches_on_dev_tokens() -> None:
    assert isinstance(lambda_authenticator({"AWS_SAM_LOCAL": "true"}), SamLocalAuthenticator)


@pytest.fixture
def sam_local_app() -> Iterator[Mangum]:
    name = f"samauth-{uuid.uuid4().hex[:8]}"
    runtime = build_runtime(
        TurnkeepSettings(storage_url=f"memory://{name}", envelope_url=f"memory://{name}"),
        provider=ScriptedProvider(),
    )
    app: FastAPI = create_app(runtime, RecordingLauncher(runtime), SamLocalAuthenticator())
    yield Mangum(app, lifespan="off")
    runtime.close()


def _event(path: str, method: str = "GET", *, token: str | None = None,
           sub: str | None = None, body: Any = None) -> dict[str, Any]:  # fmt: skip
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "local",
        "domainName": "127.0.0.1",
        "domainPrefix": "local",
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": "127.0.0.1",
            "userAgent": "t",
        },
        "requestId": "r",
        "routeKey": "$default",
        "stage": "$default",
        "time": "30/Nov/2026:18:00:00 +0000",
        "timeEpoch": 1796061600000,
    }
    if sub is not None:
        context["authorizer"] = {"jwt": {"claims": {"sub": sub}, "scopes": None}}
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": context,
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
    }


def _call(handler: Mangum, event: dict[str, Any]) -> tuple[int, Any]:
    answer = handler(event, FakeContext(function_name="api"))
    return int(answer["statusCode"]), json.loads(answer["body"]) if answer["body"] else None


def test_start_api_requests_name_their_user_by_dev_token(sam_local_app: Mangum) -> None:
    status, body = _call(
        sam_local_app, _event("/sessions", "POST", token="dev-alice", body={"title": "t"})
    )
    assert status == 201
    session = body["session_id"]
    assert _call(sam_local_app, _event(f"/sessions/{session}", token="dev-alice"))[0] == 200
    assert _call(sam_local_app, _event(f"/sessions/{session}", token="dev-bob"))[0] == 404


def test_claims_in_a_sample_event_win_over_any_header(sam_local_app: Mangum) -> None:
    status, body = _call(
        sam_local_app,
        _event("/sessions", "POST", token="dev-mallory", sub="alice", body={"title": "t"}),
    )
    assert status == 201
    session = body["session_id"]
    assert _call(sam_local_app, _event(f"/sessions/{session}", sub="alice"))[0] == 200
    assert _call(sam_local_app, _event(f"/sessions/{session}", token="dev-mallory"))[0] == 404


@pytest.mark.parametrize("token", [None, "not-a-dev-token", "dev-", "dev-bad user"])
def test_without_a_usable_dev_token_or_claims_the_answer_is_401(
    sam_local_app: Mangum, token: str | None
) -> None:
    status, body = _call(sam_local_app, _event("/sessions", token=token))
    assert status == 401
    assert body["error"]["code"] == "unauthenticated"
