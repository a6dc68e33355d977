"""Identity: JWT authorizer claims on Lambda (via Mangum), dev tokens only locally."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from mangum import Mangum

from tests.support.api_client import RecordingLauncher
from tests.support.lambda_host import FakeContext
from turnkeep.api import JwtClaimsAuthenticator, create_app
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime.build import build_runtime
from turnkeep.runtime.settings import TurnkeepSettings


@pytest.fixture
def jwt_app() -> Iterator[FastAPI]:
    name = f"auth-{uuid.uuid4().hex[:8]}"
    runtime = build_runtime(
        TurnkeepSettings(storage_url=f"memory://{name}", envelope_url=f"memory://{name}"),
        provider=ScriptedProvider(),
    )
    yield create_app(runtime, RecordingLauncher(runtime, run=True), JwtClaimsAuthenticator())
    runtime.close()


def _event(method: str, path: str, body: Any = None, claims: dict[str, str] | None = None,
           headers: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "api",
        "domainName": "api.example.com",
        "domainPrefix": "api",
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": "203.0.113.1",
            "userAgent": "t",
        },
        "requestId": "r",
        "routeKey": "$default",
        "stage": "$default",
        "time": "30/Nov/2026:18:00:00 +0000",
        "timeEpoch": 1796061600000,
    }
    if claims is not None:
        context["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json", **(headers or {})},
        "requestContext": context,
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
    }


def _context() -> Any:
    return FakeContext(function_name="api")


def test_the_user_is_the_sub_claim_of_the_jwt_authorizer(jwt_app: FastAPI) -> None:
    handler = Mangum(jwt_app, lifespan="off")
    created = handler(_event("POST", "/sessions", {"title": "t"}, {"sub": "user-a"}), _context())
    assert created["statusCode"] == 201
    sid = json.loads(created["body"])["session_id"]
    mine = handler(_event("GET", f"/sessions/{sid}", claims={"sub": "user-a"}), _context())
    theirs = handler(_event("GET", f"/sessions/{sid}", claims={"sub": "user-b"}), _context())
    assert mine["statusCode"] == 200
    assert theirs["statusCode"] == 404


def test_jwt_mode_never_accepts_a_dev_token(jwt_app: FastAPI) -> None:
    handler = Mangum(jwt_app, lifespan="off")
    event = _event("GET", "/sessions", headers={"authorization": "Bearer dev-user-a"})
    answer = handler(event, _context())
    assert answer["statusCode"] == 401
    assert json.loads(answer["body"])["error"]["code"] == "unauthenticated"
    with TestClient(jwt_app) as client:
        response = client.get("/sessions", headers={"Authorization": "Bearer dev-user-a"})
        assert response.status_code == 401


@pytest.mark.parametrize("claims", [{}, {"sub": ""}, {"email": "a@example.com"}])
def test_missing_or_empty_sub_claim_is_401(jwt_app: FastAPI, claims: dict[str, str]) -> None:
    answer = Mangum(jwt_app, lifespan="off")(_event("GET", "/sessions", claims=claims), _context())
    assert answer["statusCode"] == 401


def test_a_user_id_in_the_body_is_refused_not_used(jwt_app: FastAPI) -> None:
    handler = Mangum(jwt_app, lifespan="off")
    answer = handler(
        _event("POST", "/sessions", {"owner_id": "user-b"}, {"sub": "user-a"}), _context()
    )
    assert answer["statusCode"] == 422


def test_an_unauthenticated_request_with_malformed_json_is_401_not_422(jwt_app: FastAPI) -> None:
    event = _event("POST", "/sessions", None)
    event["body"] = "{not json"
    answer = Mangum(jwt_app, lifespan="off")(event, _context())
    assert answer["statusCode"] == 401
    assert json.loads(answer["body"])["error"]["code"] == "unauthenticated"
